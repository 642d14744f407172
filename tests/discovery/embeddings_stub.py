"""A deterministic OpenAI-compatible ``/v1/embeddings`` server on loopback, for tests and the bench.

A text's vector is a hashed bag of its words' *concepts*: each word is lower-cased, crudely
de-inflected, mapped through :data:`CONCEPTS` (a small hand-written table of words that mean the
same thing, which the lexical ranker does not know) and hashed into one of :data:`DIM` buckets. So
"parrot my phrase" lands next to "Echo the text back." although the two share no word.

The stub records what it was sent (requests, inputs, headers) and can misbehave on demand
(``mode``): ``ok``, ``down`` (answers nothing: the test stops it), ``http_500``, ``bad_json``,
``wrong_dim``, ``slow`` (sleeps ``delay`` first), ``huge`` (a body over any small limit),
``redirect`` (307 to ``redirect_to``), ``short`` (one vector fewer than asked).

Run as a program (``python -m tests.discovery.embeddings_stub``) it serves until killed and prints
its URL: the bench runs it in a child process so its CPU is not counted as the gateway's.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

DIM = 256
CONCEPTS = {
    "parrot": "echo", "repeat": "echo", "mirror": "echo", "echo": "echo",
    "phrase": "text", "word": "text", "text": "text", "sentence": "text",
    "vaporise": "delete", "vaporize": "delete", "delete": "delete", "remove": "delete", "erase": "delete",
    "gizmo": "widget", "widget": "widget", "contraption": "widget",
    "grocery": "food", "meal": "food", "food": "food", "snack": "food",
}
_STOP = frozenset("a an the my me of to for in on and or it this that back please".split())
_WORD = re.compile(r"[a-z]+")


def _root(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def vector(text: str, dim: int = DIM) -> list[float]:
    """The stub's embedding of *text* (normalised; all zeros but one bucket for an empty text)."""
    out = [0.0] * dim
    for word in _WORD.findall(text.lower()):
        if word in _STOP:
            continue
        concept = CONCEPTS.get(word) or CONCEPTS.get(_root(word)) or _root(word)
        out[int.from_bytes(hashlib.blake2b(concept.encode(), digest_size=4).digest(), "big") % dim] += 1.0
    norm = math.sqrt(sum(x * x for x in out))
    if not norm:
        out[0] = 1.0
        return out
    return [x / norm for x in out]


@dataclass
class EmbeddingsStub:
    mode: str = "ok"
    delay: float = 0.0
    redirect_to: str = ""
    requests: int = 0
    inputs: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""
    # Set on every request's arrival; while ``gate`` is an unset event, answers wait for it (a
    # server busy with a batch, released by the test: no timing involved).
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    gate: asyncio.Event | None = None
    _runner: web.AppRunner | None = None

    def reset(self) -> None:
        self.requests, self.inputs, self.headers = 0, [], []

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        self.headers.append(dict(request.headers))
        body = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        self.inputs.extend(texts)
        self.arrived.set()
        if self.gate is not None:
            await self.gate.wait()
        mode = self.mode
        if mode == "slow":
            await asyncio.sleep(self.delay)
        if mode == "http_500":
            return web.json_response({"error": {"message": "boom"}}, status=500)
        if mode == "bad_json":
            return web.Response(text='{"data": [', content_type="application/json")
        if mode == "redirect":
            raise web.HTTPTemporaryRedirect(self.redirect_to)
        if mode == "huge":
            return web.Response(body=b" " * (4 << 20), content_type="application/json")
        dim = body.get("dimensions") or DIM
        data = [{"object": "embedding", "index": i,
                 "embedding": vector(t, dim + 1 if mode == "wrong_dim" else dim)} for i, t in enumerate(texts)]
        if mode == "short":
            data = data[:-1]
        data.reverse()  # the index says which is which: clients must not rely on the order
        return web.json_response({"object": "list", "data": data, "model": body.get("model"),
                                  "usage": {"prompt_tokens": 0, "total_tokens": 0}})

    async def start(self, port: int = 0) -> str:
        app = web.Application()
        app.router.add_post("/v1/embeddings", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        bound = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{bound}/v1/embeddings"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


async def _serve() -> None:
    stub = EmbeddingsStub()
    print(json.dumps({"url": await stub.start()}), flush=True)
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> Any:
    del argv
    try:
        asyncio.run(_serve())
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
