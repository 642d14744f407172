"""JWTs against a loopback JWKS server: accepted, refused (expired, audience, issuer, unsigned,
algorithm confusion), key rotation with a rate-limited refetch."""

from __future__ import annotations

import time

import aiohttp
import jwt
import pytest

from gateway.auth import Authenticator, Unauthenticated
from gateway.config import AuthConfig, JwtConfig
from tests.auth.idp import AUDIENCE, ISSUER, LoopbackIdp, loopback_idp, unsigned_token
from tests.filters.mcp_http import McpHttp
from tests.support import running_gateway


def _auth(idp: LoopbackIdp, **extra: object) -> Authenticator:
    cfg = JwtConfig(jwks_url=idp.url, issuer=ISSUER, audience=AUDIENCE, groups_claim="groups",
                    algorithms=("RS256",), leeway_s=0, **extra)  # type: ignore[arg-type]
    return Authenticator(AuthConfig(jwt=cfg))


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Host": "gw.test:8080"}


async def _refused(auth: Authenticator, token: str) -> Unauthenticated:
    with pytest.raises(Unauthenticated) as info:
        await auth.authenticate(_headers(token))
    return info.value


async def test_valid_token_maps_claims_to_principal() -> None:
    async with loopback_idp() as idp:
        principal = await _auth(idp).authenticate(_headers(idp.token()))
    assert principal.name == "alice" and principal.groups == {"ops"} and principal.kind == "jwt"


async def test_refusals() -> None:
    async with loopback_idp() as idp:
        auth = _auth(idp)
        past = int(time.time()) - 600
        cases = {
            "expired": idp.token(exp=past, iat=past - 60),
            "wrong audience": idp.token(aud="someone-else"),
            "wrong issuer": idp.token(iss="https://evil.test/"),
            "not allowed": unsigned_token(sub="alice", iss=ISSUER, aud=AUDIENCE, exp=int(time.time()) + 300),
            "missing": idp.token(exp=None),  # exp is required
        }
        for expect, token in cases.items():
            exc = await _refused(auth, token)
            assert exc.status == 401
            assert 'error="invalid_token"' in exc.www_authenticate
            assert expect in exc.www_authenticate, (expect, exc.www_authenticate)
            assert 'resource_metadata="http://gw.test:8080/.well-known/oauth-protected-resource"' \
                in exc.www_authenticate
        # Algorithm confusion: an HMAC token (as if keyed with public material) must not pass.
        forged = jwt.encode({"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": int(time.time()) + 60},
                            "public-key-material-used-as-hmac-secret", algorithm="HS256",
                            headers={"kid": "k1"})
        assert "not allowed" in (await _refused(auth, forged)).www_authenticate
        # A token signed by a key the IdP never published.
        idp.add_key("rogue", publish=False)
        assert "unknown signing key" in (await _refused(auth, idp.token(kid="rogue"))).www_authenticate


async def test_no_credentials_challenge_has_no_error_code() -> None:
    async with loopback_idp() as idp:
        with pytest.raises(Unauthenticated) as info:
            await _auth(idp).authenticate({"Host": "gw.test"})
    assert info.value.www_authenticate.startswith("Bearer ")
    assert "error=" not in info.value.www_authenticate


async def test_key_rotation_refetches_once_per_interval() -> None:
    async with loopback_idp() as idp:
        auth = _auth(idp, jwks_min_refresh_s=0)
        await auth.authenticate(_headers(idp.token()))
        assert idp.requests == 1
        idp.add_key("k2")  # rotation: the IdP publishes a new key and signs with it
        principal = await auth.authenticate(_headers(idp.token(kid="k2")))
        assert principal.name == "alice" and idp.requests == 2
        # With the refetch interval in force, unknown kids do not hammer the IdP.
        slow = _auth(idp, jwks_min_refresh_s=3600)
        await slow.authenticate(_headers(idp.token()))
        before = idp.requests
        idp.add_key("rogue", publish=False)
        for _ in range(5):
            await _refused(slow, idp.token(kid="rogue"))
        assert idp.requests == before


async def test_gateway_http_401_metadata_and_acceptance() -> None:
    async with loopback_idp() as idp:
        config = f"""
        gateway: {{http: {{json_response: true}}}}
        auth:
          jwt: {{jwks_url: "{idp.url}", issuer: "{ISSUER}", audience: {AUDIENCE}, groups_claim: groups}}
        audit: {{enabled: false}}
        """
        async with running_gateway(config) as gw, aiohttp.ClientSession() as http:
            resp = await http.post(gw.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert resp.status == 401
            challenge = resp.headers["WWW-Authenticate"]
            assert "resource_metadata=" in challenge
            assert not gw.gateway.sessions
            meta_url = challenge.split('resource_metadata="')[1].split('"')[0]
            async with http.get(meta_url) as meta:
                doc = await meta.json()
            assert doc["resource"] == gw.mcp_url
            assert doc["authorization_servers"] == [ISSUER]
            bad = McpHttp(http, gw.mcp_url, idp.token(aud="other"))
            resp = await bad.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
            assert resp.status == 401 and 'error="invalid_token"' in resp.headers["WWW-Authenticate"]
            client = await McpHttp(http, gw.mcp_url, idp.token()).initialize()
            assert "result" in await client.call("tools/list")
            (session,) = gw.gateway.sessions.values()
            assert session.principal.name == "alice"
