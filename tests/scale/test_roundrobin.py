"""Three replicas sharing Redis behind HAProxy ``balance roundrobin`` (no stickiness): official SDK
clients of the session revisions run whole sessions with each request on another replica."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from mcp import MCPError, types

from gateway.transports.http_app import HTTP_KEY
from tests.e2e import testkit
from tests.e2e.clients import CORE_ONLY, eventually, sdk_client
from tests.scale.harness import answer_in_upper_case, replicas, roundrobin_proxy, shared_state

CONFIG = CORE_ONLY + """
gateway: {name: scaled, page_size: 5, cursor_secret: shared-by-replicas}
connectors:
  - {name: kit, type: testkit, tools: 8}
"""


@pytest.fixture(autouse=True)
def _kind(monkeypatch: pytest.MonkeyPatch) -> None:
    testkit.register(monkeypatch)


def _text(result: types.CallToolResult) -> str:
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    return content.text


async def test_a_session_is_served_by_every_replica() -> None:
    progress: list[float] = []
    logs: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append((params.level, params.data))

    async with replicas(CONFIG + shared_state()) as gws, roundrobin_proxy([g.url for g in gws]) as url, \
            sdk_client("streamable_http", url=url, sampling_callback=answer_in_upper_case, logging_callback=on_log) as session:
        names: list[str] = []
        cursor = None
        while True:  # cursors minted by one replica are read by another
            page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
            names += [t.name for t in page.tools]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert len(names) == 13
        for i in range(6):
            assert _text(await session.call_tool(f"kit_echo_00{i}", {"i": i})) == f'{{"i": {i}}}'
        # The session reached every replica: each has its own copy, rebuilt from the shared record.
        ids = [set(g.gateway.sessions) for g in gws]
        assert len(set.union(*ids)) == 1 and all(ids)
        # Progress rides on the call's own stream; sampling's answer is POSTed to another replica and
        # routed to the one running the call.
        assert _text(await session.call_tool("kit_progress", {"steps": 3}, progress_callback=on_progress)) == "3 steps"
        assert progress == [1, 2, 3]
        for q in ("one", "two", "three"):
            assert _text(await session.call_tool("kit_sample", {"q": q})) == f"sampled: {q.upper()}"
        # The log level set through one replica applies on the others.
        await session.set_logging_level("warning")
        for _ in range(3):
            await session.call_tool("kit_log", {"level": "info", "data": "hidden"})
        await session.call_tool("kit_log", {"level": "error", "data": "shown"})
        assert ("error", "shown") in logs and ("info", "hidden") not in logs
        with pytest.raises(MCPError) as info:
            await session.call_tool("kit_nope", {})
        assert info.value.error.code == -32602


async def test_cancellation_reaches_the_replica_running_the_call() -> None:
    async with replicas(CONFIG + shared_state()) as gws, roundrobin_proxy([g.url for g in gws]) as url, \
            sdk_client("streamable_http", url=url) as session:
        await session.send_ping()
        call = asyncio.ensure_future(session.call_tool("kit_slow", {"seconds": 30}))
        kits = [g.gateway.connectors["kit"] for g in gws]
        await eventually(lambda: any(k.started.is_set() for k in kits))  # type: ignore[attr-defined]
        running = next(k for k in kits if k.started.is_set())  # type: ignore[attr-defined]
        call.cancel()  # the SDK sends notifications/cancelled, which lands on the next replica
        async with asyncio.timeout(5):
            await running.cancelled.wait()  # type: ignore[attr-defined]
        assert sum(k.started.is_set() for k in kits) == 1  # type: ignore[attr-defined]
        assert _text(await session.call_tool("kit_echo_001", {})) == "{}"


async def test_notifications_reach_the_get_stream_on_another_replica() -> None:
    received: list[Any] = []
    got = asyncio.Event()

    async def handler(message: Any) -> None:
        if isinstance(message, (types.ResourceUpdatedNotification, types.ToolListChangedNotification)):
            received.append(message)
            got.set()

    async with replicas(CONFIG + shared_state()) as gws, roundrobin_proxy([g.url for g in gws]) as url, \
            sdk_client("streamable_http", url=url, message_handler=handler) as session:
        for _ in range(3):
            await session.send_ping()
        streams = [g.app[HTTP_KEY] for g in gws]
        await eventually(lambda: any(c.get_stream for s in streams for c in s.channels.values()))
        holder = next(i for i, s in enumerate(streams) if any(c.get_stream for c in s.channels.values()))
        other = gws[(holder + 1) % 3]
        sid = next(iter(other.gateway.sessions), None)
        if sid is None:  # make sure the other replica has a copy of the session
            await eventually(lambda: bool(other.gateway.sessions))
            sid = next(iter(other.gateway.sessions))
        # A resource update for this session raised on a replica without its GET stream.
        await other.gateway.sessions[sid].notify("notifications/resources/updated", {"uri": "kit://x"})
        async with asyncio.timeout(5):
            await got.wait()
        assert isinstance(received[0], types.ResourceUpdatedNotification) and received[0].params.uri == "kit://x"
        # list_changed is made by every replica itself: the GET stream gets it from its own replica.
        got.clear()
        received.clear()
        for g in gws:
            g.gateway.connectors["kit"].add_tool("added")  # type: ignore[attr-defined]
        async with asyncio.timeout(5):
            await got.wait()
        assert isinstance(received[0], types.ToolListChangedNotification)


async def test_delete_ends_the_session_everywhere() -> None:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    async with replicas(CONFIG + shared_state()) as gws, roundrobin_proxy([g.url for g in gws]) as url, \
            aiohttp.ClientSession() as http:
        async with http.post(url + "/mcp", json=init, headers=headers) as resp:
            assert resp.status == 200
            sid = resp.headers["Mcp-Session-Id"]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        for _ in range(3):
            async with http.post(url + "/mcp", json=call, headers={**headers, "Mcp-Session-Id": sid}) as resp:
                assert resp.status == 200
        assert all(sid in g.gateway.sessions for g in gws)
        async with http.delete(url + "/mcp", headers={"Mcp-Session-Id": sid}) as resp:
            assert resp.status == 204
        await eventually(lambda: not any(sid in g.gateway.sessions for g in gws))
        for _ in range(3):
            async with http.post(url + "/mcp", json=call, headers={**headers, "Mcp-Session-Id": sid}) as resp:
                assert resp.status == 404


async def test_the_principal_binding_holds_on_every_replica() -> None:
    config = CONFIG + shared_state() + """
auth:
  api_keys:
    - {name: alice, key: alice-key}
    - {name: mallory, key: mallory-key}
"""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with replicas(config) as gws, aiohttp.ClientSession() as http:
        async with http.post(gws[0].mcp_url, json=init, headers={**base, "Authorization": "Bearer alice-key"}) as resp:
            sid = resp.headers["Mcp-Session-Id"]
        # Another principal is refused by a replica that never saw the session (it loads the record) ...
        for gw in gws[1:]:
            async with http.post(gw.mcp_url, json=call, headers={
                    **base, "Authorization": "Bearer mallory-key", "Mcp-Session-Id": sid}) as resp:
                assert resp.status == 403
        # ... and its owner is served there.
        async with http.post(gws[2].mcp_url, json=call, headers={
                **base, "Authorization": "Bearer alice-key", "Mcp-Session-Id": sid}) as resp:
            assert resp.status == 200 and "tools" in (await resp.json())["result"]
