"""Upstream OAuth under refusal (issue 27): after an authorization whose callback the gateway
refused (a wrong ``iss``), new authorization links wait, doubling up to a cap, instead of one per
reconnect attempt (the trial logged 73-79 links in 10 s); and the scope an upstream's 401 named is
asked for by every principal's first authorization, not only by the principal that got the 401.

Real parts: the loopback authorization server and protected SDK upstream
(:mod:`tests.oauth.authserver`), the gateway's broker and its ``/oauth/start`` and
``/oauth/callback`` routes over loopback HTTP, the connector's :class:`OAuthClient`. The clock of
the backoff is injected: no test waits for it."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import aiohttp
import pytest
from aiohttp import web

from connectors.config import EgressConfig
from connectors.egress import EgressPolicy
from connectors.oauth.challenge import Challenge
from connectors.oauth.client import (
    LINK_BACKOFF_INITIAL_S,
    LINK_BACKOFF_MAX_S,
    SERVICE,
    AuthorizationRequired,
    OAuthClient,
    UpstreamAuthError,
)
from connectors.oauth.config import OAuthConfig
from connectors.oauth.http import OAuthHTTP
from connectors.oauth.port import MemoryTokenStore, OAuthPort
from gateway.oauth.broker import GatewayBroker
from gateway.oauth.routes import add_routes
from tests.e2e.clients import eventually
from tests.oauth.authserver import AuthServer, ProtectedUpstream, auth_world
from tests.support import running_gateway, serving

KEY_B64 = base64.b64encode(secrets.token_bytes(32)).decode()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def oauth_client(identity: str, *, client_credentials: bool = True
                       ) -> AsyncIterator[tuple[OAuthClient, Clock, AuthServer, ProtectedUpstream]]:
    """An OAuthClient for the protected upstream whose redirects reach the gateway's real routes."""
    store = MemoryTokenStore()
    host = SimpleNamespace(broker=None, public_url="", metadata=lambda: None, metadata_path=lambda: None)
    app = web.Application()
    add_routes(app, host)  # type: ignore[arg-type]
    clock = Clock()
    async with auth_world(client_credentials=client_credentials) as (auth, protected), serving(app) as url:
        broker = GatewayBroker(store, url)
        host.broker = broker
        cfg = OAuthConfig.model_validate({"identity": identity, "redirect_uri": f"{url}/oauth/callback",
                                          "client": {"client_id": "gw", "client_secret": "gw-secret"}})
        http = OAuthHTTP(EgressPolicy(EgressConfig(allow_private=["127.0.0.0/8"])))
        client = OAuthClient("crm", protected.url, cfg, http, lambda: OAuthPort(store=store, broker=broker),
                             clock=clock)
        try:
            yield client, clock, auth, protected
        finally:
            await client.aclose()
            await broker.close()


async def _redirect(http: aiohttp.ClientSession, url: str, user: str = "ops") -> str:
    async with http.get(url, headers={"X-Test-User": user}, allow_redirects=False) as resp:
        assert resp.status == 302, await resp.text()
        return resp.headers["Location"]


async def _authorize(client: OAuthClient, principal: str, iss: str | None) -> tuple[int, object]:
    """One round: a new link, a person opens it, the server answers with ``iss`` (None: as it
    should); returns the callback's status and what the waiting call got."""
    with pytest.raises(AuthorizationRequired) as required:
        await client.token(principal)
    waiting = asyncio.create_task(client.wait_authorized(required.value.key, 30))
    async with aiohttp.ClientSession() as http:
        to_server = await _redirect(http, required.value.url)  # /oauth/start/{id} → the authorization endpoint
        callback = urlsplit(await _redirect(http, to_server))
        if iss is not None:  # a server that names another issuer than the one the request went to
            query = {k: v[0] for k, v in parse_qs(callback.query).items()} | {"iss": iss}
            callback = callback._replace(query=urlencode(query))
        async with http.get(urlunsplit(callback)) as resp:
            status = resp.status
    async with asyncio.timeout(10):  # a refused callback wakes the waiting call at once
        return status, await waiting


async def test_links_after_refused_callbacks_wait_doubling_to_a_cap(caplog: pytest.LogCaptureFixture) -> None:
    async with oauth_client("service", client_credentials=False) as (client, clock, auth, _):
        expected = [min(LINK_BACKOFF_MAX_S, LINK_BACKOFF_INITIAL_S * 2 ** n) for n in range(8)]
        assert expected[-2:] == [LINK_BACKOFF_MAX_S] * 2  # the cap is reached
        for delay in expected:
            status, grant = await _authorize(client, SERVICE, iss="https://evil.example")
            assert status == 400 and grant is None
            links = auth.counts["authorize"]
            clock.now += delay - 0.01
            with pytest.raises(UpstreamAuthError, match=r"a new authorization link in 0\.0s") as waiting:
                await client.token(SERVICE)  # every reconnect attempt in between: no link, no log line
            assert "https://evil.example" not in waiting.value.message
            assert auth.counts["authorize"] == links
            clock.now += 0.01
        assert "iss 'https://evil.example' is not the issuer" in caplog.text  # the operator learns why
        # A round that completes resets the backoff: the next refusal waits the first step again.
        status, grant = await _authorize(client, SERVICE, iss=None)
        assert status == 200 and grant is not None and await client.token(SERVICE) == grant
        await client.forget(client.key(client.discovered, SERVICE))  # type: ignore[arg-type]
        await _authorize(client, SERVICE, iss="https://evil.example")
        with pytest.raises(UpstreamAuthError, match=f"in {LINK_BACKOFF_INITIAL_S:.1f}s"):
            await client.token(SERVICE)


async def test_a_scope_one_principals_401_named_is_asked_for_by_every_principals_first_authorization() -> None:
    async with oauth_client("user") as (client, _, _auth, _protected):
        await client.discovery()
        # The upstream answered alice's request 401 naming a scope its metadata does not list.
        await client.unauthorized("alice", Challenge(scope=("crm:write",), error="invalid_token"), None)
        for principal in ("alice", "bob"):
            with pytest.raises(AuthorizationRequired) as required:
                await client.token(principal)
            async with aiohttp.ClientSession() as http:
                to_server = await _redirect(http, required.value.url)
            assert parse_qs(urlsplit(to_server).query)["scope"][0].split() == ["crm:write"], principal


PUBLIC = "http://gw.test"  # the connector's redirect_uri host; the browser below resolves it to the gateway


async def test_a_reconnecting_service_identity_logs_no_link_per_attempt_after_a_refusal(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The trial's case through a real gateway: an operator opens the logged link, the callback is
    refused (wrong iss); the connector keeps reconnecting (here every 0.05-0.1 s) and, while the
    link backoff runs, logs no new link; once it has run (the injected clock), one new link."""
    async with auth_world(client_credentials=False) as (_auth, protected):
        entry = {"name": "crm", "type": "mcp", "transport": "streamable_http", "url": protected.url,
                 "startup_wait_s": 0, "ping_interval_s": 0, "reconnect_initial_s": 0.05, "reconnect_max_s": 0.1,
                 "egress": {"allow_private": ["127.0.0.0/8"]},
                 "oauth": {"identity": "service", "redirect_uri": PUBLIC + "/oauth/callback",
                           "client": {"client_id": "gw", "client_secret": "gw-secret"}}}
        config = (f"audit: {{enabled: false}}\noauth: {{encryption_key: '{KEY_B64}', "
                  f"token_store: 'file:{tmp_path / 'tokens.bin'}'}}\nconnectors: [{json.dumps(entry)}]\n")
        with caplog.at_level(logging.WARNING, logger="connectors.oauth"):
            async with running_gateway(config) as gw:
                connector = gw.gateway.connectors["crm"]
                clock = Clock()
                connector._identity.client.clock = clock  # type: ignore[attr-defined]  # the backoff's clock

                def links() -> list[str]:
                    return [r.getMessage().rsplit("open ", 1)[1] for r in caplog.records
                            if "an operator must authorise the gateway" in r.getMessage()]

                await eventually(lambda: links(), timeout=30)
                async with aiohttp.ClientSession() as http:
                    to_server = await _redirect(http, links()[0])
                    callback = urlsplit(await _redirect(http, to_server))
                    query = {k: v[0] for k, v in parse_qs(callback.query).items()} | {"iss": "https://evil.example"}
                    async with http.get(f"{gw.url}{callback.path}?{urlencode(query)}") as resp:
                        assert resp.status == 400
                # The next attempts meet the backoff (the clock stands still): no link, and /status says why.
                await eventually(lambda: "a new authorization link in 1.0s" in connector.health().detail, timeout=30)
                assert len(links()) == 1
                clock.now += LINK_BACKOFF_INITIAL_S
                await eventually(lambda: len(links()) == 2, timeout=30)
                assert links()[1] != links()[0]
