"""The pure parts of the connector's OAuth: challenges, discovery URLs and resource matching,
client authentication, config errors."""

from __future__ import annotations

import base64
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from pydantic import ValidationError

from connectors.mcp.config import MCPConfig
from connectors.oauth.challenge import parse
from connectors.oauth.discovery import Discovery, metadata_candidates, prm_candidates, resource_matches
from connectors.oauth.grants import authorization_request, client_auth, parse_grant, pkce_pair
from connectors.oauth.registration import ClientIdentity, auth_method


def test_challenges() -> None:
    c = parse('Bearer error="insufficient_scope", scope="a b", resource_metadata="https://x/.well-known/r", '
              'error_description="say \\"no\\", twice"')
    assert (c.error, c.scope, c.resource_metadata) == ("insufficient_scope", ("a", "b"), "https://x/.well-known/r")
    assert c.error_description == 'say "no", twice'
    assert parse('Basic realm="r", Bearer scope=mcp:basic').scope == ("mcp:basic",)
    assert parse('Basic realm="r"').scope == () and parse(None).error is None
    assert parse("Bearer").resource_metadata is None


def test_discovery_urls_in_the_specs_order() -> None:
    assert prm_candidates("https://s.example/mcp/v1", parse(None)) == [
        "https://s.example/.well-known/oauth-protected-resource/mcp/v1",
        "https://s.example/.well-known/oauth-protected-resource"]
    assert prm_candidates("https://s.example/", parse('Bearer resource_metadata="https://s.example/m.json"'))[0] == \
        "https://s.example/m.json"
    assert metadata_candidates("https://as.example/tenant1") == [
        "https://as.example/.well-known/oauth-authorization-server/tenant1",
        "https://as.example/.well-known/openid-configuration/tenant1",
        "https://as.example/tenant1/.well-known/openid-configuration"]
    assert metadata_candidates("https://as.example") == [
        "https://as.example/.well-known/oauth-authorization-server",
        "https://as.example/.well-known/openid-configuration"]


@pytest.mark.parametrize("resource, ok", [
    ("https://s.example/mcp", True), ("https://s.example", True), ("https://S.example/mcp/", True),
    ("https://s.example/mc", False), ("https://evil.example/mcp", False), ("http://s.example/mcp", False),
    ("https://s.example:8443/mcp", False), ("https://s.example/mcp#x", False), ("/mcp", False)])
def test_a_resource_must_name_the_connectors_url(resource: str, ok: bool) -> None:
    assert resource_matches(resource, "https://s.example/mcp") is ok


def test_client_authentication_methods() -> None:
    basic = ClientIdentity("id:1", "client_secret_basic", "s&cret")
    headers, form = client_auth(basic, "https://as")
    assert form == {} and base64.b64decode(headers["Authorization"][6:]).decode() == "id%3A1:s%26cret"
    assert client_auth(ClientIdentity("id", "client_secret_post", "s"), "https://as") == (
        {}, {"client_id": "id", "client_secret": "s"})
    assert client_auth(ClientIdentity("id", "none"), "https://as") == ({}, {"client_id": "id"})
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    _, form = client_auth(ClientIdentity("id", "private_key_jwt", private_key=pem, signing_algorithm="ES256"),
                          "https://as")
    claims = jwt.decode(form["client_assertion"], key.public_key(), algorithms=["ES256"], audience="https://as")
    assert claims["iss"] == claims["sub"] == "id" and claims["exp"] > claims["iat"]
    assert auth_method(None, "s", ["client_secret_post"]) == "client_secret_post"
    assert auth_method(None, None, ["client_secret_basic"]) == "none"
    assert auth_method("client_secret_basic", "s", ["none"]) == "client_secret_basic"


def test_authorization_request_and_grants() -> None:
    d = Discovery("https://s.example/mcp", "https://as", {"authorization_endpoint": "https://as/authorize"})
    verifier, challenge = pkce_pair()
    url = authorization_request(d, ClientIdentity("id", "none"), redirect_uri="https://gw/cb", state="st",
                                challenge=challenge, scopes=("a", "b"))
    q = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    assert q == {"response_type": "code", "client_id": "id", "redirect_uri": "https://gw/cb", "state": "st",
                 "code_challenge": challenge, "code_challenge_method": "S256", "resource": "https://s.example/mcp",
                 "scope": "a b"}
    assert len(verifier) >= 43
    grant = parse_grant({"access_token": "canary-token-1", "expires_in": 60}, "https://s.example/mcp", ("a",), "old-refresh")
    assert grant.refresh_token == "old-refresh" and grant.scopes == ("a",) and "canary-token-1" not in repr(grant)
    rotated = parse_grant({"access_token": "t", "refresh_token": "new", "scope": "x y"}, None, (), "old")
    assert rotated.refresh_token == "new" and rotated.scopes == ("x", "y") and rotated.expires_at is None


@pytest.mark.parametrize("entry, message", [
    ({"transport": "stdio", "command": "x", "oauth": {}}, "oauth is for the sse and streamable_http"),
    ({"headers": {"Authorization": "Bearer x"}, "oauth": {}}, "both set the upstream's credentials"),
    ({"oauth": {"identity": "user"}}, "needs redirect_uri"),
    ({"oauth": {"client": {"client_id": "c", "auth_method": "client_secret_post"}}}, "needs client_secret"),
    ({"transport": "stdio", "command": "x", "credentials": {"per_principal": {"a": "k"}}}, "credentials is for"),
])
def test_config_errors(entry: dict[str, object], message: str) -> None:
    base = {"name": "up", "type": "mcp", "transport": "streamable_http", "url": "https://s.example/mcp"}
    with pytest.raises(ValidationError) as info:
        MCPConfig.model_validate({**base, **entry})
    assert message in str(info.value)
    errors = info.value.errors()
    assert any(e["loc"][:1] in (("oauth",), ("credentials",)) for e in errors), errors
