"""Streamable HTTP details against a scripted upstream (aiohttp on loopback): static headers, the
session id and protocol version headers, JSON responses, version negotiation, resumption of a cut
response stream with Last-Event-ID, and an upstream that stops speaking 2026-07-28 (which no SDK
server does: it answers UnsupportedProtocolVersion naming only legacy versions)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web

from connectors.mcp.config import MCPConfig
from connectors.mcp.connector import MCPConnector
from gateway.protocol.errors import BackendUnavailable
from tests.connectors.mcp.helpers import DummySession, Events, make_ctx


class Scripted:
    """A minimal Streamable HTTP MCP server; ``version`` is what it answers to initialize."""

    def __init__(self, version: str = "2025-03-26") -> None:
        self.version = version
        self.posts: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.gets: list[dict[str, str]] = []
        self.cut_stream = False  # cut the tools/call stream after a priming event, resume on GET
        self.token: str | None = None  # when set, requests without "Bearer <token>" get 401
        self.moved_to: str | None = None  # when set, every POST is redirected there
        self.html_calls = False  # when set, tools/call answers 200 with an HTML page
        self.modern = False  # when set, it also serves 2026-07-28 requests (server/discover ...)
        self.downgraded = False  # when set, 2026-07-28 requests get -32022 naming legacy versions only

    async def post(self, request: web.Request) -> web.StreamResponse:
        msg = await request.json()
        self.posts.append((dict(request.headers), msg))
        if self.token is not None and request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.Response(status=401, text="unauthorized")
        if self.moved_to is not None:
            return web.Response(status=307, headers={"Location": self.moved_to})
        if "id" not in msg:
            return web.Response(status=202)
        method = msg.get("method")
        version = ((msg.get("params") or {}).get("_meta") or {}).get("io.modelcontextprotocol/protocolVersion")
        if version == "2026-07-28" and self.modern and self.downgraded:
            error = {"code": -32022, "message": "Unsupported protocol version",
                     "data": {"supported": ["2025-11-25", "2025-03-26"], "requested": version}}
            return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "error": error}, status=400)
        if method == "server/discover" and self.modern:
            result = {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                      "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "scripted", "version": "2"}}}
            return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        if method == "initialize":
            result = {"protocolVersion": self.version, "capabilities": {"tools": {}},
                      "serverInfo": {"name": "scripted", "version": "1"}}
            return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "result": result},
                                     headers={"Mcp-Session-Id": "sess-1"})
        if method == "tools/list":
            tools = [{"name": "hello", "inputSchema": {"type": "object"}}]
            return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": tools}})
        if method == "tools/call" and self.html_calls:
            return web.Response(text="<html>maintenance</html>", content_type="text/html")
        if method == "tools/call" and self.cut_stream:
            self.pending = msg["id"]
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(b"id: ev-1\nretry: 10\ndata:\n\n")
            return resp  # ends the stream without the response
        if method == "tools/call":
            result = {"content": [{"type": "text", "text": "hi"}]}
            return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        return web.json_response({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "nope"}})

    async def get(self, request: web.Request) -> web.StreamResponse:
        self.gets.append(dict(request.headers))
        if request.headers.get("Last-Event-ID") == "ev-1":
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            answer = {"jsonrpc": "2.0", "id": self.pending, "result": {"content": [{"type": "text", "text": "resumed"}]}}
            await resp.write(b"id: ev-2\ndata: " + json.dumps(answer).encode() + b"\n\n")
            return resp
        return web.Response(status=405)


@asynccontextmanager
async def scripted(server: Scripted, **cfg: Any) -> AsyncIterator[tuple[MCPConnector, Scripted]]:
    app = web.Application()
    app.router.add_post("/mcp", server.post)
    app.router.add_get("/mcp", server.get)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    c = MCPConnector(MCPConfig.model_validate({"name": "s", "type": "mcp", "transport": "streamable_http",
                                              "url": f"http://127.0.0.1:{port}/mcp", "ping_interval_s": 0,
                                              "connect_timeout_s": 3, **cfg}))
    try:
        await c.start(Events())
        yield c, server
    finally:
        await c.stop()
        await runner.cleanup()


async def test_headers_session_id_version_and_json_responses() -> None:
    async with scripted(Scripted(), headers={"Authorization": "Bearer t0k"}) as (c, server):
        assert c.health().up and [t.name for t in c.tools()] == ["hello"]
        result = await c.call_tool("hello", {}, make_ctx(DummySession("a")))
        assert result["content"][0]["text"] == "hi"
        # auto: the modern probe first; its -32601 (a legacy server's answer) means initialize.
        probe_headers, probe = server.posts[0]
        assert probe["method"] == "server/discover" and probe_headers["MCP-Protocol-Version"] == "2026-07-28"
        assert probe_headers["Mcp-Method"] == "server/discover" and probe_headers["Authorization"] == "Bearer t0k"
        init_headers, init = server.posts[1]
        assert init["params"]["protocolVersion"] == "2025-11-25"  # we offer the newest
        assert "MCP-Protocol-Version" not in init_headers and "Mcp-Method" not in init_headers
        assert init_headers["Authorization"] == "Bearer t0k" and "Mcp-Session-Id" not in init_headers
        later_headers, _ = server.posts[-1]
        assert later_headers["Authorization"] == "Bearer t0k"
        assert later_headers["mcp-session-id"] == "sess-1"
        assert later_headers["MCP-Protocol-Version"] == "2025-03-26"  # what the upstream answered
        assert c.health().extra["protocol_version"] == "2025-03-26"


async def test_an_upstream_that_stops_speaking_2026_is_found_legacy_and_the_call_retried() -> None:
    server = Scripted()
    server.modern = True
    async with scripted(server) as (c, server):
        assert c.health().extra["protocol_version"] == "2026-07-28"
        assert c.health().extra["server"] == "scripted"
        listener = c._listener  # it answers subscriptions/listen with -32601: not asked again
        assert listener is not None and listener._task is not None
        await listener._task
        assert listener.unsupported
        await c.subscribe("mem://x", make_ctx(DummySession("a"), "resources/subscribe"))  # no listen, no error
        assert sum(m.get("method") == "subscriptions/listen" for _h, m in server.posts) == 1
        server.downgraded = True
        # (a 2026-07-28 caller: a legacy one would reach this dual-era server over a session)
        result = await c.call_tool("hello", {}, make_ctx(DummySession("a", protocol_version="2026-07-28")))
        assert result["content"][0]["text"] == "hi"
        assert c.health().up and c.health().extra["protocol_version"] == "2025-03-26"
        # the refused call, the era found again (legacy this time), the listing, the retried call
        methods = [m.get("method") for _h, m in server.posts if m.get("method") != "resources/subscribe"]
        assert methods[-6:] == ["tools/call", "server/discover", "initialize", "notifications/initialized",
                                "tools/list", "tools/call"]


async def test_unsupported_upstream_version_keeps_it_down() -> None:
    async with scripted(Scripted(version="1999-01-01")) as (c, _server):
        assert not c.health().up and "1999-01-01" in c.health().detail


async def test_cut_response_stream_is_resumed_with_last_event_id() -> None:
    server = Scripted()
    server.cut_stream = True
    async with scripted(server) as (c, server):
        result = await c.call_tool("hello", {}, make_ctx(DummySession("a")))
        assert result["content"][0]["text"] == "resumed"
        assert any(h.get("Last-Event-ID") == "ev-1" for h in server.gets)


async def test_refused_credentials_say_so() -> None:
    server = Scripted()
    server.token = "right"
    async with scripted(server, headers={"Authorization": "Bearer wrong"}) as (c, _server):
        assert not c.health().up
        assert "HTTP 401" in c.health().detail and "credentials" in c.health().detail


async def test_an_answer_that_is_not_json_rpc_fails_the_call_at_once() -> None:
    server = Scripted()
    server.html_calls = True
    async with scripted(server, timeout_s=30) as (c, _server):
        started = time.monotonic()
        with pytest.raises(BackendUnavailable, match=r"answered HTTP 200 \(text/html.*without a JSON-RPC response"):
            await c.call_tool("hello", {}, make_ctx(DummySession("a")))
        assert time.monotonic() - started < 10  # not left waiting for the 30 s timeout
        assert c.health().up  # one odd answer does not take the upstream down


async def test_a_redirect_is_named_not_followed() -> None:
    server = Scripted()
    server.moved_to = "http://elsewhere.internal/mcp"
    async with scripted(server) as (c, _server):
        assert not c.health().up
        assert "HTTP 307 (to http://elsewhere.internal/mcp: set the connector's url to it)" in c.health().detail


@pytest.mark.parametrize("bad", [{"transport": "stdio"}, {"url": "ftp://x"}])
def test_config_errors(bad: dict[str, Any]) -> None:
    from pydantic import ValidationError
    with pytest.raises(ValidationError):
        MCPConfig.model_validate({"name": "s", "type": "mcp", "transport": "streamable_http", "url": "http://h",
                                  **bad})
