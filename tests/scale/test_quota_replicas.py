"""The session cap (``gateway.http.max_sessions``, ``max_sessions_per_principal``) holds across
replicas sharing Redis: places are counted in the store, so the (N+1)th session is refused whichever
replica it lands on, with the same refusal as one process gives; DELETE through any replica, or the
expiry of the session's record, frees its place."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from tests.e2e import testkit
from tests.scale.harness import replicas, roundrobin_proxy, shared_state

BASE = """
audit: {enabled: false}
telemetry: {metrics: false}
connectors:
  - {name: kit, type: testkit, tools: 1}
"""
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


@pytest.fixture(autouse=True)
def _kind(monkeypatch: pytest.MonkeyPatch) -> None:
    testkit.register(monkeypatch)


def _config(http: dict[str, Any], idle_s: float = 3600.0, auth: str = "") -> str:
    gateway = {"name": "capped", "cursor_secret": "shared-by-replicas", "http": http, "session_idle_timeout_s": idle_s}
    return BASE + "gateway: " + json.dumps(gateway) + "\n" + shared_state() + auth


async def _init(http: aiohttp.ClientSession, url: str, key: str | None = None) -> tuple[int, dict[str, Any], str | None]:
    headers = {**HEADERS, **({"Authorization": f"Bearer {key}"} if key else {})}
    async with http.post(url, json=INIT, headers=headers) as resp:
        return resp.status, await resp.json(), resp.headers.get("Mcp-Session-Id")


async def test_max_sessions_holds_across_replicas_and_delete_frees_a_place() -> None:
    async with replicas(_config({"max_sessions": 3})) as gws, aiohttp.ClientSession() as http:
        sids = []
        for gw in gws:  # one session on each replica: three in all
            status, _, sid = await _init(http, gw.mcp_url)
            assert status == 200 and sid
            sids.append(sid)
        # The fourth is refused on every replica, as one process refuses it.
        for gw in gws:
            status, body, sid = await _init(http, gw.mcp_url)
            assert status == 503 and sid is None
            assert body == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message":
                            "Service Unavailable: 3 sessions are open (gateway.http.max_sessions = 3); retry later"}}
        # DELETE through another replica than the one that started it frees its place everywhere.
        async with http.delete(gws[2].mcp_url, headers={"Mcp-Session-Id": sids[0]}) as resp:
            assert resp.status == 204
        status, _, sid = await _init(http, gws[1].mcp_url)
        assert status == 200 and sid
        assert (await _init(http, gws[0].mcp_url))[0] == 503


async def test_concurrent_initializes_on_every_replica_never_overshoot() -> None:
    async with replicas(_config({"max_sessions": 5})) as gws, \
            roundrobin_proxy([g.url for g in gws]) as url, aiohttp.ClientSession() as http:
        results = await asyncio.gather(*(_init(http, url + "/mcp") for _ in range(15)))
        assert sorted(status for status, _, _ in results) == [200] * 5 + [503] * 10
        assert await gws[0].gateway.state.count_places("all") == 5


async def test_max_sessions_per_principal_holds_across_replicas() -> None:
    auth = """
auth:
  api_keys:
    - {name: alice, key: alice-key}
    - {name: bob, key: bob-key}
"""
    async with replicas(_config({"max_sessions_per_principal": 2}, auth=auth)) as gws, \
            aiohttp.ClientSession() as http:
        assert (await _init(http, gws[0].mcp_url, "alice-key"))[0] == 200
        assert (await _init(http, gws[1].mcp_url, "alice-key"))[0] == 200
        status, body, _ = await _init(http, gws[2].mcp_url, "alice-key")
        assert status == 429
        assert body["error"] == {"code": -32029, "message": "Too Many Requests: principal 'alice' already holds 2 "
                                 "sessions (gateway.http.max_sessions_per_principal = 2); end one (DELETE) or reuse it"}
        assert (await _init(http, gws[2].mcp_url, "bob-key"))[0] == 200  # another principal has its own places


async def test_a_place_is_freed_when_its_session_record_expires() -> None:
    """A session nobody uses (or whose replicas all died) expires with its record, and so does its
    place: nothing holds the cap for ever."""
    async with replicas(_config({"max_sessions": 1}, idle_s=1.0), n=2) as gws, aiohttp.ClientSession() as http:
        assert (await _init(http, gws[0].mcp_url))[0] == 200
        assert (await _init(http, gws[1].mcp_url))[0] == 503
        async with asyncio.timeout(10):  # the record's TTL is one second: the place follows it
            while (await _init(http, gws[1].mcp_url))[0] != 200:  # noqa: ASYNC110 - expiry in Redis: no event
                await asyncio.sleep(0.2)
