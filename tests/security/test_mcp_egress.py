"""Issue 14, the MCP-upstream part: egress and hostile upstreams over HTTP.

An MCP upstream reached over Streamable HTTP or legacy HTTP+SSE goes through the connector's egress
policy (connectors/egress.py) like an OpenAPI backend: its URL's host is trusted by name for
private addresses (the operator wrote it), but link-local and metadata addresses are refused
unless named in ``allow_hosts``; a redirect is never followed, and the connector's ``headers``
(its credentials) never reach another origin; a response over ``max_response_bytes`` fails that
call only, while the next call and other callers succeed and the connector stays up (it was: one
response over 64 MB marked the connector down for every user).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web

from connectors.mcp.config import MCPConfig
from connectors.mcp.connector import MCPConnector
from gateway.protocol.errors import BackendUnavailable, ToolExecutionError
from tests.connectors.mcp.helpers import DummySession, Events, make_ctx, upstream_http
from tests.security.test_egress import Backend, FakeDNS, backend, connects  # noqa: F401 (connects: a fixture)

SECRET = "Bearer UPSTREAM-SECRET"


@asynccontextmanager
async def mcp(url: str, transport: str = "streamable_http", dns: FakeDNS | None = None,
              **config: Any) -> AsyncIterator[MCPConnector]:
    conn = MCPConnector(MCPConfig.model_validate({
        "name": "up", "type": "mcp", "transport": transport, "url": url, "protocol": "legacy",
        "headers": {"Authorization": SECRET}, "startup_wait_s": 5, "connect_timeout_s": 3,
        "reconnect_initial_s": 5, **config}), lookup=dns)
    await conn.start(Events())
    try:
        yield conn
    finally:
        await conn.stop()


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
async def test_an_upstream_resolving_to_link_local_or_metadata_is_refused(
        transport: str, connects: list[tuple[str, int]]) -> None:  # noqa: F811
    dns = FakeDNS({"mcp.test": ["169.254.169.254"], "localhost": ["127.0.0.1"]})
    for url in ("http://mcp.test:8080/mcp", "http://169.254.169.254/mcp", "http://metadata.google.internal/mcp"):
        async with mcp(url, transport, dns) as conn:
            health = conn.health()
            assert not health.up
            assert "egress to" in health.detail and "refused" in health.detail, health.detail
            assert "link-local or cloud metadata" in health.detail or "metadata host name" in health.detail
            assert "egress.allow_hosts" in health.detail
    assert not any(host.startswith("169.254") for host, _ in connects)
    # Control: the configured host resolving to a private address is the operator's word: reached.
    async with upstream_http(transport) as (url, _proc):
        port = int(url.split(":")[2].split("/")[0])
        async with mcp(url.replace("127.0.0.1", "localhost"), transport, dns) as conn:
            assert conn.health().up, conn.health().detail
            assert ("127.0.0.1", port) in connects and dns.asked[-1] == "localhost"


async def test_redirects_are_not_followed_and_the_headers_never_reach_another_origin() -> None:
    async def redirecting(request: web.Request) -> web.StreamResponse:
        raise web.HTTPTemporaryRedirect(target["location"])

    target: dict[str, str] = {}
    async with backend("127.0.0.1", redirecting) as front, backend("127.0.0.2") as other:
        target["location"] = f"{other.url}/mcp"
        for transport, path in (("streamable_http", "/mcp"), ("sse", "/sse")):
            async with mcp(f"{front.url}{path}", transport) as conn:
                assert not conn.health().up
                assert "HTTP 307" in conn.health().detail and other.url in conn.health().detail
        assert front.seen and all(s["headers"].get("Authorization") == SECRET for s in front.seen)
    assert other.seen == []


async def test_a_legacy_endpoint_on_another_origin_is_never_posted_to() -> None:
    async def sse(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(f"event: endpoint\ndata: {target['endpoint']}\n\n".encode())
        await asyncio.sleep(3)
        return resp

    target: dict[str, str] = {}
    async with backend("127.0.0.1", sse) as front, backend("127.0.0.2") as other:
        target["endpoint"] = f"{other.url}/messages?session=1"
        async with mcp(f"{front.url}/sse", "sse") as conn:
            assert not conn.health().up
            assert "endpoint on another origin" in conn.health().detail
    assert other.seen == []


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
async def test_an_oversized_upstream_response_fails_that_call_only(transport: str) -> None:
    limit = 100_000
    async with upstream_http(transport) as (url, _proc), mcp(url, transport, max_response_bytes=limit,
                                                             reconnect_initial_s=0.05) as conn:
        session = DummySession("s1")

        def call(tool: str, **args: Any) -> Any:
            return conn.call_tool(tool, args, make_ctx(session, params={"name": tool}))

        others = [asyncio.create_task(call("echo", text=f"other {i}")) for i in range(8)]
        if transport == "streamable_http":
            with pytest.raises(ToolExecutionError) as info:
                await call("big", size=2 * limit)
            assert info.value.status == "response_too_large"
            assert f"over the connector's limit of {limit} bytes" in info.value.message
            for i, task in enumerate(others):
                assert (await task)["content"][0]["text"] == f"other {i}"
            assert conn.health().up and conn.reconnects == 0
            assert (await call("echo", text="next"))["content"][0]["text"] == "next"
        else:
            # Legacy HTTP+SSE carries every message on one event stream: an oversized event ends
            # it (there is no other way to skip it), so the connector reconnects, and says why.
            await asyncio.gather(*others)
            with pytest.raises(BackendUnavailable):
                await call("big", size=2 * limit)
            events = conn.events
            assert isinstance(events, Events)
            await events.signal.wait(lambda: conn.health().up)
            assert any(f"an event over {limit} bytes" in h.detail for h in events.health), events.health
            assert (await call("echo", text="next"))["content"][0]["text"] == "next"
        # Under the limit (the SDK sends the text twice: content and structuredContent): served.
        text = (await call("big", size=limit // 4))["content"][0]["text"]
        assert len(text) == limit // 4
