"""The gateway's OAuth routes over real HTTP on loopback: ``/oauth/start/{id}`` → a tiny
authorization endpoint → ``/oauth/callback`` (state, then iss by exact comparison, then the
connector's ``redeem``), and the Client ID Metadata Document. Every refusal is a 400-class page and
leaves nothing stored; a failed authorization wakes the call waiting for it."""

from __future__ import annotations

import asyncio
import base64
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from aiohttp import web

import gateway.oauth.service as service_module
from connectors.oauth.port import LOCAL_OAUTH, Grant, GrantKey, MemoryTokenStore, OAuthPort, new_state
from gateway.oauth.broker import GatewayBroker
from gateway.oauth.routes import add_routes
from gateway.protocol.errors import ConfigError, RateLimited
from tests.support import running_gateway, serving

KEY_B64 = base64.b64encode(secrets.token_bytes(32)).decode()


@dataclass
class AuthServer:
    """An authorization endpoint that approves at once (``/authorize`` → 302 to the redirect URI
    with ``code``, ``state`` and ``iss`` as told) and a token endpoint (``/token``)."""

    url: str = ""
    send_iss: str | None = None  # what the redirect carries as iss (None: no iss)
    error: str | None = None  # answer an error response instead of a code
    refuse_codes: bool = False  # the token endpoint answers invalid_grant
    redeemed: list[str] = field(default_factory=list)
    tokens: dict[str, str] = field(default_factory=dict)

    def app(self) -> web.Application:
        async def authorize(request: web.Request) -> web.Response:
            q = request.query
            params = {"state": q["state"]}
            if self.error:
                params.update(error=self.error, error_description="<script>alert(1)</script> said no")
            else:
                code = secrets.token_urlsafe(16)
                self.tokens[code] = "tok-" + secrets.token_hex(8)
                params["code"] = code
            if self.send_iss is not None:
                params["iss"] = self.send_iss
            raise web.HTTPFound(q["redirect_uri"] + "?" + urlencode(params))

        async def token(request: web.Request) -> web.Response:
            form = await request.post()
            code = str(form["code"])
            if code not in self.tokens or self.refuse_codes:
                return web.json_response({"error": "invalid_grant"}, status=400)
            self.redeemed.append(code)
            return web.json_response({"access_token": self.tokens.pop(code), "token_type": "Bearer",
                                      "expires_in": 3600, "scope": "read"})

        app = web.Application()
        app.router.add_get("/authorize", authorize)
        app.router.add_post("/token", token)
        return app

    def begin(self, broker: GatewayBroker, key: GrantKey, callback: str, expected_issuer: str | None = None,
              ttl_s: float = 600.0, iss_required: bool | None = None) -> str:
        """What a connector does: an authorization URL and a redeem coroutine, handed to the broker."""
        state = new_state()

        async def redeem(code: str) -> Grant:
            async with aiohttp.ClientSession() as http, http.post(self.url + "/token", data={"code": code}) as resp:
                body = await resp.json()
                if resp.status != 200:
                    raise RuntimeError(f"token endpoint answered {body['error']}")
                return Grant(access_token=body["access_token"], expires_at=time.time() + body["expires_in"],
                             scopes=tuple(body["scope"].split()))

        url = self.url + "/authorize?" + urlencode({"state": state, "redirect_uri": callback,
                                                    "response_type": "code", "client_id": "gw"})
        return broker.begin(key=key, authorization_url=url, state=state, expected_issuer=expected_issuer,
                            redeem=redeem, ttl_s=ttl_s, iss_required=iss_required)


@dataclass
class Rig:
    auth: AuthServer
    broker: GatewayBroker
    store: MemoryTokenStore
    url: str

    def begin(self, key: GrantKey, **kw: Any) -> str:
        return self.auth.begin(self.broker, key, self.url + "/oauth/callback", **kw)


@asynccontextmanager
async def rig(user_header: str | None = None) -> AsyncIterator[Rig]:
    """The gateway's routes on one loopback port, the authorization server on another."""
    auth = AuthServer()
    store = MemoryTokenStore()
    host = SimpleNamespace(broker=None, public_url="", metadata=lambda: None, metadata_path=lambda: None)
    app = web.Application()
    add_routes(app, host)  # type: ignore[arg-type]
    async with serving(auth.app()) as auth_url, serving(app) as url:
        auth.url = auth_url
        broker = GatewayBroker(store, url, user_header=user_header)
        host.broker = broker
        try:
            yield Rig(auth, broker, store, url)
        finally:
            await broker.close()


async def _follow(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, aiohttp.ClientResponse]:
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as resp:
        return resp.status, await resp.text(), resp


async def test_a_person_authorizes_and_the_waiting_call_gets_the_grant() -> None:
    async with rig() as r:
        r.auth.send_iss = r.auth.url
        key = GrantKey("crm", r.auth.url, "alice")
        link = r.begin(key, expected_issuer=r.auth.url, iss_required=True)
        assert link.startswith(r.url + "/oauth/start/") and len(link.rsplit(".", 1)[1]) >= 43
        waiting = asyncio.create_task(r.broker.wait(key, 30))
        status, text, resp = await _follow(link)
        assert status == 200 and "crm is authorized" in text
        assert resp.headers["Cache-Control"] == "no-store" and resp.headers["Referrer-Policy"] == "no-referrer"
        assert resp.history[0].status == 302 and resp.history[0].headers["Location"].startswith(r.auth.url)
        async with asyncio.timeout(10):
            grant = await waiting
        assert grant is not None and grant.scopes == ("read",)
        stored = await r.store.get(key)
        assert stored == grant and grant.access_token not in text
        assert len(r.auth.redeemed) == 1
        # The link is single use.
        status, text, _ = await _follow(link)
        assert status == 400 and "already used or has expired" in text


@pytest.mark.parametrize(("advertised", "sent", "ok"), [
    (True, "{as}", True),
    (False, None, True),  # not advertised, not sent: proceed (RFC 9207 table, last row)
    (False, "{as}", True),  # not advertised, sent: compared, equal
    (True, None, False),  # advertised, absent: reject
    (True, "{as}/", False),  # a trailing slash is another issuer: no normalisation
    (True, "{AS}", False),  # nor case folding of the scheme and host
    (False, "https://evil.example", False),  # not advertised, sent and different: reject
    (False, "{as}:80", False),  # nor default-port or other rewriting
])
async def test_iss_is_compared_exactly_before_the_code_is_redeemed(advertised: bool, sent: str | None,
                                                                   ok: bool) -> None:
    async with rig() as r:
        issuer = r.auth.url
        r.auth.send_iss = None if sent is None else sent.format(**{"as": issuer, "AS": issuer.upper()})
        key = GrantKey("crm", issuer, "alice")
        link = r.begin(key, expected_issuer=issuer, iss_required=advertised)
        waiting = asyncio.create_task(r.broker.wait(key, 30))
        status, text, _ = await _follow(link)
        async with asyncio.timeout(10):  # a refusal wakes the waiting call at once, with no grant
            grant = await waiting
        if ok:
            assert status == 200 and grant is not None
        else:
            assert status == 400 and "did not come from the authorization server" in text
            assert grant is None and await r.store.get(key) is None and r.auth.redeemed == []


async def test_a_caller_that_does_not_say_gets_iss_required_with_an_expected_issuer() -> None:
    """The port as first written: an ``expected_issuer`` meant "advertised" (no ``iss_required``)."""
    async with rig() as r:
        key = GrantKey("crm", r.auth.url, "alice")
        status, _, _ = await _follow(r.begin(key, expected_issuer=r.auth.url))
        assert status == 400
        status, _, _ = await _follow(r.begin(key))
        assert status == 200


async def test_an_error_response_is_shown_escaped_but_only_from_the_right_issuer() -> None:
    async with rig() as r:
        r.auth.error = "access_denied"
        r.auth.send_iss = r.auth.url
        key = GrantKey("crm", r.auth.url, "alice")
        status, text, _ = await _follow(r.begin(key, expected_issuer=r.auth.url, iss_required=True))
        assert status == 400 and "access_denied" in text and "said no" in text
        assert "<script>" not in text and "&lt;script&gt;" in text
        # With a wrong iss nothing of the error response is shown (RFC 9207 / the MCP spec).
        r.auth.send_iss = "https://evil.example"
        status, text, _ = await _follow(r.begin(key, expected_issuer=r.auth.url, iss_required=False))
        assert status == 400 and "said no" not in text and "access_denied" not in text
        assert await r.store.get(key) is None


async def test_forged_unknown_expired_and_repeated_callbacks_store_nothing() -> None:
    async with rig() as r:
        key = GrantKey("crm", r.auth.url, "alice")
        r.begin(key)  # pending, never opened
        cases = {
            "": "has no state",
            "?code=x&state=" + new_state(): "unknown or has expired",
            "?code=x&state=a&state=b": "repeats state",
            "?code=x&iss=a&iss=b&state=a": "repeats iss",
        }
        for query, what in cases.items():
            status, text, _ = await _follow(r.url + "/oauth/callback" + query)
            assert status == 400 and what in text and "Nothing was stored" in text, (query, text)
        # An expired link and a made-up one.
        expired = r.begin(GrantKey("crm", r.auth.url, "bob"), ttl_s=0.0)
        for link in (expired, r.url + "/oauth/start/" + r.broker.replica + "." + new_state(),
                     r.url + "/oauth/start/nonsense"):
            status, text, _ = await _follow(link)
            assert status == 400 and "already used or has expired" in text
        assert await r.store.keys() == [] and r.auth.redeemed == []


async def test_a_code_the_token_endpoint_refuses_stores_nothing() -> None:
    async with rig() as r:
        r.auth.refuse_codes = True
        key = GrantKey("crm", r.auth.url, "alice")
        waiting = asyncio.create_task(r.broker.wait(key, 30))
        status, text, _ = await _follow(r.begin(key))
        assert status == 400 and "could not be redeemed" in text and "invalid_grant" in text
        async with asyncio.timeout(10):
            assert await waiting is None
        assert await r.store.get(key) is None


async def test_the_user_header_binds_a_start_link_to_its_principal() -> None:
    async with rig(user_header="X-Forwarded-User") as r:
        key = GrantKey("crm", r.auth.url, "alice")
        link = r.begin(key)
        status, text, _ = await _follow(link, {"X-Forwarded-User": "mallory"})
        assert status == 403 and "made for another user" in text
        status, text, _ = await _follow(link)  # no header: not alice either
        assert status == 403
        status, text, _ = await _follow(link, {"X-Forwarded-User": "alice"})
        assert status == 200 and await r.store.get(key) is not None


async def test_pending_authorizations_are_bounded() -> None:
    broker = GatewayBroker(MemoryTokenStore(), "http://gw", max_pending=2)

    async def redeem(code: str) -> Grant:
        raise AssertionError("never redeemed")

    for i in range(2):
        broker.begin(key=GrantKey("c", "i", f"p{i}"), authorization_url="http://as/a", state=f"s{i}",
                     expected_issuer=None, redeem=redeem)
    with pytest.raises(RateLimited) as info:
        broker.begin(key=GrantKey("c", "i", "p9"), authorization_url="http://as/a", state="s9",
                     expected_issuer=None, redeem=redeem)
    assert "oauth.max_pending = 2" in str(info.value)
    with pytest.raises(ValueError):
        broker.begin(key=GrantKey("c", "i", "p0"), authorization_url="http://as/a", state="s0",
                     expected_issuer=None, redeem=redeem)
    assert await broker.wait(GrantKey("c", "i", "p0"), 0.01) is None  # bounded: None after the timeout
    await broker.close()


def _oauth_config(tmp_path: Path, key: str | None = KEY_B64) -> str:
    key_line = f"  encryption_key: '{key}'\n" if key else ""
    return ("connectors:\n  - {name: team, type: static, prompts: [{name: p, messages: [{role: user, text: hi}]}]}\n"
            "oauth:\n" + key_line + f"  token_store: 'file:{tmp_path}/tokens.bin'\n"
            "  client_metadata_url: 'http://127.0.0.1/oauth/client.json'\n  client_name: Ops Gateway\n")


async def test_the_gateway_serves_its_client_metadata_and_gives_connectors_the_port(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No connector kind of this branch has an `oauth:` block yet: say that one does.
    monkeypatch.setattr(service_module, "wants_port", lambda connector: True)
    async with running_gateway(_oauth_config(tmp_path)) as gw:
        port = gw.gateway.oauth.port
        assert port is not None and gw.connectors["team"].oauth_port is port
        assert port.client_metadata_url == "http://127.0.0.1/oauth/client.json"
        async with aiohttp.ClientSession() as http:
            async with http.get(gw.url + "/oauth/client.json") as resp:
                assert resp.status == 200
                doc = await resp.json()
            async with http.get(gw.url + "/oauth/start/nonsense") as resp:
                assert resp.status == 400
        assert doc["client_id"] == "http://127.0.0.1/oauth/client.json" and doc["client_name"] == "Ops Gateway"
        assert doc["token_endpoint_auth_method"] == "none" and doc["application_type"] == "web"
        assert doc["grant_types"] == ["authorization_code", "refresh_token"] and doc["response_types"] == ["code"]
        assert doc["redirect_uris"] == [gw.gateway.oauth.public_url + "/oauth/callback"]
        # The whole flow through the running gateway's own routes.
        auth = AuthServer()
        async with serving(auth.app()) as auth.url:
            broker = gw.gateway.oauth.broker
            assert broker is not None
            key = GrantKey("team", auth.url, "alice")
            link = auth.begin(broker, key, gw.url + "/oauth/callback")
            assert link.startswith(gw.url + "/oauth/start/")  # the port bound, not the config's 8080
            status, text, _ = await _follow(link)
            assert status == 200 and (await port.store.get(key)) is not None
    assert (tmp_path / "tokens.bin").exists()


async def test_without_a_key_a_gateway_using_oauth_does_not_start(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service_module, "wants_port", lambda connector: True)
    monkeypatch.delenv("MCP_GATEWAY_OAUTH_KEY", raising=False)
    with pytest.raises(ConfigError) as info:
        async with running_gateway(_oauth_config(tmp_path, key=None)):
            pass
    assert "oauth.encryption_key" in str(info.value) and "MCP_GATEWAY_OAUTH_KEY" in str(info.value)


async def test_a_gateway_without_oauth_connectors_opens_no_store(tmp_path: Path) -> None:
    async with running_gateway(_oauth_config(tmp_path, key=None)) as gw:  # no key needed
        assert gw.gateway.oauth.port is None
        assert getattr(gw.connectors["team"], "oauth_port", None) in (None, LOCAL_OAUTH)
        status, _, _ = await _follow(gw.url + "/oauth/callback?state=x&code=y")
        assert status == 400
    assert not (tmp_path / "tokens.bin").exists()


def test_the_gateway_gives_its_port_only_to_oauth_connectors_without_one() -> None:
    from gateway.oauth.service import wants_port

    other = OAuthPort(MemoryTokenStore(), GatewayBroker(MemoryTokenStore(), "http://gw"))
    with_block = SimpleNamespace(oauth=SimpleNamespace(identity="user"))
    assert wants_port(SimpleNamespace(config=with_block))  # a connector class without the attribute
    assert wants_port(SimpleNamespace(config=with_block, oauth_port=LOCAL_OAUTH))
    assert not wants_port(SimpleNamespace(config=with_block, oauth_port=other))  # a test's or an embedder's
    assert not wants_port(SimpleNamespace(config=SimpleNamespace(oauth=None)))
    assert not wants_port(SimpleNamespace(config=SimpleNamespace()))
