"""The response cache: read-only tools answered from the cache per principal, through a real gateway
with the official SDK as upstream; the store's bounds and the 2026-07-28 hints on plain values."""

from __future__ import annotations

import json
import sys
from typing import Any

import aiohttp

from connectors.config import CacheConfig
from gateway.context import CallContext, Principal
from gateway.filters.cache import ResponseCacheFilter, ResultStore
from gateway.telemetry import metrics
from tests.connectors.mcp.helpers import SERVER
from tests.connectors.sql.helpers import DummySession
from tests.filters.mcp_http import McpHttp
from tests.support import running_gateway


def _config(cache: dict[str, Any]) -> str:
    return json.dumps({
        "gateway": {"http": {"json_response": True}}, "audit": {"enabled": False},
        "auth": {"api_keys": [{"name": "alice", "key": "alice-key"}, {"name": "bob", "key": "bob-key"}]},
        "connectors": [{"name": "up", "type": "mcp", "transport": "stdio", "command": sys.executable,
                        "args": [SERVER, "--transport", "stdio", "--controls"], "protocol": "legacy",
                        "overrides": {"echo": {"annotations": {"readOnlyHint": True}}}, "cache": cache}]})


def _text(response: dict[str, Any]) -> str:
    return str(response["result"]["content"][0]["text"])


def _count(connector: str, result: str) -> float:
    return metrics.REGISTRY.get_sample_value("mcp_gateway_response_cache_total",
                                             {"connector": connector, "result": result}) or 0.0


async def test_read_only_results_are_served_from_the_cache_per_principal() -> None:
    async with running_gateway(_config({"ttl_s": 60})) as gw, aiohttp.ClientSession() as http:
        alice = await McpHttp(http, gw.mcp_url, "alice-key").initialize()
        bob = await McpHttp(http, gw.mcp_url, "bob-key").initialize()
        hits, misses = _count("up", "hit"), _count("up", "miss")

        async def counter(who: McpHttp, key: str) -> str:
            return _text(await who.call("tools/call", {"name": "up_counter", "arguments": {"key": key}}))

        assert await counter(alice, "a") == "a 1"
        assert await counter(alice, "a") == "a 1"  # cached: the upstream was not called
        assert await counter(alice, "b") == "b 2"  # other arguments, another entry
        assert await counter(bob, "a") == "a 3"  # another principal never sees alice's entry
        assert await counter(bob, "a") == "a 3"
        assert (_count("up", "hit") - hits, _count("up", "miss") - misses) == (2, 3)
        # Error results are never kept.
        first = await alice.call("tools/call", {"name": "up_flaky", "arguments": {}})
        again = await alice.call("tools/call", {"name": "up_flaky", "arguments": {}})
        assert first["result"]["isError"] and again["result"]["isError"] and _text(first) != _text(again)
        # A tool made read-only by an override is cached as well; one without the hint is not.
        assert _text(await alice.call("tools/call", {"name": "up_echo", "arguments": {"text": "x"}})) == "x"
        store = next(f for f in gw.gateway.filters if isinstance(f, ResponseCacheFilter)).store("up")
        assert store is not None and len(store) == 4
        await alice.call("tools/call", {"name": "up_progress", "arguments": {"steps": 1}})
        assert len(store) == 4


def test_store_is_an_lru_bounded_in_entries_bytes_and_time() -> None:
    now = [100.0]
    store = ResultStore(CacheConfig(max_entries=2, max_bytes=4096, ttl_s=10), clock=lambda: now[0])
    assert store.put(("p", "t", "1"), {"v": 1}, 10) and store.put(("p", "t", "2"), {"v": 2}, 10)
    assert store.get(("p", "t", "1")) == {"v": 1}  # 1 is now the most recent
    store.put(("p", "t", "3"), {"v": 3}, 10)
    assert store.get(("p", "t", "2")) is None and store.get(("p", "t", "1")) == {"v": 1} and len(store) == 2
    assert not store.put(("p", "t", "big"), {"v": "x" * 2000}, 10)  # over a quarter of max_bytes
    store.put(("p", "t", "4"), {"v": "y" * 900}, 10)
    store.put(("p", "t", "5"), {"v": "z" * 900}, 10)
    assert store.bytes <= 4096 and len(store) == 2
    now[0] += 10.5
    assert store.get(("p", "t", "5")) is None and len(store) == 1
    hit = store.get(("p", "t", "4"))
    assert hit is None  # expired too
    fresh = ResultStore(CacheConfig())
    fresh.put(("k",), {"a": [1]}, 5)
    copy = fresh.get(("k",))
    assert copy is not None
    copy["a"].append(2)  # a caller mutating its result does not change the entry
    assert fresh.get(("k",)) == {"a": [1]}


async def test_upstream_caching_hints_are_honoured() -> None:
    tool = {"name": "t", "annotations": {"readOnlyHint": True}}
    results: list[dict[str, Any]] = []
    calls = [0]

    async def backend(ctx: CallContext) -> dict[str, Any]:
        calls[0] += 1
        return dict(results[0])

    cache = ResponseCacheFilter({"c": CacheConfig(ttl_s=60)}, lambda name: ("c", tool) if name == "t" else None)

    def ctx(who: str, **params: Any) -> CallContext:
        return CallContext(session=DummySession(), method="tools/call", request_id=1, params=params,  # type: ignore[arg-type]
                           principal=Principal(who, kind="api_key"), target="t", arguments={"x": 1})

    async def twice(result: dict[str, Any], first: str = "a", second: str = "a", **params: Any) -> int:
        results[:] = [result]
        calls[0] = 0
        cache.store("c")._entries.clear()  # type: ignore[union-attr]
        await cache(ctx(first, **params), backend)
        await cache(ctx(second, **params), backend)
        return calls[0]

    assert await twice({"content": []}) == 1
    assert await twice({"content": [], "ttlMs": 0}) == 2  # "do not reuse"
    assert await twice({"content": [], "cacheScope": "public"}, "a", "b") == 1  # shared by principals
    assert await twice({"content": [], "cacheScope": "private"}, "a", "b") == 2
    assert await twice({"content": []}, "a", "b") == 2  # no hint: per principal
    assert await twice({"content": [], "isError": True}) == 2
    assert await twice({"resultType": "input_required", "inputRequests": {}}) == 2
    assert await twice({"content": []}, requestState="s") == 2  # a multi round-trip retry
    results[:] = [{"content": [], "ttlMs": 1}]
    cache.store("c")._entries.clear()  # type: ignore[union-attr]
    await cache(ctx("a"), backend)
    entry = next(iter(cache.store("c")._entries.values()))  # type: ignore[union-attr]
    assert entry.expires - cache.store("c")._clock() <= 0.001  # type: ignore[union-attr]
