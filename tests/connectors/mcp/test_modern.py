"""The MCP connector speaking 2026-07-28 upstream, driven directly: era detection against SDK 2.x
upstreams of every era on stdio and Streamable HTTP, the per-request ``_meta`` and headers,
x-mcp-header rules, multi round-trip results, ``subscriptions/listen``, and staying up without a
session."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from pydantic import ValidationError

from connectors.mcp import era
from connectors.mcp.config import MCPConfig
from connectors.mcp.connector import MCPConnector
from connectors.mcp.sessions import LEGACY_SHARED
from connectors.mcp.transport import HTTPStatusError
from gateway.protocol.errors import BackendUnavailable, HeaderMismatch, MethodNotFound, ProtocolError
from tests.connectors.mcp.helpers import (
    DummySession,
    Events,
    connector,
    make_ctx,
    stdio_config,
    upstream_http,
)
from tests.support import free_port

MODERN = "2026-07-28"
LEGACY = "2025-11-25"


@asynccontextmanager
async def upstream(transport: str, upstream_era: str, *extra: str, **kw: Any) -> AsyncIterator[tuple[MCPConnector,
                                                                                                     Events]]:
    """The connector in front of an SDK upstream serving ``upstream_era`` over ``transport``."""
    args = ("--era", upstream_era, *extra)
    if transport == "stdio":
        async with connector(stdio_config("up", *args, **kw)) as pair:
            yield pair
        return
    async with upstream_http(transport, *args) as (url, _proc):
        async with connector({"name": "up", "type": "mcp", "transport": transport, "url": url, **kw}) as pair:
            yield pair


def text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"]) if result.get("content") else ""


# -- era detection -------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["stdio", "streamable_http"])
@pytest.mark.parametrize("upstream_era,expected", [("dual", MODERN), ("modern", MODERN), ("legacy", LEGACY)])
async def test_auto_speaks_2026_to_upstreams_that_support_it(transport: str, upstream_era: str,
                                                             expected: str) -> None:
    async with upstream(transport, upstream_era) as (c, _events):
        assert c.health().up and c.health().extra["protocol_version"] == expected
        shared = c._shared
        assert shared is not None and shared.modern is (expected == MODERN)
        assert {"echo", "progress", "greet"} <= {t.name for t in c.tools()} | {p.name for p in c.prompts()}
        s = DummySession("a")
        assert text(await c.call_tool("echo", {"text": "hi"}, make_ctx(s))) == "hi"
        read = await c.read_resource("mem://item/7", make_ctx(s, "resources/read"))
        assert read["contents"][0]["text"] == "item 7"
        prompt = await c.get_prompt("greet", {"name": "Ada"}, make_ctx(s, "prompts/get"))
        assert prompt["messages"][0]["content"]["text"] == "Hello Ada"
        # What the upstream saw: a modern request carries the 2026-07-28 _meta, a legacy one none of it.
        # A legacy caller reaches a dual-era upstream over a session of its own era (issue 25); a
        # modern-only one is bridged over 2026-07-28, having refused the handshake once.
        seen = json.loads(text(await c.call_tool("seen_meta", {}, make_ctx(s))))
        assert seen.get("io.modelcontextprotocol/protocolVersion") == (MODERN if upstream_era == "modern" else None)
        assert shared.dual_era is {"dual": True, "modern": False, "legacy": False}[upstream_era]
        assert (LEGACY_SHARED in c._clients) is (upstream_era == "dual")
        modern_caller = DummySession("b")
        modern_caller.protocol_version = MODERN
        seen = json.loads(text(await c.call_tool("seen_meta", {}, make_ctx(modern_caller))))
        assert seen.get("io.modelcontextprotocol/protocolVersion") == (MODERN if expected == MODERN else None)


@pytest.mark.parametrize("transport", ["stdio", "streamable_http"])
async def test_forced_modern_refuses_a_legacy_upstream(transport: str) -> None:
    async with upstream(transport, "legacy", protocol="modern", startup_wait_s=5) as (c, _events):
        assert not c.health().up and "not a 2026-07-28 server" in c.health().detail
        assert c.tools() == ()


@pytest.mark.parametrize("transport", ["stdio", "streamable_http"])
async def test_forced_legacy_initializes_even_a_dual_upstream(transport: str) -> None:
    async with upstream(transport, "dual", protocol="legacy") as (c, _events):
        assert c.health().up and c.health().extra["protocol_version"] == LEGACY
        assert c._shared is not None and not c._shared.modern


async def test_forced_legacy_cannot_reach_a_modern_only_upstream() -> None:
    # A modern-only server refuses initialize naming what it serves: the detail says so.
    async with upstream("stdio", "modern", protocol="legacy", startup_wait_s=5) as (c, _events):
        assert not c.health().up and "Unsupported protocol version" in c.health().detail


def test_protocol_modern_is_refused_on_the_legacy_sse_transport() -> None:
    with pytest.raises(ValidationError, match="protocol modern needs transport stdio or streamable_http"):
        MCPConfig.model_validate({"name": "a", "type": "mcp", "transport": "sse", "url": "http://h/sse",
                                  "protocol": "modern"})
    cfg = MCPConfig.model_validate({"name": "a", "type": "mcp", "command": "x"})
    assert cfg.protocol == "auto" and cfg.probe_timeout_s > 0
    with pytest.raises(ValidationError):
        MCPConfig.model_validate({"name": "a", "type": "mcp", "command": "x", "protocol": "2026"})


async def test_sse_transport_stays_legacy_under_auto() -> None:
    async with upstream("sse", "dual") as (c, _events):
        assert c.health().up and c.health().extra["protocol_version"] == LEGACY


# A legacy stdio server that ignores every request before initialize (the spec allows silence).
SILENT_LEGACY = r"""
import json, sys
ready = False
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("method") == "initialize":
        ready = True
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "silent", "version": "1"}}
    elif not ready or "id" not in msg:
        continue
    elif msg["method"] == "tools/list":
        result = {"tools": [{"name": "quiet", "inputSchema": {"type": "object"}}]}
    else:
        result = {"content": [{"type": "text", "text": msg["method"]}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
"""


async def test_stdio_probe_without_an_answer_falls_back_to_initialize() -> None:
    cfg = {"name": "silent", "type": "mcp", "transport": "stdio", "command": sys.executable,
           "args": ["-c", SILENT_LEGACY], "probe_timeout_s": 0.5}
    async with connector(cfg) as (c, _events):
        assert c.health().up and c.health().extra["protocol_version"] == "2025-06-18"
        assert [t.name for t in c.tools()] == ["quiet"]


@pytest.mark.parametrize("outcome,modern", [
    ({"supportedVersions": [MODERN, LEGACY], "capabilities": {}}, True),
    ({"supportedVersions": [LEGACY], "capabilities": {}}, False),  # a discover answered by a legacy server
    (ProtocolError("Unsupported protocol version", {"supported": [LEGACY, "2025-06-18"]}, code=-32022), False),
    (MethodNotFound("Method not found"), False),
    (ProtocolError("Bad Request: Missing session ID", code=-32600), False),
    (HTTPStatusError("HTTP 400", 400), False),
    (HTTPStatusError("HTTP 404", 404), False),
])
def test_verdict_of_a_probe(outcome: Any, modern: bool) -> None:
    assert era.verdict("up", outcome, http=True).modern is modern


@pytest.mark.parametrize("outcome,detail", [
    (ProtocolError("Unsupported protocol version", {"supported": ["2027-01-01"]}, code=-32022),
     "supports only protocol versions 2027-01-01"),
    (HeaderMismatch("Header mismatch: Mcp-Method"), "refused server/discover"),
    (ProtocolError("Missing required client capability", code=-32021), "refused server/discover"),
    (HTTPStatusError("upstream up answered HTTP 503", 503), "HTTP 503"),
    (BackendUnavailable("cannot reach upstream up"), "cannot reach"),
    (TimeoutError(), "did not answer server/discover"),  # on HTTP a timeout is no verdict
])
def test_probes_that_show_no_usable_era_leave_the_upstream_unavailable(outcome: Any, detail: str) -> None:
    with pytest.raises(BackendUnavailable, match=detail):
        era.verdict("up", outcome, http=True)


def test_a_refusal_listing_the_version_sent_asks_once_more() -> None:
    """SEP-2575: a client retries with a supported version when its first choice is rejected (the
    conformance client scenario request-metadata refuses the first request to see the retry)."""
    found = era.verdict("up", ProtocolError("Unsupported protocol version", {"supported": [MODERN]}, code=-32022),
                        http=True)
    assert found.retry and "although it lists it" in found.reason


def test_a_silent_stdio_probe_means_legacy() -> None:
    assert not era.verdict("up", TimeoutError(), http=False).modern


# -- the modern wire -----------------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["stdio", "streamable_http"])
async def test_modern_requests_carry_the_gateways_meta_and_the_callers_log_level(transport: str) -> None:
    async with upstream(transport, "modern") as (c, _events):
        # a legacy session: logs at its level ("info" by default); its capabilities are declared upstream
        legacy_caller = DummySession("legacy", capabilities={"sampling": {}, "roots": {"listChanged": True}})
        legacy_caller.log_level = "warning"
        ctx = make_ctx(legacy_caller, params={"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",  # (a downstream hop's: replaced)
            "io.modelcontextprotocol/clientInfo": {"name": "caller", "version": "9"}, "com.example/tag": "kept"}})
        seen = json.loads(text(await c.call_tool("seen_meta", {}, ctx)))
        assert seen["io.modelcontextprotocol/protocolVersion"] == MODERN
        assert seen["io.modelcontextprotocol/clientInfo"]["name"] == "mcp-gateway"
        # (roots.listChanged names a notification 2026-07-28 removed)
        assert seen["io.modelcontextprotocol/clientCapabilities"] == {"sampling": {}, "roots": {}}
        assert seen["io.modelcontextprotocol/logLevel"] == "warning" and seen["com.example/tag"] == "kept"
        modern_caller = DummySession("modern")
        modern_caller.log_level = None  # a 2026-07-28 request that asked for no logs
        seen = json.loads(text(await c.call_tool("seen_meta", {}, make_ctx(modern_caller))))
        assert "io.modelcontextprotocol/logLevel" not in seen
        await c.call_tool("log_then_echo", {"text": "x"}, make_ctx(modern_caller))
        assert not modern_caller.notifications  # the upstream was not asked for logs


@pytest.mark.parametrize("session", ["shared", "per_client"])
async def test_each_call_declares_its_callers_capabilities_to_a_modern_upstream(session: str) -> None:
    # Only the caller can answer an input request: the upstream must not ask it for more.
    async with upstream("streamable_http", "modern", session=session) as (c, _events):
        a = DummySession("a", capabilities={"elicitation": {"form": {}}})
        b = DummySession("b", capabilities={})
        seen_a, seen_b = await asyncio.gather(c.call_tool("seen_meta", {}, make_ctx(a)),
                                              c.call_tool("seen_meta", {}, make_ctx(b)))
        assert json.loads(text(seen_a))["io.modelcontextprotocol/clientCapabilities"] == {"elicitation": {"form": {}}}
        assert json.loads(text(seen_b))["io.modelcontextprotocol/clientCapabilities"] == {}
        assert c._clients == {}  # no upstream session per client: the revision has none


async def test_request_metadata_headers_are_sent_over_http() -> None:
    async with upstream("streamable_http", "modern") as (c, _events):
        s = DummySession("a")
        sent = json.loads(text(await c.call_tool("headers", {"zone": "eu-west 1"}, make_ctx(s))))
        assert sent["mcp-protocol-version"] == MODERN and sent["mcp-method"] == "tools/call"
        assert sent["mcp-name"] == "headers" and sent["mcp-param-zone"] == "eu-west 1"
        assert "mcp-session-id" not in sent
        # Without the argument, no header; with a value that is not plain ASCII, the Base64 sentinel.
        sent = json.loads(text(await c.call_tool("headers", {}, make_ctx(s))))
        assert "mcp-param-zone" not in sent
        sent = json.loads(text(await c.call_tool("headers", {"zone": "zürich"}, make_ctx(s))))
        assert sent["mcp-param-zone"] == "=?base64?esO8cmljaA==?="
        # The SDK upstream checks Mcp-Param-Region against the body: the call succeeds only if it matches.
        result = await c.call_tool("region_info", {"region": "us-west1", "query": "q"}, make_ctx(s))
        assert text(result) == "us-west1: q" and not result.get("isError")


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
async def test_tools_with_invalid_x_mcp_header_are_left_out(protocol: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="connectors.mcp")
    async with upstream("streamable_http", "dual", "--bad-header-tool", protocol=protocol) as (c, _events):
        names = {t.name for t in c.tools()}
        assert {"echo", "region_info"} <= names
        if protocol == "modern":
            assert "bad_header" not in names
            warning = next(r.getMessage() for r in caplog.records if "bad_header" in r.getMessage())
            assert "rule x-mcp-header" in warning and "type number" in warning
            [left] = c.left_out()  # what `mcp-gateway list` reports
            assert (left.kind, left.name, left.rule) == ("tools", "bad_header", "x-mcp-header")
            assert "type number" in left.reason
        else:  # the annotation means nothing before 2026-07-28
            assert "bad_header" in names and c.left_out() == ()


async def test_listing_definitions_carry_no_result_fields() -> None:
    async with upstream("stdio", "modern") as (c, _events):
        for spec in (*c.tools(), *c.resources(), *c.prompts()):
            assert not {"resultType", "ttlMs", "cacheScope"} & set(spec.definition)


# -- multi round-trip requests -------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["stdio", "streamable_http"])
async def test_input_required_is_returned_as_is_and_the_retry_carries_the_answers(transport: str) -> None:
    async with upstream(transport, "modern", "--mrtr") as (c, _events):
        s = DummySession("a")
        first = await c.call_tool("ask_name", {}, make_ctx(s))
        # (the SDK seals its requestState: opaque, passed on untouched)
        assert first["resultType"] == "input_required" and isinstance(first["requestState"], str)
        assert first["inputRequests"]["who"]["method"] == "elicitation/create"
        answer = {"who": {"action": "accept", "content": {"name": "Ada"}}}
        retry = make_ctx(s, params={"name": "ask_name", "arguments": {}, "inputResponses": answer,
                                    "requestState": first["requestState"]})
        assert text(await c.call_tool("ask_name", {}, retry)) == "Hello, Ada!"
        # prompts/get and resources/read too
        asked = await c.get_prompt("ask_prompt", {}, make_ctx(s, "prompts/get"))
        assert asked["resultType"] == "input_required"
        done = await c.get_prompt("ask_prompt", {}, make_ctx(s, "prompts/get", {"name": "ask_prompt",
                                                                                 "inputResponses": answer}))
        assert done["messages"][0]["content"]["text"] == "A prompt for Ada"
        asked = await c.read_resource("ask://doc", make_ctx(s, "resources/read"))
        assert asked["resultType"] == "input_required"
        done = await c.read_resource("ask://doc", make_ctx(s, "resources/read", {"uri": "ask://doc",
                                                                                  "inputResponses": answer}))
        assert done["contents"][0]["text"] == "doc read by Ada"


# -- notifications -------------------------------------------------------------------------------

async def test_listen_is_opened_again_after_it_drops_and_the_listings_are_fetched_again() -> None:
    port = free_port()
    async with upstream_http("streamable_http", "--era", "modern", port=port) as (url, proc):
        async with connector({"name": "up", "type": "mcp", "transport": "streamable_http", "url": url,
                              "ping_interval_s": 0, "reconnect_initial_s": 0.05,
                              "reconnect_max_s": 0.3}) as (c, events):
            listener = c._listener
            assert listener is not None
            await asyncio.wait_for(listener._ack.wait(), 10)
            first_rid = listener._rid
            os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
            changed = events.changed
            async with upstream_http("streamable_http", "--era", "modern", port=port):
                # The same channel (no session to lose): only the listen comes back, then a re-list.
                await events.signal.wait(lambda: events.changed > changed)
                assert c._listener is listener and listener._rid != first_rid and c.health().up
                assert "echo" in {t.name for t in c.tools()} and c.reconnects == 0
                await c.stop()  # (before the upstream: uvicorn's shutdown waits for open streams)


@pytest.mark.parametrize("transport", ["stdio", "streamable_http"])
async def test_concurrent_subscriptions_end_in_one_listen_naming_them_all(transport: str) -> None:
    async with upstream(transport, "modern") as (c, events):
        s = DummySession("a")
        uris = [f"mem://item/{i}" for i in range(5)]
        await asyncio.gather(*(c.subscribe(uri, make_ctx(s, "resources/subscribe")) for uri in uris))
        listener = c._listener
        assert listener is not None and listener.uris == frozenset(uris)
        assert listener.acknowledged_filter["resourceSubscriptions"] == sorted(uris)
        listens = [t for t in asyncio.all_tasks() if t.get_name() == "mcp-listen-up" and not t.done()]
        assert listens == [listener._task]
        await c.unsubscribe(uris[0], None)
        await c.subscribe("mem://static", make_ctx(s, "resources/subscribe"))
        assert listener.acknowledged_filter["resourceSubscriptions"] == sorted([*uris[1:], "mem://static"])
        await c.call_tool("touch", {}, make_ctx(s))
        await events.signal.wait(lambda: events.updated == ["mem://static"])


# -- staying up ----------------------------------------------------------------------------------

async def test_a_failed_modern_http_request_fails_alone_until_the_probe_fails() -> None:
    port = free_port()
    async with upstream_http("streamable_http", "--era", "dual", port=port) as (url, proc):
        async with connector({"name": "up", "type": "mcp", "transport": "streamable_http", "url": url,
                              "ping_interval_s": 0.3, "connect_timeout_s": 2, "reconnect_initial_s": 0.05,
                              "reconnect_max_s": 0.3}) as (c, events):
            s = DummySession("a")
            os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
            with pytest.raises(BackendUnavailable, match="cannot reach"):
                await c.call_tool("echo", {"text": "x"}, make_ctx(s))
            assert [h.up for h in events.health] == [True]  # one failed request is not "down"
            await events.signal.wait(lambda: not c.health().up)  # the discover probe is
            assert "health probe failed" in events.health[-1].detail and c.tools() == ()
            async with upstream_http("streamable_http", "--era", "dual", port=port):
                await events.signal.wait(lambda: c.health().up)
                assert text(await c.call_tool("echo", {"text": "back"}, make_ctx(s))) == "back"
                assert c.reconnects == 1 and c.health().extra["protocol_version"] == MODERN


async def test_an_upstream_replaced_by_a_legacy_one_is_found_legacy_again() -> None:
    port = free_port()
    async with upstream_http("streamable_http", "--era", "modern", port=port) as (url, proc):
        async with connector({"name": "up", "type": "mcp", "transport": "streamable_http", "url": url,
                              "ping_interval_s": 0.2, "connect_timeout_s": 2, "reconnect_initial_s": 0.05,
                              "reconnect_max_s": 0.3}) as (c, events):
            assert c.health().extra["protocol_version"] == MODERN
            os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
            async with upstream_http("streamable_http", "--era", "legacy", port=port):
                await events.signal.wait(lambda: c.health().up and c.health().extra["protocol_version"] == LEGACY)
                assert text(await c.call_tool("echo", {"text": "old"}, make_ctx(DummySession("a")))) == "old"


async def test_stdio_cancellation_sends_notifications_cancelled_to_a_modern_upstream() -> None:
    async with upstream("stdio", "modern") as (c, _events):
        s = DummySession("a")
        task = asyncio.create_task(c.call_tool("hang", {"seconds": 30}, make_ctx(s)))
        await s.signal.wait(lambda: any(p.get("data") == "hanging" for _m, p, _r in s.notifications))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert text(await c.call_tool("cancelled", {"wait": 10}, make_ctx(s))) == "hang"
        assert c.health().up
