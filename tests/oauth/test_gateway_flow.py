"""Upstream OAuth through the REAL gateway side: the gateway's own token store (sealed file, or
Redis with ``state.store``), its broker and its ``/oauth/start/{id}`` and ``/oauth/callback``
routes, an ``mcp`` connector with ``oauth: {identity: user}`` in front of the loopback
authorization server and protected upstream (:mod:`tests.oauth.authserver`), and official SDK
clients (API keys for two principals) whose URL-elicitation callback is a browser: it follows the
start link (302 to the authorization endpoint, 302 to the callback) over HTTP.

The connector's ``redirect_uri`` is a public name (``http://gw.test``); the browser resolves it to
the gateway under test, as DNS would to a gateway behind its public URL.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from connectors.oauth.port import GrantKey
from gateway.oauth.redis_store import RedisTokenStore
from tests.e2e.clients import LEGACY, MODERN
from tests.oauth.authserver import ProtectedUpstream, auth_world
from tests.oauth.test_upstream_identity import KEYS, caller, text
from tests.support import running_gateway

PUBLIC = "http://gw.test"
KEY_B64 = base64.b64encode(secrets.token_bytes(32)).decode()
Elicit = Callable[[Any, Any], Awaitable[types.ElicitResult]]


def gateway_config(protected: ProtectedUpstream, top: str) -> str:
    """``top``: the gateway's ``oauth:`` block (and ``state:``) as YAML lines."""
    entry: dict[str, Any] = {
        "name": "crm", "type": "mcp", "transport": "streamable_http", "url": protected.url, "startup_wait_s": 10,
        "ping_interval_s": 0, "egress": {"allow_private": ["127.0.0.0/8"]},
        "oauth": {"identity": "user", "redirect_uri": PUBLIC + "/oauth/callback", "authorization_timeout_s": 30,
                  "client": {"client_id": "gw", "client_secret": "gw-secret"}}}
    keys = "[" + ", ".join(f"{{name: {n}, key: {k}}}" for n, k in KEYS.items()) + "]"
    return f"audit: {{enabled: false}}\nauth: {{api_keys: {keys}}}\n{top}connectors: [{json.dumps(entry)}]\n"


@asynccontextmanager
async def session_of(url: str, key: str, revision: str, elicit: Elicit) -> AsyncIterator[Any]:
    """A 2025-11-25 SDK session (the URL elicitation arrives as a request), or the SDK's 2026-07-28
    client, which drives the input-request rounds with the same callback."""
    if revision == LEGACY:
        async with caller(url, key, elicitation_callback=elicit) as session:
            yield session
        return
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http, \
            Client(streamable_http_client(url, http_client=http), mode=MODERN, elicitation_callback=elicit) as client:
        yield client


def file_store(path: Path) -> str:
    return f"oauth: {{encryption_key: '{KEY_B64}', token_store: 'file:{path}'}}\n"


async def open_start(http: aiohttp.ClientSession, link: str, gateway_url: str) -> str:
    """The first hop: the gateway's start link answers a redirect to the authorization endpoint."""
    assert link.startswith(gateway_url + "/oauth/start/"), link
    async with http.get(link, allow_redirects=False) as resp:
        assert resp.status == 302, (resp.status, await resp.text())
        return resp.headers["Location"]


async def finish(http: aiohttp.ClientSession, authorize: str, user: str, gateway_url: str) -> tuple[int, str]:
    """The person approves at the authorization server, whose redirect lands on the gateway's
    callback (the public name resolved to the gateway under test)."""
    async with http.get(authorize, headers={"X-Test-User": user}, allow_redirects=False) as resp:
        assert resp.status == 302, resp.status
        callback = resp.headers["Location"]
    assert callback.startswith(PUBLIC + "/oauth/callback?"), callback
    async with http.get(gateway_url + callback[len(PUBLIC):], allow_redirects=False) as resp:
        return resp.status, await resp.text()


def browser(user: str, gateway_url: str, links: list[str]) -> Elicit:
    """An elicitation callback that authorises as ``user`` through the gateway's routes."""

    async def elicit(_ctx: Any, params: Any) -> types.ElicitResult:
        assert params.mode == "url"
        links.append(params.url)
        async with aiohttp.ClientSession() as http:
            status, page = await finish(http, await open_start(http, params.url, gateway_url), user, gateway_url)
        assert status == 200 and "crm is authorized" in page, (status, page)
        return types.ElicitResult(action="accept")

    return elicit


def never(asked: list[str]) -> Elicit:
    async def elicit(_ctx: Any, params: Any) -> types.ElicitResult:
        asked.append(params.url)
        return types.ElicitResult(action="decline")

    return elicit


def files_written(directory: Path) -> dict[str, bytes]:
    """Every file the gateway wrote there (the token store, the audit database and its journal or
    spill files), by name."""
    return {path.name: path.read_bytes() for path in directory.iterdir() if path.is_file()}


async def test_a_later_call_gets_its_own_start_link_while_the_first_one_is_open(tmp_path: Path) -> None:
    """Start links are single use. Alice's first call hands her a link, she opens it (the gateway
    redirects her to the authorization server) and has not finished; a second call of hers meanwhile
    gets a new link, not a copy of the used one, and completing it serves both calls."""
    async with auth_world() as (auth, protected):
        async with running_gateway(gateway_config(protected, file_store(tmp_path / "tokens.bin"))) as gw:
            opened = asyncio.Event()
            first: list[str] = []
            second: list[str] = []

            async def open_and_wander_off(_ctx: Any, params: Any) -> types.ElicitResult:
                first.append(params.url)
                async with aiohttp.ClientSession() as http:
                    await open_start(http, params.url, gw.url)  # opened: the link is used
                opened.set()
                return types.ElicitResult(action="accept")

            async with caller(gw.mcp_url, KEYS["alice"], elicitation_callback=open_and_wander_off) as one, \
                    caller(gw.mcp_url, KEYS["alice"], elicitation_callback=browser("alice", gw.url, second)) as two:
                call_one = asyncio.create_task(one.call_tool("crm_echo", {"text": "one"}))
                async with asyncio.timeout(30):
                    await opened.wait()
                assert text(await two.call_tool("crm_echo", {"text": "two"})) == "two"
                async with asyncio.timeout(30):
                    assert text(await call_one) == "one"  # woken by the grant the second link made
            assert len(first) == 1 and len(second) == 1 and first[0] != second[0]
            async with aiohttp.ClientSession() as http, http.get(first[0], allow_redirects=False) as resp:
                assert resp.status == 400 and "already used" in await resp.text()
        assert auth.counts["authorization_code"] == 1
        assert [subject for subject, _ in protected.subjects()] == ["alice", "alice"]


async def test_grants_made_through_the_gateway_routes_survive_a_restart(tmp_path: Path) -> None:
    """Both SDK revisions (a 2025-11-25 session gets an elicitation request, a 2026-07-28 caller an
    input request); the grants land in the sealed file store, and a restarted gateway serves both
    principals from it without asking anyone again."""
    store_path = tmp_path / "tokens.bin"
    async with auth_world() as (auth, protected):
        config = gateway_config(protected, file_store(store_path))
        links: list[str] = []
        async with running_gateway(config) as gw:
            for user, revision in (("alice", LEGACY), ("bob", MODERN)):
                async with session_of(gw.mcp_url, KEYS[user], revision, browser(user, gw.url, links)) as session:
                    assert text(await session.call_tool("crm_echo", {"text": user})) == user
            port = gw.gateway.oauth.port
            assert port is not None
            stored = {(k.connector, k.issuer, k.principal) for k in await port.store.keys()}
            # the two principals' grants, and the service identity's (listings: client credentials)
            assert stored == {("crm", auth.url, "alice"), ("crm", auth.url, "bob"), ("crm", auth.url, "")}
        assert len(links) == 2 and auth.counts["authorize"] == 2
        sealed = store_path.read_bytes()
        assert sealed and not any(token.encode() in sealed for token in (*auth.tokens, *auth.refresh_tokens))

        asked: list[str] = []
        async with running_gateway(config) as gw:
            for user, revision in (("alice", MODERN), ("bob", LEGACY)):
                async with session_of(gw.mcp_url, KEYS[user], revision, never(asked)) as session:
                    assert text(await session.call_tool("crm_echo", {"text": user + "-again"})) == user + "-again"
        assert asked == [] and auth.counts["authorize"] == 2 and auth.counts["authorization_code"] == 2
        for subject, body in protected.subjects():
            assert body["params"]["arguments"]["text"].startswith(str(subject)), (subject, body)


async def test_a_grant_made_through_one_replica_serves_a_call_on_the_other(redis_url: str, tmp_path: Path) -> None:
    """Two gateways on one Redis (``state.store``; the token store defaults to it): alice
    authorises through A; her call on B needs no authorization."""
    prefix = f"gw:test:{secrets.token_hex(6)}"
    top = (f"gateway: {{cursor_secret: s}}\nstate: {{store: '{redis_url}', redis_prefix: '{prefix}'}}\n"
           f"oauth: {{encryption_key: '{KEY_B64}'}}\n")
    async with auth_world() as (auth, protected):
        config = gateway_config(protected, top)
        links: list[str] = []
        asked: list[str] = []
        async with running_gateway(config, base_dir=tmp_path) as a, running_gateway(config, base_dir=tmp_path) as b:
            store = a.gateway.oauth.port.store if a.gateway.oauth.port is not None else None
            assert isinstance(store, RedisTokenStore)
            try:
                async with caller(a.mcp_url, KEYS["alice"], elicitation_callback=browser("alice", a.url, links)) as s:
                    assert text(await s.call_tool("crm_echo", {"text": "on-a"})) == "on-a"
                async with session_of(b.mcp_url, KEYS["alice"], MODERN, never(asked)) as s:
                    assert text(await s.call_tool("crm_echo", {"text": "on-b"})) == "on-b"
                assert await store.get(GrantKey("crm", auth.url, "alice")) is not None
            finally:
                await store.client.delete(store.grants_key, store.registrations_key, store.check_key)
        assert len(links) == 1 and asked == [] and auth.counts["authorize"] == 1
        assert [subject for subject, _ in protected.subjects()] == ["alice", "alice"]
    assert not (tmp_path / "oauth-tokens.bin").exists()


async def test_a_canary_token_appears_in_no_log_audit_metric_health_status_error_or_store_byte(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Every access and refresh token the authorization server issues starts with a canary. With
    audit (SQLite), metrics and the status page on, after a call, a call answered 401 (refreshed
    and retried) and a call that fails (its grant revoked, the new authorization declined), the
    canary is nowhere the gateway writes or answers."""
    caplog.set_level(logging.DEBUG)
    canary = "canary" + secrets.token_hex(8)
    store_path = tmp_path / "tokens.bin"
    top = "telemetry: {metrics: true}\nstatus: {principals: [alice]}\n" + file_store(store_path)
    async with auth_world() as (auth, protected):
        auth.token_prefix = canary
        config = gateway_config(protected, top).replace(
            "audit: {enabled: false}", f"audit: {{store: 'sqlite:///{tmp_path}/audit.db', "
                                       f"spill_path: '{tmp_path}/spill.jsonl'}}")
        links: list[str] = []
        answers: list[str] = []
        errors: list[str] = []
        pages: list[str] = []
        async with running_gateway(config) as gw:
            gateway_url = gw.url

            async def once_then_decline(ctx: Any, params: Any) -> types.ElicitResult:
                if links:
                    return types.ElicitResult(action="decline")
                return await browser("alice", gateway_url, links)(ctx, params)

            async with caller(gw.mcp_url, KEYS["alice"], elicitation_callback=once_then_decline) as session:
                answers.append(text(await session.call_tool("crm_echo", {"text": "first"})))
                mine = [t for t, g in auth.tokens.items() if g.subject == "alice"]
                assert len(mine) == 1 and mine[0].startswith(canary)
                del auth.tokens[mine[0]]  # revoked: the upstream answers 401, the connector refreshes
                answers.append(text(await session.call_tool("crm_echo", {"text": "second"})))
                assert auth.counts["refresh_token"] == 1
                auth.tokens = {t: g for t, g in auth.tokens.items() if g.subject != "alice"}
                auth.refresh_tokens = {t: g for t, g in auth.refresh_tokens.items() if g.subject != "alice"}
                with pytest.raises(MCPError) as info:  # refresh refused, new authorization declined
                    await session.call_tool("crm_echo", {"text": "third"})
                errors.append(str(info.value))
            headers = {"Authorization": f"Bearer {KEYS['alice']}"}
            async with aiohttp.ClientSession(headers=headers) as http:
                for path in ("/metrics", "/readyz", "/readyz?strict=1", "/status", "/status?q=crm"):
                    async with http.get(gw.url + path) as resp:
                        assert resp.status == 200, (path, resp.status)
                        pages.append(await resp.text())
            health = repr(gw.connectors["crm"].health())
        assert answers == ["first", "second"] and "declined" in errors[0]
        assert any(s.status == 401 and s.subject is None and s.token for s in protected.seen)
        assert "crm_echo" in pages[0] and "crm" in pages[3]
        audit = (tmp_path / "audit.db").read_bytes()
        assert b"crm_echo" in audit  # the calls were audited
        written = files_written(tmp_path)
        assert store_path.name in written and "audit.db" in written
        seen_texts = [caplog.text, *(str(r.args) for r in caplog.records), *errors, *pages, health]
        assert all(canary not in t for t in seen_texts)
        assert all(canary.encode() not in b for b in written.values())
        assert sum(s.token is not None and s.token.startswith(canary) for s in protected.seen) >= 3  # it was in use
