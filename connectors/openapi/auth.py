"""Credentials from config applied as the spec's ``securitySchemes`` ask.

:func:`choose` (pure) picks, for an operation's security requirements, the first alternative whose
every scheme can be satisfied by the configured credentials (matched by kind: ``apiKey`` ←
``api_key``, ``http bearer`` ← ``bearer``, ``http basic`` ← ``basic``, ``oauth2`` with a
``clientCredentials`` flow ← ``oauth2``; other OAuth2 flows and OpenID Connect take ``bearer`` as a
ready-made access token). :class:`Authenticator` applies it to a prepared request, fetching and
caching OAuth2 client-credentials tokens and refreshing them ``refresh_margin_s`` before expiry.

Secrets are only ever written into the outgoing request: never into errors, logs or results.
"""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from gateway.protocol.errors import ToolExecutionError

from .config import OpenAPIAuth
from .request import encode_component

if TYPE_CHECKING:
    import aiohttp

    from .request import PreparedRequest

__all__ = ["Applied", "choose", "Authenticator"]


@dataclass(frozen=True, slots=True)
class Applied:
    """One scheme to apply: ``kind`` is api_key | bearer | basic | oauth2."""

    scheme: str
    kind: str
    location: str = ""  # api_key: header | query | cookie
    param: str = ""  # api_key: the header/query/cookie name
    token_url: str | None = None
    scopes: tuple[str, ...] = ()


def _applicable(name: str, scheme: Any, auth: OpenAPIAuth, scopes: tuple[str, ...]) -> Applied | None:
    if not isinstance(scheme, dict):
        return None
    kind = scheme.get("type")
    if kind == "apiKey" and auth.api_key is not None:
        return Applied(name, "api_key", str(scheme.get("in", "header")), str(scheme.get("name", "")))
    if kind == "http":
        how = str(scheme.get("scheme", "")).lower()
        if how == "bearer" and auth.bearer is not None:
            return Applied(name, "bearer")
        if how == "basic" and auth.basic is not None:
            return Applied(name, "basic")
        return None
    if kind == "oauth2":
        flows = scheme.get("flows") or {}
        cc = flows.get("clientCredentials") if isinstance(flows, dict) else None
        if auth.oauth2 is not None and (cc is not None or auth.oauth2.token_url):
            url = auth.oauth2.token_url or (cc or {}).get("tokenUrl")
            return Applied(name, "oauth2", token_url=url, scopes=auth.oauth2.scopes or scopes)
        if auth.bearer is not None:
            return Applied(name, "bearer")
        return None
    if kind == "openIdConnect" and auth.bearer is not None:
        return Applied(name, "bearer")
    return None


def choose(requirements: tuple[dict[str, tuple[str, ...]], ...], schemes: dict[str, Any],
           auth: OpenAPIAuth) -> tuple[Applied, ...]:
    """The schemes to apply for these alternatives (empty: none needed or none satisfiable)."""
    for alternative in requirements:
        if not alternative:
            return ()  # security is optional for this operation
        chosen = []
        for name, scopes in alternative.items():
            applied = _applicable(name, schemes.get(name), auth, scopes)
            if applied is None:
                break
            chosen.append(applied)
        else:
            return tuple(chosen)
    return ()


class Authenticator:
    def __init__(self, auth: OpenAPIAuth, schemes: dict[str, Any]) -> None:
        self.auth = auth
        self.schemes = schemes
        self._tokens: dict[tuple[str, tuple[str, ...]], tuple[str, float]] = {}
        self._lock = asyncio.Lock()
        self.token_fetches = 0  # observable in tests: refreshes really happen

    async def apply(self, req: PreparedRequest, requirements: tuple[dict[str, tuple[str, ...]], ...],
                    http: aiohttp.ClientSession, wants_authorization: bool = False) -> None:
        chosen = choose(requirements, self.schemes, self.auth)
        if wants_authorization and not any(c.kind in ("bearer", "basic", "oauth2") for c in chosen):
            # The operation declares an Authorization header instead of a security requirement.
            fallback = {"scheme": "http", "type": "http"}
            for kind, have in (("bearer", self.auth.bearer), ("basic", self.auth.basic)):
                if have is not None:
                    chosen = (*chosen, _applicable("", {**fallback, "scheme": kind}, self.auth, ()))  # type: ignore[arg-type]
                    break
        for item in chosen:
            if item.kind == "api_key":
                secret = self.auth.api_key.get_secret_value()  # type: ignore[union-attr]
                if item.location == "query":
                    req.query.append((item.param, secret))
                    pair = f"{encode_component(item.param)}={encode_component(secret)}"
                    req.query_string = f"{req.query_string}&{pair}" if req.query_string else pair
                elif item.location == "cookie":
                    req.cookies[item.param] = secret
                else:
                    req.headers[item.param] = secret
            elif item.kind == "bearer":
                req.headers["Authorization"] = "Bearer " + self.auth.bearer.get_secret_value()  # type: ignore[union-attr]
            elif item.kind == "basic":
                basic = self.auth.basic
                raw = f"{basic.username}:{basic.password.get_secret_value()}".encode()  # type: ignore[union-attr]
                req.headers["Authorization"] = "Basic " + base64.b64encode(raw).decode()
            elif item.kind == "oauth2":
                req.headers["Authorization"] = "Bearer " + await self._token(item, http)

    async def _token(self, item: Applied, http: aiohttp.ClientSession) -> str:
        import aiohttp

        oauth = self.auth.oauth2
        assert oauth is not None
        if not item.token_url:
            raise ToolExecutionError("OAuth2 client credentials: no token_url in config or spec")
        key = (item.token_url, item.scopes)
        async with self._lock:
            cached = self._tokens.get(key)
            if cached and cached[1] - oauth.refresh_margin_s > time.monotonic():
                return cached[0]
            form = {"grant_type": "client_credentials"}
            if item.scopes:
                form["scope"] = " ".join(item.scopes)
            raw = f"{quote(oauth.client_id, safe='')}:{quote(oauth.client_secret.get_secret_value(), safe='')}"
            # client_secret_basic (RFC 6749 2.3.1: form-encoded id and secret).
            basic = {"Authorization": "Basic " + base64.b64encode(raw.encode()).decode()}
            try:
                # Never redirected: the client's secret goes to the token URL and nowhere else.
                async with http.post(item.token_url, data=form, headers=basic, allow_redirects=False,
                                     timeout=aiohttp.ClientTimeout(total=30)) as resp:
                    body = await resp.json(content_type=None) if resp.status == 200 else None
                    status = resp.status
            except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                raise ToolExecutionError(f"OAuth2 token request failed: {type(exc).__name__}") from None
            if not isinstance(body, dict) or not isinstance(body.get("access_token"), str):
                raise ToolExecutionError(f"OAuth2 token request failed with HTTP {status}", status=status)
            self.token_fetches += 1
            expires = float(body.get("expires_in") or 3600)
            token: str = body["access_token"]
            self._tokens[key] = (token, time.monotonic() + expires)
            return token
