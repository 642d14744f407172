"""The state seam: config validation, and both stores' contracts (Redis: the real test server)."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest

from gateway.config import StateConfig, parse_config
from gateway.protocol.errors import ConfigError
from gateway.state import make_store
from gateway.state.memory import MemoryStore
from gateway.state.redis_store import RedisStore


def test_state_config_defaults_to_memory_and_validates_the_store() -> None:
    assert parse_config("gateway: {name: x}\n").state.store == "memory"
    config = parse_config("gateway: {cursor_secret: s}\nstate: {store: 'redis://127.0.0.1:6379/0'}\n")
    assert config.state.shared
    with pytest.raises(ConfigError) as info:
        parse_config("state: {store: 'postgres://db/x'}\n")
    assert "state.store" in str(info.value) and "redis://HOST:PORT/DB" in str(info.value)


def test_a_shared_store_needs_a_shared_cursor_secret() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("state: {store: 'redis://127.0.0.1:6379/0'}\n")
    assert "gateway.cursor_secret" in str(info.value)


async def test_memory_store_keeps_records_until_their_ttl_and_routes_nowhere() -> None:
    store = make_store(StateConfig())
    assert isinstance(store, MemoryStore) and not store.shared
    # The TTL leaves room for a busy machine to stall this process between the save and the first
    # load (at 50 ms a preempted run could already see the record expired).
    await store.save_session("s1", {"v": 1}, ttl_s=0.3)
    assert await store.load_session("s1") == {"v": 1}
    await asyncio.sleep(0.35)
    assert await store.load_session("s1") is None
    assert await store.route(None, {"t": "x"}) == 0


async def test_redis_store_records_ttl_and_routing(redis_url: str) -> None:
    prefix = f"gw:test:{secrets.token_hex(4)}"
    a = RedisStore(redis_url, "replicaa", prefix)
    b = RedisStore(redis_url, "replicab", prefix)
    got_a: list[dict[str, Any]] = []
    got_b: list[dict[str, Any]] = []
    arrived = asyncio.Event()

    def into(box: list[dict[str, Any]]) -> Any:
        def deliver(message: dict[str, Any]) -> None:
            box.append(message)
            arrived.set()
        return deliver

    await a.start(into(got_a))
    await b.start(into(got_b))
    try:
        await a.save_session("sid", {"v": 1, "log_level": "info"}, ttl_s=30)
        assert await b.load_session("sid") == {"v": 1, "log_level": "info"}
        ttl = await b.client.ttl("{" + prefix + "}:s:sid")
        assert 25 <= ttl <= 30
        await b.touch_session("sid", 100)
        assert await b.client.ttl("{" + prefix + "}:s:sid") > 90
        # One replica by name; everyone but the sender.
        assert await a.route("replicab", {"t": "response", "n": 1}) == 1
        async with asyncio.timeout(5):
            await arrived.wait()
        assert got_b == [{"t": "response", "n": 1, "from": "replicaa"}] and got_a == []
        arrived.clear()
        assert await b.route(None, {"t": "cancel"}) == 2  # both subscribers got it; b ignores its own
        async with asyncio.timeout(5):
            await arrived.wait()
        assert got_a == [{"t": "cancel", "from": "replicab"}] and len(got_b) == 1
        # A replica that is gone is known at once: nobody received the message.
        assert await a.route("gone", {"t": "response"}) == 0
        await a.drop_session("sid")
        assert await b.load_session("sid") is None
    finally:
        await a.close()
        await b.close()
        await a.close()  # idempotent


async def test_redis_store_that_cannot_be_reached_fails_within_its_timeout() -> None:
    store = RedisStore("redis://127.0.0.1:1/0", "r", timeout_s=0.2)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(Exception):  # noqa: B017,PT011 - whatever redis-py raises; the bound is the point
        await store.load_session("x")
    assert loop.time() - started < 1.0
    await store.close()
