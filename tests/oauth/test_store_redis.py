"""The Redis token store (the real test Redis, a unique prefix per test): sealed values and opaque
field names, grants shared by every replica on the prefix, a wrong key refused at start."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from connectors.oauth.port import Grant, GrantKey
from gateway.oauth.redis_store import RedisTokenStore
from gateway.oauth.sealing import Sealer, StoreError

KEY = secrets.token_bytes(32)
CANARY = "canary-" + secrets.token_hex(16)


@pytest.fixture
async def prefix(redis_url: str) -> AsyncIterator[str]:
    name = f"gw:test:oauth:{secrets.token_hex(6)}"
    yield name
    cleaner = RedisTokenStore(redis_url, Sealer(KEY), name)
    await cleaner.client.delete(cleaner.grants_key, cleaner.registrations_key, cleaner.check_key)
    await cleaner.close()


async def test_values_and_names_in_redis_reveal_nothing(redis_url: str, prefix: str) -> None:
    store = RedisTokenStore(redis_url, Sealer(KEY), prefix)
    await store.open()
    try:
        key = GrantKey("crm", "https://idp.example", "alice@example.com")
        await store.put(key, Grant(access_token=CANARY, refresh_token="r-" + CANARY, expires_at=time.time() + 60))
        await store.put_registration("crm", "https://idp.example", {"client_secret": "s-" + CANARY})
        raw = {**await store.client.hgetall(store.grants_key), **await store.client.hgetall(store.registrations_key)}
        assert len(raw) == 2
        blob = b"".join(k + v for k, v in raw.items())
        for needle in (CANARY, "alice", "idp.example", "crm"):
            assert needle.encode() not in blob
        got = await store.get(key)
        assert got is not None and got.access_token == CANARY and got.refresh_token == "r-" + CANARY
        assert await store.get_registration("crm", "https://idp.example") == {"client_secret": "s-" + CANARY}

        # A value copied under another grant's field does not open (AAD binds it to its field).
        bob = GrantKey("crm", "https://idp.example", "bob")
        await store.client.hset(store.grants_key, store._field(bob), raw[store._field(key).encode()])
        with pytest.raises(StoreError) as info:
            await store.get(bob)
        assert "moved from another field" in str(info.value)
    finally:
        await store.close()


async def test_two_replicas_on_one_prefix_share_grants(redis_url: str, prefix: str) -> None:
    a = RedisTokenStore(redis_url, Sealer(KEY), prefix)
    b = RedisTokenStore(redis_url, Sealer(KEY), prefix)
    await a.open()
    await b.open()
    try:
        keys = [GrantKey("crm", "https://idp", f"p{i}") for i in range(20)]
        # Concurrent writers on both replicas: each grant is its own field, none is lost.
        await asyncio.gather(*(s.put(k, Grant(access_token=f"t{i}")) for i, k in enumerate(keys)
                               for s in ((a, b)[i % 2],)))
        assert sorted(await b.keys(), key=lambda k: k.principal) == sorted(keys, key=lambda k: k.principal)
        got = await b.get(keys[0])
        assert got is not None and got.access_token == "t0"
        assert await b.delete(keys[0]) and await a.get(keys[0]) is None
        assert not await a.delete(keys[0])
        # Another prefix is another store.
        other = RedisTokenStore(redis_url, Sealer(KEY), prefix + "x")
        try:
            await other.open()
            assert await other.keys() == []
        finally:
            await other.client.delete(other.check_key)
            await other.close()
    finally:
        await a.close()
        await b.close()


async def test_a_replica_with_another_key_refuses_to_start(redis_url: str, prefix: str) -> None:
    first = RedisTokenStore(redis_url, Sealer(KEY), prefix)
    await first.open()
    await first.put(GrantKey("crm", "https://idp", "alice"), Grant(access_token=CANARY))
    wrong = RedisTokenStore(redis_url, Sealer(secrets.token_bytes(32)), prefix)
    try:
        with pytest.raises(StoreError) as info:
            await wrong.open()
        assert "same key" in str(info.value)
        with pytest.raises(StoreError):  # and a grant never reads as missing under the wrong key
            await wrong.get(GrantKey("crm", "https://idp", "alice"))
        with pytest.raises(StoreError):
            await wrong.keys()
    finally:
        await first.close()
        await wrong.close()


async def test_an_unreachable_redis_is_a_clear_error() -> None:
    store = RedisTokenStore("redis://127.0.0.1:1/0", Sealer(KEY), "gw:test:none", timeout_s=0.5)
    try:
        with pytest.raises(StoreError) as info:
            await store.open()
        assert "cannot be reached" in str(info.value)
        assert info.value.code == -32004  # a call needing the store fails as unavailable
        with pytest.raises(StoreError):
            await store.get(GrantKey("c", "i", "p"))
    finally:
        await store.close()


async def test_two_gateways_on_one_redis_share_grants(redis_url: str, tmp_path: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Two running gateways with state.store on one Redis: the token store defaults to it, and a
    grant one stores (a person authorised through it) is what the other's connectors read."""
    import base64

    import gateway.oauth.service as service_module
    from tests.support import running_gateway

    monkeypatch.setattr(service_module, "wants_port", lambda connector: True)  # no kind has oauth: yet here
    prefix = f"gw:test:{secrets.token_hex(6)}"
    text = (f"gateway: {{cursor_secret: s}}\nstate: {{store: '{redis_url}', redis_prefix: '{prefix}'}}\n"
            f"oauth: {{encryption_key: '{base64.b64encode(KEY).decode()}'}}\n"
            "connectors:\n  - {name: team, type: static, prompts: [{name: p, messages: [{role: user, text: hi}]}]}\n")
    async with running_gateway(text, base_dir=tmp_path) as a, running_gateway(text, base_dir=tmp_path) as b:
        port_a, port_b = a.gateway.oauth.port, b.gateway.oauth.port
        assert port_a is not None and port_b is not None and port_a.store is not port_b.store
        assert isinstance(port_a.store, RedisTokenStore)
        key = GrantKey("team", "https://idp.example", "alice")
        await port_a.store.put(key, Grant(access_token=CANARY))
        got = await port_b.store.get(key)
        assert got is not None and got.access_token == CANARY
        await port_b.store.delete(key)
        assert await port_a.store.get(key) is None
        store = port_a.store
        assert store.grants_key == "{" + prefix + ":oauth}:grants"
        await store.client.delete(store.check_key)
    assert not (tmp_path / "oauth-tokens.bin").exists()
