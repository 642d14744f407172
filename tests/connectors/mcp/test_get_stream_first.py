"""A legacy Streamable HTTP upstream session is used only once its GET stream is open.

The flake this pins (tests/e2e/test_bridging_matrix.py, ``2025-11-25-dual-roots``, seen once under
load): an SDK tool's ``ctx.session.list_roots()`` is not related to the call, so the SDK server
sends it on the session's GET stream, and drops it when no GET stream is open yet (no event store).
The gateway opened the dual-era upstream's legacy session on the first legacy call and sent that
call at once, while its GET stream was still connecting: the roots/list was lost and the call hung
to its 60 s deadline. The scripted server below drops such a request the same way; the ordering is
injected by holding the GET's response headers until the test releases them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web

from connectors.mcp import streamable_http
from connectors.mcp.client import UpstreamSession
from connectors.mcp.streamable_http import StreamableHTTPTransport


class Upstream:
    """A legacy Streamable HTTP server whose ``roots`` tool asks roots/list on the GET stream, and
    drops that request (the call then fails at once, not at a deadline) while no GET stream is open.
    ``get_status``: what it answers a GET (200: a stream, opened once ``release`` is set; None: no
    answer ever)."""

    def __init__(self, get_status: int | None = 200) -> None:
        self.get_status = get_status
        self.get_arrived = asyncio.Event()
        self.release = asyncio.Event()
        self.stream: web.StreamResponse | None = None
        self.answers: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.dropped: list[str] = []
        self.done = asyncio.Event()

    async def post(self, request: web.Request) -> web.StreamResponse:
        msg = await request.json()
        if "method" not in msg:  # the client's answer to our request
            self.answers[msg["id"]].set_result(msg)
            return web.Response(status=202)
        if "id" not in msg:
            return web.Response(status=202)
        if msg["method"] == "initialize":
            result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "roots", "version": "1"}}
            return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "result": result},
                                     headers={"Mcp-Session-Id": "s-1"})
        assert msg["method"] == "tools/call", msg
        if self.stream is None:  # the SDK's "Request stream _GET_stream not found for message"
            self.dropped.append("roots/list")
            error = {"code": -32603, "message": "roots/list dropped: no GET stream"}
            return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "error": error})
        self.answers["r-1"] = asyncio.get_running_loop().create_future()
        ask = {"jsonrpc": "2.0", "id": "r-1", "method": "roots/list"}
        await self.stream.write(b"event: message\ndata: " + json.dumps(ask).encode() + b"\n\n")
        answer = await self.answers["r-1"]
        uris = ",".join(r["uri"] for r in answer["result"]["roots"])
        return web.json_response({"jsonrpc": "2.0", "id": msg["id"],
                                  "result": {"content": [{"type": "text", "text": uris}]}})

    async def get(self, request: web.Request) -> web.StreamResponse:
        self.get_arrived.set()
        if self.get_status is None:
            await self.done.wait()
            return web.Response(status=503)
        if self.get_status != 200:
            return web.Response(status=self.get_status)
        await self.release.wait()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)  # the headers go out: the stream is open
        self.stream = resp
        await self.done.wait()
        return resp


class Handler:
    """The connector's side: answers roots/list with one root, records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def on_notification(self, session: UpstreamSession, method: str, params: dict[str, Any], owner: Any) -> None:
        pass

    async def on_request(self, session: UpstreamSession, method: str, params: dict[str, Any],
                         owner: Any) -> dict[str, Any]:
        self.asked.append(method)
        return {"roots": [{"uri": "file:///work/a", "name": "a"}]}

    def on_lost(self, session: UpstreamSession, reason: str) -> None:
        pass


@asynccontextmanager
async def serving(upstream: Upstream) -> AsyncIterator[UpstreamSession]:
    """``upstream`` on loopback, and an (unopened) upstream session to it, closed after."""
    app = web.Application()
    app.router.add_post("/mcp", upstream.post)
    app.router.add_get("/mcp", upstream.get)
    runner = web.AppRunner(app, shutdown_timeout=0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/mcp"
    session = UpstreamSession(
        "up", lambda deliver, lost: StreamableHTTPTransport("up", deliver, lost, url=url, headers={},
                                                            connect_timeout_s=5),
        Handler(), client_info={"name": "gw", "version": "1"}, capabilities={"roots": {}})
    try:
        yield session
    finally:
        upstream.done.set()
        upstream.release.set()  # a GET still held (a failed test) must not hold up the cleanup
        await session.close()
        await runner.cleanup()


async def call_roots(session: UpstreamSession) -> str:
    result = await session.request("tools/call", {"name": "roots", "arguments": {}}, timeout_s=30)
    return str(result["content"][0]["text"])


async def test_the_session_opens_only_once_its_get_stream_is_open() -> None:
    upstream = Upstream()
    async with serving(upstream) as session:
        opening = asyncio.create_task(session.open(5))
        await upstream.get_arrived.wait()
        # Before the fix the session was open here already, and a call sent now lost its roots/list.
        assert not opening.done()
        upstream.release.set()
        await opening
        assert await call_roots(session) == "file:///work/a"
        assert session._handler.asked == ["roots/list"] and upstream.dropped == []  # type: ignore[attr-defined]


async def test_a_server_without_a_get_stream_does_not_hold_the_opening(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streamable_http, "_LISTEN_WAIT_S", 60.0)  # waiting for it would show
    upstream = Upstream(get_status=405)
    async with serving(upstream) as session:
        async with asyncio.timeout(30):
            await session.open(60)
        assert upstream.get_arrived.is_set() and session.alive


async def test_a_get_never_answered_holds_the_opening_only_so_long(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streamable_http, "_LISTEN_WAIT_S", 0.05)
    upstream = Upstream(get_status=None)
    async with serving(upstream) as session:
        await session.open(5)
        assert upstream.get_arrived.is_set() and session.alive
        with pytest.raises(Exception, match="no GET stream"):  # what such a server then drops
            await call_roots(session)
        assert upstream.dropped == ["roots/list"]
