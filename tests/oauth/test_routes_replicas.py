"""Two replicas on one Redis (``state.store``): a start link and its callback landing on the replica
that did not begin the authorization are routed to the one that did (it holds the connector's
redeem coroutine); the grant lands in the shared token store and serves both. An owner that is
gone is known at once."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import SimpleNamespace

import aiohttp
from aiohttp import web

from connectors.oauth.port import GrantKey
from gateway.oauth.broker import GatewayBroker
from gateway.oauth.redis_store import RedisTokenStore
from gateway.oauth.routes import add_routes
from gateway.oauth.sealing import Sealer
from gateway.state.bus import Bus
from gateway.state.redis_store import RedisStore
from tests.oauth.test_routes import AuthServer
from tests.support import serving

KEY = secrets.token_bytes(32)


@dataclass
class Replica:
    url: str
    state: RedisStore
    store: RedisTokenStore
    broker: GatewayBroker


@asynccontextmanager
async def replica(redis_url: str, prefix: str) -> AsyncIterator[Replica]:
    state = RedisStore(redis_url, secrets.token_hex(5), prefix)
    bus = Bus(state)
    await state.start(bus.deliver)
    store = RedisTokenStore(redis_url, Sealer(KEY), prefix + ":oauth")
    await store.open()
    host = SimpleNamespace(broker=None, public_url="", metadata=lambda: None, metadata_path=lambda: None)
    app = web.Application()
    add_routes(app, host)  # type: ignore[arg-type]
    async with serving(app) as url:
        broker = GatewayBroker(store, url, state=state, bus=bus)
        host.broker = broker
        try:
            yield Replica(url, state, store, broker)
        finally:
            await broker.close()
            await state.close()
            await store.client.delete(store.grants_key, store.check_key)
            await store.close()


async def test_start_and_callback_on_the_other_replica_reach_the_owner(redis_url: str) -> None:
    prefix = f"gw:test:{secrets.token_hex(6)}"
    auth = AuthServer()
    async with serving(auth.app()) as auth.url, \
            replica(redis_url, prefix) as a, replica(redis_url, prefix) as b:
        auth.send_iss = auth.url
        key = GrantKey("crm", auth.url, "alice")
        # A begins (its connector holds the redeem); the person's browser reaches B for both steps.
        link = auth.begin(a.broker, key, b.url + "/oauth/callback", expected_issuer=auth.url, iss_required=True)
        link_on_b = link.replace(a.url, b.url)
        waiting = asyncio.create_task(a.broker.wait(key, 30))
        async with aiohttp.ClientSession() as http, http.get(link_on_b) as resp:
            text = await resp.text()
            assert resp.status == 200 and "crm is authorized" in text
            assert [str(h.url.origin()) for h in resp.history] == [b.url, auth.url]
        async with asyncio.timeout(10):
            grant = await waiting
        assert grant is not None and len(auth.redeemed) == 1
        # Made through A, stored in the shared store: B's connectors use it too.
        got = await b.store.get(key)
        assert got is not None and got.access_token == grant.access_token
        # The shared record of the pending authorization is gone with it.
        assert [k async for k in a.state.client.scan_iter(match="{" + prefix + "}:s:oauth.*")] == []

        # The owner dies between the start and the callback: B says so at once, nothing is stored.
        other = GrantKey("crm", auth.url, "bob")
        link = auth.begin(a.broker, other, b.url + "/oauth/callback")
        async with aiohttp.ClientSession() as http:
            async with http.get(link, allow_redirects=False) as resp:
                assert resp.status == 302
                authorize = resp.headers["Location"]
            async with http.get(authorize, allow_redirects=False) as resp:
                callback = resp.headers["Location"]
            await a.state.close()  # A stops listening (it died)
            async with http.get(callback) as resp:
                assert resp.status == 400
                assert "replica that started this authorization is gone" in await resp.text()
            # A start link of a replica that is gone is refused the same way.
            link = auth.begin(b.broker, other, b.url + "/oauth/callback").replace(b.broker.replica, a.broker.replica)
            async with http.get(link) as resp:
                assert resp.status == 400 and "is gone" in await resp.text()
        assert await b.store.get(other) is None
