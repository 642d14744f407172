"""Caller credentials are per request (issue 27): two concurrent POSTs of one session carrying two
different tokens each forward their own token, never the other's.

The session belongs to one principal with two API keys (a key being rotated): both POSTs are
admitted to the same session. The upstream is a real loopback HTTP server behind an OpenAPI
connector with ``auth.forward_caller``; it holds each request until both have arrived, so the two
calls are truly in flight together, then answers with the Authorization header it received."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from tests.e2e.rawhttp import ACCEPT, initialize, messages_of, sse_events
from tests.support import running_gateway

SPEC = {
    "openapi": "3.0.3",
    "info": {"title": "echo", "version": "1"},
    "paths": {"/whoami": {"get": {"operationId": "whoami", "responses": {"200": {"description": "the caller",
        "content": {"application/json": {"schema": {"type": "object"}}}}}}}},
}
KEYS = ("Bearer key-one", "Bearer key-two")


@asynccontextmanager
async def echo_upstream(pairs: int) -> AsyncIterator[str]:
    """Answers GET /whoami with ``{"authorization": <header>}``, each request once its partner
    (the next arrival) is in too: requests are released two by two."""
    arrived: list[asyncio.Event] = []

    async def whoami(request: web.Request) -> web.Response:
        index = len(arrived)
        arrived.append(asyncio.Event())
        partner = index + 1 if index % 2 == 0 else index - 1
        if index % 2 == 1:
            arrived[partner].set()
            arrived[index].set()
        async with asyncio.timeout(10):  # bounded: a missing partner fails the test, it never hangs
            await arrived[index].wait()
        return web.json_response({"authorization": request.headers.get("Authorization")})

    app = web.Application()
    app.router.add_get("/whoami", whoami)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
    assert len(arrived) == 2 * pairs


def _config(tmp_path: Path, base_url: str) -> str:
    spec = tmp_path / "echo.json"
    spec.write_text(json.dumps(SPEC))
    return f"""
audit: {{enabled: false}}
auth:
  api_keys:
    - {{name: alice, key: key-one}}
    - {{name: alice, key: key-two}}
connectors:
  - name: echo
    type: openapi
    spec: {spec}
    base_url: {base_url}
    auth: {{forward_caller: true}}
"""


def _echoed(reply: dict[str, Any]) -> str:
    assert "result" in reply, reply
    # The text content: 2024-11-05 (legacy SSE here) has no structuredContent.
    return str(json.loads(reply["result"]["content"][0]["text"])["authorization"])


def _call(rid: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "echo_whoami", "arguments": {}}}


async def test_concurrent_streamable_http_posts_forward_each_their_own_token(tmp_path: Path) -> None:
    pairs = 4
    async with echo_upstream(pairs) as base_url, running_gateway(_config(tmp_path, base_url)) as gw, \
            aiohttp.ClientSession(headers={"Authorization": KEYS[0]}) as http:
        session = await initialize(http, gw.mcp_url)

        async def call(rid: int, token: str) -> str:
            async with session.post(_call(rid), Authorization=token) as resp:
                assert resp.status == 200, await resp.text()
                [reply] = await messages_of(resp)
            return _echoed(reply)

        for round_ in range(pairs):
            got = await asyncio.gather(call(10 * round_ + 1, KEYS[0]), call(10 * round_ + 2, KEYS[1]))
            assert got == list(KEYS), f"round {round_}: the calls forwarded {got}"


async def test_concurrent_sse_posts_forward_each_their_own_token(tmp_path: Path) -> None:
    """Legacy SSE serves a POST in a task of its own after answering 202: the credential must
    travel with that task, not sit on the session for whichever task reads it first."""
    pairs = 4
    async with echo_upstream(pairs) as base_url, running_gateway(_config(tmp_path, base_url)) as gw, \
            aiohttp.ClientSession() as http:
        stream = await http.get(gw.sse_url, headers={"Authorization": KEYS[0], "Accept": ACCEPT})
        events = sse_events(stream)
        _, endpoint = await anext(events)
        url = gw.url + endpoint

        async def post(message: dict[str, Any], token: str) -> None:
            async with http.post(url, json=message, headers={"Authorization": token}) as resp:
                assert resp.status == 202, await resp.text()

        async def replies(count: int) -> dict[int, dict[str, Any]]:
            out: dict[int, dict[str, Any]] = {}
            async with asyncio.timeout(20):
                while len(out) < count:
                    _, data = await anext(events)
                    message = json.loads(data)
                    out[message["id"]] = message
            return out

        await post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}, KEYS[0])
        await replies(1)
        await post({"jsonrpc": "2.0", "method": "notifications/initialized"}, KEYS[0])
        for round_ in range(pairs):
            first, second = 10 * round_ + 1, 10 * round_ + 2
            await asyncio.gather(post(_call(first), KEYS[0]), post(_call(second), KEYS[1]))
            got = await replies(2)
            assert [_echoed(got[first]), _echoed(got[second])] == list(KEYS), f"round {round_}: {got}"
        stream.close()
