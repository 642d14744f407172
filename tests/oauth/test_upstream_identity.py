"""The MCP connector's upstream identities end to end: a gateway (API keys or JWT downstream) in
front of a protected SDK upstream and a loopback authorization server (:mod:`tests.oauth.authserver`).

What the upstream receives is the evidence: every token it saw with its subject. The caller's own
credential never appears there; a principal's calls carry only that principal's token."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import httpx2
import pytest
from mcp import types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from connectors.base import Connector
from connectors.oauth.port import LocalAuthorizationBroker, MemoryTokenStore, OAuthPort
from tests.auth.idp import AUDIENCE, ISSUER, loopback_idp
from tests.e2e.clients import LEGACY, MODERN, connect
from tests.oauth.authserver import ProtectedUpstream, auth_world
from tests.support import running_gateway

REDIRECT = "http://127.0.0.1:9/oauth/callback"
KEYS = {"alice": "alice-key", "bob": "bob-key"}


@pytest.fixture
def port() -> Iterator[OAuthPort]:
    """A fresh token store and broker for the connectors of this test."""
    store = MemoryTokenStore()
    fresh = OAuthPort(store=store, broker=LocalAuthorizationBroker(store))
    saved = Connector.oauth_port
    Connector.oauth_port = fresh
    try:
        yield fresh
    finally:
        Connector.oauth_port = saved


def config(protected: ProtectedUpstream, oauth: dict[str, Any] | None = None, *, auth: str | None = None,
           extra: dict[str, Any] | None = None) -> str:
    entry: dict[str, Any] = {"name": "crm", "type": "mcp", "transport": "streamable_http", "url": protected.url,
                             "startup_wait_s": 10, "ping_interval_s": 0,
                             "egress": {"allow_private": ["127.0.0.0/8"]}, **(extra or {})}
    if oauth is not None:
        entry["oauth"] = oauth
    keys = "[" + ", ".join(f"{{name: {n}, key: {k}}}" for n, k in KEYS.items()) + "]"
    return (f"audit: {{enabled: false}}\nauth: {auth or '{api_keys: ' + keys + '}'}\n"
            f"connectors: [{json.dumps(entry)}]\n")


def service(client_id: str = "gw", secret: str = "gw-secret", **kw: Any) -> dict[str, Any]:
    return {"identity": "service", "client": {"client_id": client_id, "client_secret": secret}, **kw}


@asynccontextmanager
async def caller(url: str, key: str, revision: str = LEGACY, **kwargs: Any) -> AsyncIterator[Any]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http, \
            connect(streamable_http_client(url, http_client=http), revision, **kwargs) as session:
        yield session


def browser(port: OAuthPort, user: str) -> Any:
    """An elicitation callback that authorises as ``user`` would in a browser: opens the URL, and
    hands the redirect's code, state and iss to the broker (the gateway's callback)."""

    async def elicit(_ctx: Any, params: Any) -> types.ElicitResult:
        assert params.mode == "url"
        async with aiohttp.ClientSession() as http, \
                http.get(params.url, headers={"X-Test-User": user}, allow_redirects=False) as resp:
            query = parse_qs(urlsplit(resp.headers["Location"]).query)
        broker = port.broker
        assert isinstance(broker, LocalAuthorizationBroker)
        await broker.complete(query["state"][0], query["code"][0], query["iss"][0])
        return types.ElicitResult(action="accept")

    return elicit


def text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "text", None))


async def test_service_identity_uses_client_credentials_and_never_the_callers_key(port: OAuthPort) -> None:
    async with auth_world() as (auth, protected):
        async with running_gateway(config(protected, service())) as gw, \
                caller(gw.mcp_url, KEYS["alice"]) as session:
            tools = await session.list_tools()
            assert "crm_echo" in {t.name for t in tools.tools}
            result = await session.call_tool("crm_echo", {"text": "hi"})
            assert text(result) == "hi"
        assert auth.counts["client_credentials"] == 1 and auth.counts["authorize"] == 0
        accepted = [s for s in protected.seen if s.status == 200]
        assert accepted and {s.subject for s in accepted} == {"service:gw"}
        assert not any(s.token in KEYS.values() for s in protected.seen)


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
async def test_service_identity_over_both_http_transports_refreshes_nothing_it_need_not(
        port: OAuthPort, transport: str) -> None:
    async with auth_world(transport=transport) as (auth, protected):
        async with running_gateway(config(protected, service(), extra={"transport": transport})) as gw, \
                caller(gw.mcp_url, KEYS["bob"]) as session:
            for i in range(3):
                assert text(await session.call_tool("crm_echo", {"text": str(i)})) == str(i)
        assert auth.counts["token"] == 1
        assert {s.subject for s in protected.seen if s.status == 200} == {"service:gw"}


async def test_two_principals_get_their_own_tokens_through_url_elicitation(port: OAuthPort) -> None:
    oauth = {"identity": "user", "redirect_uri": REDIRECT, "client": {"client_id": "gw", "client_secret": "gw-secret"}}
    async with auth_world() as (auth, protected):
        async with running_gateway(config(protected, oauth)) as gw:
            for user in ("alice", "bob", "alice"):
                for revision in (LEGACY, MODERN):
                    async with caller(gw.mcp_url, KEYS[user], revision,
                                      elicitation_callback=browser(port, user)) as session:
                        assert text(await session.call_tool("crm_echo", {"text": user})) == user
        # One authorization per principal: the grant is kept and reused (other sessions, both eras).
        assert auth.counts["authorize"] == 2
        calls = protected.subjects()
        assert len(calls) == 6
        for subject, body in calls:
            assert subject == body["params"]["arguments"]["text"], (subject, body)
        # Listings went with the service identity (client credentials), never a user's token.
        assert {s.subject for s in protected.seen if s.method == "tools/list" and s.status == 200} == {"service:gw"}


async def test_a_principal_who_declines_gets_an_error_and_no_token(port: OAuthPort) -> None:
    oauth = {"identity": "user", "redirect_uri": REDIRECT, "client": {"client_id": "gw", "client_secret": "gw-secret"}}

    async def decline(_ctx: Any, _params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with auth_world() as (_auth, protected):
        async with running_gateway(config(protected, oauth)) as gw, \
                caller(gw.mcp_url, KEYS["bob"], elicitation_callback=decline) as session:
            with pytest.raises(MCPError) as info:
                await session.call_tool("crm_echo", {"text": "bob"})
            assert "declined" in str(info.value)
        assert protected.subjects() == []


async def test_short_lived_tokens_under_load_see_no_401_and_one_token_request_per_expiry(port: OAuthPort) -> None:
    lifetime, duration = 2.0, 10.0
    async with auth_world(token_lifetime_s=lifetime) as (auth, protected):
        async with running_gateway(config(protected, service())) as gw, \
                caller(gw.mcp_url, KEYS["alice"]) as session:
            loop = asyncio.get_running_loop()
            start = loop.time()

            async def one(i: int) -> None:
                await asyncio.sleep(duration * i / 200)  # spread over the duration
                assert text(await session.call_tool("crm_echo", {"text": str(i)})) == str(i)

            await asyncio.gather(*(one(i) for i in range(200)))
            elapsed = loop.time() - start
        calls = [s for s in protected.seen if s.method == "tools/call"]
        assert len(calls) == 200 and all(s.status == 200 for s in calls), [s.status for s in calls if s.status != 200]
        expiries = int(elapsed // lifetime) + 1
        print(f"200 calls over {elapsed:.1f}s with {lifetime:g}s tokens: upstream statuses "
              f"{sorted({s.status for s in calls})}, token requests {auth.counts['client_credentials']} "
              f"(expiries {expiries})")
        assert auth.counts["client_credentials"] <= expiries + 1, (auth.counts, elapsed)


async def test_an_always_403_upstream_gets_max_step_up_plus_one_authorisations(port: OAuthPort) -> None:
    """The upstream wants mcp:admin, which the authorization server never grants: the connector
    asks max_step_up more times (with the union of scopes), then stops and names the scope."""
    async with auth_world(required_scope="mcp:admin", grantable=frozenset({"mcp:read"})) as (auth, protected):
        async with running_gateway(config(protected, service(max_step_up=2))) as gw:
            health = gw.connectors["crm"].health()
            assert not health.up and "'mcp:admin'" in health.detail, health.detail
            async with caller(gw.mcp_url, KEYS["alice"]) as session:
                listed = await session.list_tools()
                assert "crm_echo" not in {t.name for t in listed.tools}
        assert auth.counts["client_credentials"] == 3
        assert all(s.status == 403 for s in protected.seen if s.token is not None)


async def test_per_principal_static_keys_reach_only_their_user(port: OAuthPort) -> None:
    async with auth_world() as (auth, protected):
        alice = auth.issue("alice", protected.url)
        service_key = auth.issue("service:ops", protected.url)
        extra = {"credentials": {"per_principal": {"alice": alice}, "service": service_key}}
        async with running_gateway(config(protected, None, extra=extra)) as gw:
            async with caller(gw.mcp_url, KEYS["alice"]) as session:
                assert text(await session.call_tool("crm_echo", {"text": "alice"})) == "alice"
            async with caller(gw.mcp_url, KEYS["bob"]) as session:
                with pytest.raises(MCPError) as info:
                    await session.call_tool("crm_echo", {"text": "bob"})
                assert "principal bob has none" in str(info.value) and alice not in str(info.value)
        assert [subject for subject, _ in protected.subjects()] == ["alice"]
        assert {s.subject for s in protected.seen if s.method == "tools/list"} == {"service:ops"}


async def test_token_exchange_trades_the_callers_jwt_and_never_sends_it_upstream(port: OAuthPort) -> None:
    async with loopback_idp() as idp, auth_world() as (auth, protected):
        downstream = (f'{{jwt: {{jwks_url: "{idp.url}", issuer: "{ISSUER}", audience: {AUDIENCE}, '
                      'groups_claim: groups}}')
        oauth = {**service(), "identity": "exchange"}
        async with running_gateway(config(protected, oauth, auth=downstream)) as gw:
            for user in ("alice", "carol"):
                jwt_token = idp.token(sub=user)
                async with caller(gw.mcp_url, jwt_token) as session:
                    assert text(await session.call_tool("crm_echo", {"text": user})) == user
                assert not any(s.token == jwt_token for s in protected.seen)
        assert [(subject, body["params"]["arguments"]["text"]) for subject, body in protected.subjects()] == [
            ("exchange:alice", "alice"), ("exchange:carol", "carol")]
        assert auth.counts["urn:ietf:params:oauth:grant-type:token-exchange"] == 2


async def test_tokens_and_secrets_appear_in_no_log_health_or_error(port: OAuthPort,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    """Every token the authorization server issued, every refresh token and the client secret are
    absent from the logs (all levels), the connector's health and the errors callers see."""
    caplog.set_level(logging.DEBUG)
    oauth = {"identity": "user", "redirect_uri": REDIRECT,
             "client": {"client_id": "gw", "client_secret": "gw-secret-canary"}}
    errors: list[str] = []
    async with auth_world(token_lifetime_s=1.0) as (auth, protected):
        auth.clients["gw"]["secret"] = "gw-secret-canary"
        async with running_gateway(config(protected, oauth)) as gw:
            async with caller(gw.mcp_url, KEYS["alice"], elicitation_callback=browser(port, "alice")) as session:
                for _ in range(3):  # 1 s tokens: refreshed with rotation on the way
                    assert text(await session.call_tool("crm_echo", {"text": "alice"})) == "alice"
                    await asyncio.sleep(0.6)
            async with caller(gw.mcp_url, KEYS["bob"]) as session:  # bob cannot be asked: an error
                try:
                    await session.call_tool("crm_echo", {"text": "bob"})
                except MCPError as exc:
                    errors.append(str(exc))
            health = repr(gw.connectors["crm"].health())
        secrets_seen = [*auth.tokens, *auth.refresh_tokens, "gw-secret-canary"]
        assert auth.counts["refresh_token"] >= 1 and errors
        for secret in secrets_seen:
            assert secret not in caplog.text and secret not in health and all(secret not in e for e in errors)
