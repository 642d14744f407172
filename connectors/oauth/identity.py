"""Whose credentials a connector's upstream requests carry (its ``oauth`` and ``credentials``
blocks), and how a missing authorization is obtained: shared by the MCP and OpenAPI connectors.

* Listings and the shared upstream session use the **service** identity (:meth:`UpstreamIdentity.
  service_auth`): without an ``oauth`` block, no credential but the static ``headers``.
* ``identity: user`` and ``identity: exchange`` and ``credentials.per_principal`` make calls
  per principal (:attr:`UpstreamIdentity.per_principal`): each principal's calls go through its
  own credential (:meth:`UpstreamIdentity.auth_for`), never another's (the MCP connector: one
  upstream session or request channel per principal).
  ``exchange`` trades the caller's validated JWT (its ``Authorization``) for an upstream token;
  the caller's own token never goes upstream.
* :meth:`UpstreamIdentity.authorize` answers :class:`~connectors.oauth.client.AuthorizationRequired`:
  a principal is sent the authorization URL as a URL-mode elicitation (``elicitation/create`` with
  ``mode: url``; the gateway turns it into a 2026-07-28 input request for such a caller) and the
  call waits for the broker's callback (``authorization_timeout_s`` or the call's deadline); the
  service identity waits for an operator (the URL is logged and in the connector's health).
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import TYPE_CHECKING

from connectors.egress import EgressPolicy
from gateway.protocol.errors import ProtocolError

from .client import SERVICE, AuthorizationRequired, OAuthClient, UpstreamAuthError
from .config import CredentialsConfig, OAuthConfig
from .http import OAuthHTTP
from .port import OAuthPort
from .requestauth import BearerAuth, RequestAuth, StaticAuth

if TYPE_CHECKING:
    from collections.abc import Callable

    from gateway.context import CallContext

__all__ = ["UpstreamIdentity"]

log = logging.getLogger("connectors.oauth")


class UpstreamIdentity:
    def __init__(self, name: str, url: str | None, oauth: OAuthConfig | None, credentials: CredentialsConfig | None,
                 policy: EgressPolicy, port: Callable[[], OAuthPort]) -> None:
        """``url``: the upstream (the resource its tokens are for)."""
        self.name = name
        self.oauth = oauth
        self.credentials = credentials
        self.client: OAuthClient | None = None
        # identity exchange: one auth per principal, whose subject token follows the caller's JWT
        self._auths: dict[str, BearerAuth] = {}
        if oauth is not None and url is not None:
            self.client = OAuthClient(name, url, oauth, OAuthHTTP(policy), port)

    @property
    def max_authorizations(self) -> int:
        """Authorizations one call may wait for (the first, and each step-up)."""
        return self.oauth.max_step_up + 1 if self.oauth is not None else 0

    @property
    def per_principal(self) -> bool:
        oauth = self.oauth
        return self.credentials is not None or (oauth is not None and oauth.identity != "service")

    def service_auth(self) -> RequestAuth | None:
        if self.client is not None:
            return BearerAuth(self.client, SERVICE)
        credentials = self.credentials
        value = credentials.value_for(None) if credentials is not None else None
        return StaticAuth(value, credentials.header) if credentials is not None and value is not None else None

    def session_key(self, ctx: CallContext) -> str:
        return f"principal:{ctx.principal.name}"

    def auth_for(self, ctx: CallContext) -> RequestAuth:
        """The credential of the caller of ``ctx`` (raises when it has none to give)."""
        principal = ctx.principal.name
        credentials = self.credentials
        if credentials is not None:
            value = credentials.value_for(principal)
            if value is None:
                raise UpstreamAuthError(f"upstream {self.name} takes personal credentials, and principal {principal} "
                                        "has none configured (credentials.per_principal)", {"connector": self.name})
            return StaticAuth(value, credentials.header)
        assert self.client is not None and self.oauth is not None
        if self.oauth.identity == "exchange":
            caller = ctx.caller_authorization or ""
            scheme, _, token = caller.partition(" ")
            if ctx.principal.kind != "jwt" or scheme.lower() != "bearer" or not token:
                raise UpstreamAuthError(f"upstream {self.name} exchanges the caller's JWT for its own token, and this "
                                        "call was not made with a JWT", {"connector": self.name})
            auth = self._auths.get(principal)
            if auth is None:
                auth = self._auths[principal] = BearerAuth(self.client, principal, token.strip())
            auth.subject_token = token.strip()  # the caller's current JWT, for the next exchange
            return auth
        return BearerAuth(self.client, principal)

    async def authorize(self, exc: AuthorizationRequired, ctx: CallContext | None) -> None:
        """Have ``exc.key`` authorised (see the module doc); raises when it was not in time."""
        client = self.client
        assert client is not None and self.oauth is not None
        wait = self.oauth.authorization_timeout_s
        remaining = ctx.remaining() if ctx is not None else None
        if remaining is not None:
            wait = min(wait, remaining)
        if exc.key.principal == SERVICE or ctx is None:
            log.warning("upstream %s: an operator must authorise the gateway: open %s", self.name, exc.url)
        else:
            params = {"mode": "url", "url": exc.url, "elicitationId": secrets.token_urlsafe(16),
                      "message": f"The upstream {self.name} needs you to authorise the gateway at "
                                 f"{exc.key.issuer} to act for you."}
            try:
                answer = await ctx.session.request("elicitation/create", params, related_request_id=ctx.request_id,
                                                   timeout=wait)
            except ProtocolError as err:
                raise UpstreamAuthError(f"upstream {self.name} needs authorisation, and the caller could not be "
                                        f"asked: {err.message}", {"connector": self.name}) from None
            if answer.get("action") not in (None, "accept"):
                raise UpstreamAuthError(f"upstream {self.name}: authorisation {answer.get('action')}d by the caller",
                                        {"connector": self.name})
        started = time.monotonic()
        if await client.wait_authorized(exc.key, wait) is None:
            if time.monotonic() - started < wait:  # woken early: the round failed (the broker logs why)
                raise UpstreamAuthError(f"upstream {self.name}: the authorisation at {exc.key.issuer} ended without a "
                                        "grant (refused at the gateway's callback)", {"connector": self.name})
            raise UpstreamAuthError(f"upstream {self.name}: no authorisation arrived within {wait:g}s",
                                    {"connector": self.name})

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()

