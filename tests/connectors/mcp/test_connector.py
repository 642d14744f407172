"""The MCP connector against real SDK upstreams, driven directly (no gateway around it).

The SDK upstreams are dual-era, so ``protocol: auto`` speaks 2026-07-28 to them; tests of what only
the legacy revisions have (server→client requests over a session, session expiry, resumable
streams, per-client sessions) force ``protocol: legacy``, and tests of what both eras must do run
under both (test_modern.py has the rest of the 2026-07-28 behaviour)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from connectors.mcp.connector import MCPConnector
from gateway.protocol.errors import BackendUnavailable, InvalidRequest, ProtocolError, RequestTimeout
from tests.connectors.mcp.helpers import (
    DummySession,
    Events,
    connector,
    make_ctx,
    stdio_config,
    upstream_http,
)
from tests.support import free_port


@asynccontextmanager
async def over(transport: str, *extra: str, **kw: Any) -> AsyncIterator[tuple[MCPConnector, Events]]:
    if transport == "stdio":
        async with connector(stdio_config("up", *extra, **kw)) as pair:
            yield pair
        return
    async with upstream_http(transport, *extra) as (url, _proc):
        async with connector({"name": "up", "type": "mcp", "transport": transport, "url": url, **kw}) as pair:
            yield pair


def sampler(text: str):
    async def answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert method == "sampling/createMessage"
        return {"role": "assistant", "content": {"type": "text", "text": text}, "model": "test"}
    return answer


@pytest.mark.parametrize("transport", ["stdio", "sse", "streamable_http"])
async def test_components_and_calls_over_each_transport(transport: str) -> None:
    async with over(transport) as (c, events):
        assert c.health().up
        assert {"echo", "progress", "sample", "die"} <= {t.name for t in c.tools()}
        assert [r.uri for r in c.resources()] == ["mem://static"]
        assert [t.uri_template for t in c.resource_templates()] == ["mem://item/{id}"]
        assert [p.name for p in c.prompts()] == ["greet"]
        assert c.capabilities() >= {"tools", "resources", "prompts"}
        s = DummySession("a")
        result = await c.call_tool("echo", {"text": "hi"}, make_ctx(s))
        assert result["content"] == [{"type": "text", "text": "hi"}]
        assert c.owns_uri("mem://item/42") and not c.owns_uri("other://x")
        read = await c.read_resource("mem://item/42", make_ctx(s, "resources/read"))
        assert read["contents"][0]["text"] == "item 42"
        prompt = await c.get_prompt("greet", {"name": "Ada"}, make_ctx(s, "prompts/get"))
        assert prompt["messages"][0]["content"]["text"] == "Hello Ada"
        # upstream JSON-RPC errors keep their code
        with pytest.raises(Exception) as info:
            await c.read_resource("mem://nope", make_ctx(s, "resources/read"))
        assert getattr(info.value, "code", None) is not None


@pytest.mark.parametrize("transport", ["stdio", "streamable_http"])
async def test_progress_tokens_are_rewritten_and_never_cross(transport: str) -> None:
    async with over(transport) as (c, _events):
        a, b = DummySession("a"), DummySession("b")
        # Both clients use the same token and the same request id: the upstream must not mix them.
        ra, rb = await asyncio.gather(
            c.call_tool("progress", {"steps": 5}, make_ctx(a, progress_token="tok", request_id=1)),
            c.call_tool("progress", {"steps": 3}, make_ctx(b, progress_token="tok", request_id=1)))
        assert "upstream token up-" in ra["content"][0]["text"]
        assert ra["content"][0]["text"] != rb["content"][0]["text"]
        pa = [p for m, p, _ in a.notifications if m == "notifications/progress"]
        pb = [p for m, p, _ in b.notifications if m == "notifications/progress"]
        assert [p["progress"] for p in pa] == [1, 2, 3, 4, 5] and all(p["total"] == 5 for p in pa)
        assert [p["progress"] for p in pb] == [1, 2, 3] and all(p["total"] == 3 for p in pb)
        assert all(p["progressToken"] == "tok" for p in pa + pb)


async def test_sampling_is_routed_to_the_session_that_caused_it() -> None:
    async with over("streamable_http", protocol="legacy") as (c, _events):
        a = DummySession("a", on_request=sampler("from a"))
        b = DummySession("b", on_request=sampler("from b"))
        results = await asyncio.gather(*(c.call_tool("sample", {"prompt": f"p{i}"}, make_ctx(s))
                                         for i, s in enumerate([a, b, a, b, a, b])))
        texts = [r["content"][0]["text"] for r in results]
        assert texts == ["sampled: from a", "sampled: from b"] * 3
        assert len(a.requests) == 3 and len(b.requests) == 3
        # related_request_id points at the downstream request that caused the sampling
        assert all(rel is not None for _m, _p, rel in a.requests)


async def test_sampling_without_client_capability_is_an_error_for_the_upstream() -> None:
    async with over("stdio", protocol="legacy") as (c, _events):
        s = DummySession("nocaps", capabilities={})  # its request() raises MethodNotFound
        result = await c.call_tool("sample", {"prompt": "p"}, make_ctx(s))
        assert result.get("isError") is True
        assert "sampling refused: client does not support sampling" in result["content"][0]["text"]


async def test_sampling_over_stdio_with_one_caller_is_routed() -> None:
    async with over("stdio", protocol="legacy") as (c, _events):
        s = DummySession("a", on_request=sampler("solo"))
        result = await c.call_tool("sample", {"prompt": "p"}, make_ctx(s))
        assert result["content"][0]["text"] == "sampled: solo"


async def test_unattributable_upstream_request_is_refused() -> None:
    async with over("stdio") as (c, _events):
        session = c._shared
        assert session is not None
        with pytest.raises(InvalidRequest, match="no client request to upstream up is in flight"):
            await c.on_request(session, "sampling/createMessage", {}, None)
        # Roots asked outside any call: no client asks through the gateway now, so none (no error).
        assert await c.on_request(session, "roots/list", {}, None) == {"roots": []}


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
@pytest.mark.parametrize("transport", ["stdio", "streamable_http"])
async def test_cancellation_reaches_the_upstream(transport: str, protocol: str) -> None:
    # modern: notifications/cancelled on stdio, the closed response stream on HTTP
    async with over(transport, protocol=protocol) as (c, _events):
        assert c._shared is not None and c._shared.modern is (protocol == "modern")
        s = DummySession("a")
        task = asyncio.create_task(c.call_tool("hang", {"seconds": 30}, make_ctx(s)))
        await s.signal.wait(lambda: any(p.get("data") == "hanging" for _m, p, _r in s.notifications))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        result = await c.call_tool("cancelled", {"wait": 10}, make_ctx(s))
        assert result["content"][0]["text"] == "hang"


async def test_upstream_killed_mid_call_fails_fast_and_comes_back() -> None:
    async with over("stdio", reconnect_initial_s=0.05) as (c, events):
        # A 2026-07-28 caller's calls go over the shared (stateless) channel of the dual-era upstream.
        s = DummySession("a", protocol_version="2026-07-28")
        pid1 = (await c.call_tool("pid", {}, make_ctx(s)))["content"][0]["text"]
        events.changed_event.clear()
        with pytest.raises(BackendUnavailable, match="exited"):
            await c.call_tool("die", {}, make_ctx(s))
        # Down: no components, health down, calls fail fast.
        assert not c.health().up and c.tools() == ()
        started = time.monotonic()
        with pytest.raises(BackendUnavailable):
            await c.call_tool("echo", {"text": "x"}, make_ctx(s))
        assert time.monotonic() - started < 0.1
        await events.signal.wait(lambda: c.health().up)
        assert {t.name for t in c.tools()} >= {"echo"}
        pid2 = (await c.call_tool("pid", {}, make_ctx(s)))["content"][0]["text"]
        assert pid1 != pid2 and c.reconnects == 1
        assert [h.up for h in events.health] == [True, False, True]
        # A legacy caller's calls go over a session of its era: over stdio a second process. Its
        # death fails that call only; the next legacy call opens another, the connector stays up.
        legacy = DummySession("b")
        pid3 = (await c.call_tool("pid", {}, make_ctx(legacy)))["content"][0]["text"]
        assert pid3 not in (pid1, pid2)
        with pytest.raises(BackendUnavailable, match="exited"):
            await c.call_tool("die", {}, make_ctx(legacy))
        assert c.health().up and [h.up for h in events.health] == [True, False, True]
        pid4 = (await c.call_tool("pid", {}, make_ctx(legacy)))["content"][0]["text"]
        assert pid4 not in (pid2, pid3)
        assert (await c.call_tool("pid", {}, make_ctx(s)))["content"][0]["text"] == pid2


@pytest.mark.parametrize("transport", ["sse", "streamable_http"])
async def test_http_upstream_killed_and_restarted_on_the_same_port(transport: str) -> None:
    # (A legacy session is lost with its connection; test_modern.py has the stateless revision.)
    port = free_port()
    async with upstream_http(transport, port=port) as (url, proc):
        async with connector({"name": "up", "type": "mcp", "transport": transport, "url": url, "protocol": "legacy",
                              "reconnect_initial_s": 0.05, "reconnect_max_s": 0.5}) as (c, events):
            s = DummySession("a")
            os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
            with pytest.raises(BackendUnavailable):
                await c.call_tool("echo", {"text": "x"}, make_ctx(s))
            assert not c.health().up
            async with upstream_http(transport, port=port):
                await events.signal.wait(lambda: c.health().up)
                result = await c.call_tool("echo", {"text": "back"}, make_ctx(s))
                assert result["content"][0]["text"] == "back"


async def test_session_expiry_reinitializes_transparently() -> None:
    async with over("streamable_http", protocol="legacy") as (c, _events):
        s = DummySession("a")
        transport = c._shared.transport  # type: ignore[union-attr]
        transport._set_header("mcp-session-id", "forgotten-session")  # type: ignore[attr-defined]
        result = await c.call_tool("echo", {"text": "again"}, make_ctx(s))
        assert result["content"][0]["text"] == "again"


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_pagination_is_followed_to_the_end(protocol: str) -> None:
    async with over("stdio", "--tools", "25", "--page-size", "4", protocol=protocol) as (c, _events):
        assert c._shared is not None and c._shared.protocol_version == ("2026-07-28" if protocol == "modern"
                                                                         else "2025-11-25")
        names = [t.name for t in c.tools()]
        assert len([n for n in names if n.startswith("extra_")]) == 25 and "echo" in names
        assert len(names) == len(set(names))


async def test_dead_upstream_at_start_is_not_fatal() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    async with connector({"name": "gone", "type": "mcp", "transport": "streamable_http", "url": url,
                          "connect_timeout_s": 2}) as (c, _events):
        assert not c.health().up and c.tools() == ()
        assert "tools" in c.capabilities()
        with pytest.raises(BackendUnavailable, match="gone"):
            await c.call_tool("echo", {}, make_ctx(DummySession("a")))


async def test_per_client_sessions_are_separate_and_released() -> None:
    async with over("streamable_http", session="per_client", protocol="legacy") as (c, _events):
        a = DummySession("a", on_request=sampler("A"))
        b = DummySession("b", on_request=sampler("B"))
        await c.call_tool("echo", {"text": "1"}, make_ctx(a))
        await c.call_tool("echo", {"text": "2"}, make_ctx(b))
        assert set(c._clients) == {"a", "b"}
        assert c._clients["a"] is not c._clients["b"] is not c._shared
        result = await c.call_tool("sample", {"prompt": "x"}, make_ctx(b))
        assert result["content"][0]["text"] == "sampled: B"
        await c.session_closed("a")
        assert set(c._clients) == {"b"}


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_logs_during_a_call_go_to_its_session(protocol: str) -> None:
    async with over("streamable_http", protocol=protocol) as (c, events):
        s = DummySession("a")
        await c.call_tool("log_then_echo", {"text": "x"}, make_ctx(s))
        logs = [p["data"] for m, p, _ in s.notifications if m == "notifications/message"]
        assert logs == ["first x", "second x"] and not events.logs


async def test_upstream_errors_keep_their_code() -> None:
    async with over("stdio") as (c, _events):
        assert c._shared is not None
        with pytest.raises(ProtocolError) as info:
            await c._shared.request("no/such/method", {}, timeout_s=5)
        assert info.value.code in (-32601, -32602)  # the SDK answers unknown methods with -32602


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
@pytest.mark.parametrize("transport", ["stdio", "streamable_http"])
async def test_list_changed_refetches_and_resource_updates_are_forwarded(transport: str, protocol: str) -> None:
    # modern: both arrive on subscriptions/listen, which subscribe/unsubscribe re-open
    async with over(transport, protocol=protocol) as (c, events):
        s = DummySession("a")
        before = events.changed
        grown = await c.call_tool("grow", {}, make_ctx(s))
        name = grown["content"][0]["text"]
        await events.signal.wait(lambda: events.changed > before and name in {t.name for t in c.tools()})
        await c.subscribe("mem://static", make_ctx(s, "resources/subscribe"))
        touched = await c.call_tool("touch", {}, make_ctx(s))
        if protocol == "legacy":  # (the upstream's resources/subscribe registry)
            assert touched["content"][0]["text"] == "mem://static"
        else:
            listener = c._listener
            assert listener is not None and listener.acknowledged_filter["resourceSubscriptions"] == ["mem://static"]
        await events.signal.wait(lambda: events.updated == ["mem://static"])
        await c.unsubscribe("mem://static", None)
        touched = await c.call_tool("touch", {}, make_ctx(s))
        if protocol == "legacy":
            assert touched["content"] == [] or touched["content"][0]["text"] == ""
        else:
            assert c._listener is listener and listener.uris == frozenset()


async def test_request_timeout_fails_the_call_and_cancels_upstream() -> None:
    async with over("stdio", timeout_s=0.5) as (c, _events):
        s = DummySession("a")
        with pytest.raises(RequestTimeout):
            await c.call_tool("hang", {"seconds": 30}, make_ctx(s))
        result = await c.call_tool("cancelled", {"wait": 5}, make_ctx(s))
        assert result["content"][0]["text"] == "hang"
        assert c.health().up


async def test_a_hung_upstream_is_detected_by_ping_and_recovers() -> None:
    port = free_port()
    async with upstream_http("streamable_http", port=port) as (url, proc):
        async with connector({"name": "up", "type": "mcp", "transport": "streamable_http", "url": url,
                              "ping_interval_s": 0.3, "connect_timeout_s": 1, "reconnect_initial_s": 0.1,
                              "reconnect_max_s": 0.5}) as (c, events):
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                await events.signal.wait(lambda: not c.health().up)
                assert c.tools() == ()
                started = time.monotonic()
                with pytest.raises(BackendUnavailable):
                    await c.call_tool("echo", {"text": "x"}, make_ctx(DummySession("a")))
                assert time.monotonic() - started < 0.1
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            await events.signal.wait(lambda: c.health().up)
            result = await c.call_tool("echo", {"text": "awake"}, make_ctx(DummySession("a")))
            assert result["content"][0]["text"] == "awake"


async def test_stdio_child_gets_configured_env_but_not_gateway_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_SECRET", "s3cret")
    async with over("stdio", env={"UPSTREAM_SETTING": "on"}) as (c, _events):
        s = DummySession("a")

        async def env(name: str) -> str:
            result = await c.call_tool("env", {"name": name}, make_ctx(s))
            return result["content"][0]["text"] if result["content"] else ""
        assert await env("UPSTREAM_SETTING") == "on"
        assert await env("GATEWAY_SECRET") == ""
        assert await env("PATH") != ""


async def test_response_stream_cut_by_the_sdk_server_is_resumed() -> None:
    # (2025 Streamable HTTP only: 2026-07-28 removed stream resumption.)
    async with over("streamable_http", "--resumable", protocol="legacy") as (c, _events):
        s = DummySession("a")
        result = await c.call_tool("reconnect", {}, make_ctx(s))
        assert result["content"][0]["text"] == "survived the cut"
        logs = [p["data"] for m, p, _ in s.notifications if m == "notifications/message"]
        assert logs == ["before the cut", "after the cut"]


@pytest.mark.parametrize("transport", ["stdio", "sse", "streamable_http"])
async def test_large_results_cross_every_transport(transport: str) -> None:
    async with over(transport) as (c, _events):
        result = await c.call_tool("big", {"size": 3_000_000}, make_ctx(DummySession("a")))
        size = len(result["content"][0]["text"])  # (no huge string in an assertion message)
        assert size == 3_000_000


async def test_an_unforeseen_error_while_connecting_does_not_end_reconnection(monkeypatch: pytest.MonkeyPatch) -> None:
    from connectors.mcp.client import UpstreamSession

    real_connect = UpstreamSession.connect
    failures = 0

    async def connect_once_broken(self: UpstreamSession, timeout_s: float) -> None:
        nonlocal failures
        if failures == 0:
            failures += 1
            raise RuntimeError("a bug in connecting")
        await real_connect(self, timeout_s)

    monkeypatch.setattr(UpstreamSession, "connect", connect_once_broken)
    async with connector(stdio_config("up", reconnect_initial_s=0.05, startup_wait_s=0)) as (c, events):
        await events.signal.wait(lambda: c.health().up)
        assert failures == 1 and "connecting" not in c.health().detail
        result = await c.call_tool("echo", {"text": "back"}, make_ctx(DummySession("a")))
        assert result["content"][0]["text"] == "back"
