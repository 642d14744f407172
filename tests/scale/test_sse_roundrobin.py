"""Legacy HTTP+SSE (2024-11-05) sessions across replicas sharing Redis: the GET /sse stream lives on
one replica, the client's POSTs land on any (HAProxy round robin) and are routed to it."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from mcp import types

from tests.e2e import testkit
from tests.e2e.clients import sdk_client
from tests.scale.harness import answer_in_upper_case, replicas, roundrobin_proxy, shared_state
from tests.scale.test_roundrobin import CONFIG, _text


@pytest.fixture(autouse=True)
def _kind(monkeypatch: pytest.MonkeyPatch) -> None:
    testkit.register(monkeypatch)


async def test_sdk_sse_client_runs_a_session_through_roundrobin_replicas() -> None:
    """The official SDK's legacy SSE client: every POST after the stream's lands on another
    replica (3 replicas, round robin), and each is answered on the stream."""
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with replicas(CONFIG + shared_state()) as gws, roundrobin_proxy([g.url for g in gws]) as url, \
            sdk_client("sse", url=url, sampling_callback=answer_in_upper_case) as session:
        names: list[str] = []
        cursor = None
        while True:
            page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
            names += [t.name for t in page.tools]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert len(names) == 13
        for i in range(6):
            assert _text(await session.call_tool(f"kit_echo_00{i}", {"i": i})) == f'{{"i": {i}}}'
        assert _text(await session.call_tool("kit_progress", {"steps": 3}, progress_callback=on_progress)) == "3 steps"
        assert progress == [1, 2, 3]
        # The sampling request goes out on the stream; its answer is POSTed to any replica and
        # routed back to the stream's owner, which runs the call.
        for q in ("one", "two", "three"):
            assert _text(await session.call_tool("kit_sample", {"q": q})) == f"sampled: {q.upper()}"
        # Only the owner holds the session: the others routed.
        assert sum(1 for g in gws if g.gateway.sessions) == 1


async def _endpoint(resp: aiohttp.ClientResponse) -> str:
    async for raw in resp.content:
        line = raw.decode().strip()
        if line.startswith("data:"):
            return line.removeprefix("data:").strip()
    raise AssertionError("no endpoint event")


async def _next_message(resp: aiohttp.ClientResponse) -> dict:
    async for raw in resp.content:
        line = raw.decode().strip()
        if line.startswith("data:"):
            return json.loads(line.removeprefix("data:"))
    raise AssertionError("stream ended")


async def test_a_post_on_another_replica_is_checked_there_and_answered_on_the_stream() -> None:
    config = CONFIG + shared_state() + """
auth:
  api_keys:
    - {name: alice, key: alice-key}
    - {name: mallory, key: mallory-key}
"""
    alice = {"Authorization": "Bearer alice-key"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    async with replicas(config, n=2) as gws, aiohttp.ClientSession() as http:
        async with http.get(gws[0].url + "/sse", headers=alice) as stream:
            endpoint = await _endpoint(stream)
            other = gws[1].url + endpoint
            # Another principal is refused by the replica that does not hold the stream.
            async with http.post(other, json=init, headers={"Authorization": "Bearer mallory-key"}) as resp:
                assert resp.status == 403
            # Bad JSON is refused there too, precisely.
            async with http.post(other, data=b"{nope", headers={**alice, "Content-Type": "application/json"}) as resp:
                assert resp.status == 400 and (await resp.json())["error"]["code"] == -32700
            # The owner's POST is accepted there and answered on the stream held by the first.
            async with http.post(other, json=init, headers=alice) as resp:
                assert resp.status == 202
            reply = await _next_message(stream)
            assert reply["id"] == 1 and reply["result"]["protocolVersion"] == "2024-11-05"
            async with http.post(other, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                                 headers=alice) as resp:
                assert resp.status == 202
            async with http.post(other, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                    "name": "kit_echo_001", "arguments": {"a": 1}}}, headers=alice) as resp:
                assert resp.status == 202
            reply = await _next_message(stream)
            assert reply["id"] == 2 and reply["result"]["content"][0]["text"] == '{"a": 1}'
        # The stream closed: once its owner notices, the record is dropped and a POST anywhere is
        # 404 (not routed to nobody).
        async with asyncio.timeout(10):
            for gw in gws:
                while True:
                    async with http.post(gw.url + endpoint, json=init, headers=alice) as resp:
                        if resp.status == 404:
                            break
                        assert resp.status == 202
                    await asyncio.sleep(0.1)


async def test_a_post_for_a_stream_whose_replica_is_gone_is_refused() -> None:
    """A crashed owner leaves its record until the TTL: a POST routed to it reaches nobody and gets
    404 at once (the client opens a new stream), not a 202 for a reply that cannot come."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    async with replicas(CONFIG + shared_state(), n=2) as gws, aiohttp.ClientSession() as http:
        async with http.get(gws[0].url + "/sse") as stream:
            endpoint = await _endpoint(stream)
            sid = endpoint.partition("session_id=")[2]
            store = gws[1].gateway.state
            record = await store.load_session(f"sse.{sid}")
            assert record is not None and record["owner"] == gws[0].gateway.state.replica
            # As if the owner had crashed: its record names a replica nobody listens as.
            await store.save_session(f"sse.{sid}", {**record, "owner": "deadbeef00"}, 60)
            async with http.post(gws[1].url + endpoint, json=init) as resp:
                assert resp.status == 404
                assert "gone" in (await resp.json())["error"]["message"]
