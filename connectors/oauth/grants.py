"""Token-endpoint requests: the grants a connector uses, and how its client authenticates.

* :func:`client_credentials` (OAuth 2.1 §4.2, SEP-1046) with ``resource`` (RFC 8707);
* :func:`redeem_code`: the authorization code with its PKCE ``code_verifier`` and ``resource``;
* :func:`refresh`: a refresh token (a rotated one in the answer replaces it; one not rotated is
  kept);
* :func:`exchange`: RFC 8693 token exchange of the caller's JWT for an upstream token;
* :func:`authorization_request`: the authorization URL with PKCE S256, ``state`` and ``resource``.

Client authentication (:func:`client_auth`): ``client_secret_basic`` (RFC 6749 §2.3.1: id and
secret form-urlencoded, then Base64), ``client_secret_post``, ``private_key_jwt`` (RFC 7523: a JWT
signed with the configured key, ``iss`` = ``sub`` = client id, ``aud`` = the issuer), ``none``
(the ``client_id`` in the body).

A refused request raises :class:`TokenError` with the server's ``error`` code only (never its
description, which may echo what we sent).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

import jwt

from .discovery import Discovery
from .http import OAuthHTTP
from .port import Grant
from .registration import ClientIdentity

__all__ = ["TokenError", "client_auth", "parse_grant", "client_credentials", "redeem_code", "refresh", "exchange",
           "pkce_pair", "authorization_request"]

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"


class TokenError(Exception):
    """The token endpoint refused (``error``: its OAuth error code, e.g. ``invalid_grant``)."""

    def __init__(self, message: str, error: str | None = None) -> None:
        super().__init__(message)
        self.error = error


def client_auth(client: ClientIdentity, audience: str) -> tuple[dict[str, str], dict[str, str]]:
    """The headers and form fields that authenticate ``client`` at a token endpoint of the
    authorization server ``audience`` (its issuer)."""
    method = client.method
    if method == "client_secret_basic" and client.client_secret is not None:
        pair = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
        return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}, {}
    if method == "client_secret_post" and client.client_secret is not None:
        return {}, {"client_id": client.client_id, "client_secret": client.client_secret}
    if method == "private_key_jwt" and client.private_key is not None:
        now = int(time.time())
        claims = {"iss": client.client_id, "sub": client.client_id, "aud": audience, "iat": now, "exp": now + 300,
                  "jti": str(uuid.uuid4())}
        assertion = jwt.encode(claims, client.private_key, algorithm=client.signing_algorithm)
        return {}, {"client_id": client.client_id,
                    "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                    "client_assertion": assertion}
    return {}, {"client_id": client.client_id}


def parse_grant(body: Mapping[str, Any], resource: str | None, asked: tuple[str, ...],
                previous_refresh: str | None = None) -> Grant:
    token = body.get("access_token")
    if not isinstance(token, str) or not token:
        raise TokenError("the token endpoint answered without an access_token")
    expires_in = body.get("expires_in")
    expires_at = time.time() + float(expires_in) if isinstance(expires_in, (int, float)) and expires_in > 0 else None
    scope = body.get("scope")
    scopes = tuple(scope.split()) if isinstance(scope, str) and scope else asked
    rotated = body.get("refresh_token")
    return Grant(access_token=token, token_type=str(body.get("token_type") or "Bearer"), expires_at=expires_at,
                 refresh_token=rotated if isinstance(rotated, str) and rotated else previous_refresh,
                 scopes=scopes, resource=resource)


async def _token_request(http: OAuthHTTP, discovery: Discovery, client: ClientIdentity | None,
                         form: dict[str, str], scopes: tuple[str, ...], previous_refresh: str | None = None,
                         token_url: str | None = None) -> Grant:
    endpoint = token_url or discovery.endpoint("token_endpoint")
    if endpoint is None:
        raise TokenError(f"authorization server {discovery.issuer} has no token_endpoint")
    headers: dict[str, str] = {}
    if client is not None:
        headers, extra = client_auth(client, discovery.issuer)
        form = {**form, **extra}
    answer = await http.request("POST", endpoint, headers=headers, data=form)
    if not answer.ok or answer.body is None:
        code = answer.body.get("error") if answer.body else None
        code = code if isinstance(code, str) else None
        raise TokenError(f"the token endpoint refused the {form.get('grant_type')} grant (HTTP {answer.status}"
                         f"{', ' + code[:60] if code else ''})", code)
    return parse_grant(answer.body, discovery.resource, scopes, previous_refresh)


def _scope_field(scopes: tuple[str, ...]) -> dict[str, str]:
    return {"scope": " ".join(scopes)} if scopes else {}


async def client_credentials(http: OAuthHTTP, discovery: Discovery, client: ClientIdentity,
                             scopes: tuple[str, ...]) -> Grant:
    form = {"grant_type": "client_credentials", "resource": discovery.resource, **_scope_field(scopes)}
    return await _token_request(http, discovery, client, form, scopes)


async def redeem_code(http: OAuthHTTP, discovery: Discovery, client: ClientIdentity, code: str, verifier: str,
                      redirect_uri: str, scopes: tuple[str, ...]) -> Grant:
    form = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
            "redirect_uri": redirect_uri, "resource": discovery.resource}
    return await _token_request(http, discovery, client, form, scopes)


async def refresh(http: OAuthHTTP, discovery: Discovery, client: ClientIdentity, grant: Grant) -> Grant:
    assert grant.refresh_token is not None
    form = {"grant_type": "refresh_token", "refresh_token": grant.refresh_token, "resource": discovery.resource}
    return await _token_request(http, discovery, client, form, grant.scopes, grant.refresh_token)


async def exchange(http: OAuthHTTP, discovery: Discovery, client: ClientIdentity | None, subject_token: str,
                   subject_token_type: str, audience: str | None, scopes: tuple[str, ...],
                   token_url: str | None = None) -> Grant:
    form = {"grant_type": TOKEN_EXCHANGE, "subject_token": subject_token, "subject_token_type": subject_token_type,
            "requested_token_type": ACCESS_TOKEN_TYPE, "resource": discovery.resource, **_scope_field(scopes)}
    if audience:
        form["audience"] = audience
    return await _token_request(http, discovery, client, form, scopes, token_url=token_url)


def pkce_pair() -> tuple[str, str]:
    """A PKCE ``code_verifier`` and its S256 ``code_challenge``."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def authorization_request(discovery: Discovery, client: ClientIdentity, *, redirect_uri: str, state: str,
                          challenge: str, scopes: tuple[str, ...]) -> str:
    endpoint = discovery.endpoint("authorization_endpoint")
    if endpoint is None:
        raise TokenError(f"authorization server {discovery.issuer} has no authorization_endpoint")
    query = {"response_type": "code", "client_id": client.client_id, "redirect_uri": redirect_uri, "state": state,
             "code_challenge": challenge, "code_challenge_method": "S256", "resource": discovery.resource,
             **_scope_field(scopes)}
    return endpoint + ("&" if "?" in endpoint else "?") + urlencode(query)
