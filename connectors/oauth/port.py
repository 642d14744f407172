"""The seam between a connector that needs OAuth tokens and the gateway that keeps them.

A connector with an ``oauth:`` block (``type: mcp`` over HTTP, ``type: openapi``) obtains and uses
tokens itself (discovery, registration, grants: the other modules of :mod:`connectors.oauth`), but
it does not own where grants live or how a person authorises: the gateway does. This module is
the contract between the two, so each side is built and tested alone:

* :class:`TokenStore` keeps grants under :class:`GrantKey` (connector, issuer, principal; the
  principal is ``""`` for the service identity) and client registrations under (connector,
  issuer). The gateway's implementation is encrypted at rest, a file by default and the shared
  Redis store when several replicas run; :class:`MemoryTokenStore` is the in-process one (tests,
  and a connector started without a gateway).
* :class:`AuthorizationBroker` runs the user's part of the authorization-code flow. The connector
  builds the authorization URL (PKCE, ``state``, ``resource``) and a ``redeem`` coroutine (code →
  :class:`Grant`); :meth:`AuthorizationBroker.begin` registers them and returns the URL the
  person opens (the gateway's ``/oauth/start/{id}``, which redirects to the authorization URL);
  the gateway's ``/oauth/callback`` checks ``state`` and ``iss`` and calls ``redeem``, stores the
  grant and wakes :meth:`AuthorizationBroker.wait`.
* :class:`OAuthPort` bundles them; the gateway sets it on every connector with an ``oauth:`` block
  before ``start`` (``connector.oauth_port = port``), else :data:`LOCAL_OAUTH` is used.

Secrets in these values (tokens, client secrets, code verifiers) are never logged, audited or put
in errors; ``repr`` of :class:`Grant` hides them.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "GrantKey",
    "Grant",
    "TokenStore",
    "AuthorizationBroker",
    "OAuthPort",
    "MemoryTokenStore",
    "LocalAuthorizationBroker",
    "LOCAL_OAUTH",
    "new_state",
]


@dataclass(frozen=True, slots=True)
class GrantKey:
    """Where a grant belongs: the connector, the authorization server's ``issuer`` (exact string,
    never normalised) and the principal (``""`` for the service identity)."""

    connector: str
    issuer: str
    principal: str = ""


@dataclass(frozen=True, slots=True)
class Grant:
    """A token set from a token endpoint. ``expires_at`` is a ``time.time()`` instant (None: the
    server gave no lifetime); ``resource`` is the RFC 8707 resource the token was asked for (the
    token is only ever sent there)."""

    access_token: str = field(repr=False)
    token_type: str = "Bearer"
    expires_at: float | None = None
    refresh_token: str | None = field(default=None, repr=False)
    scopes: tuple[str, ...] = ()
    resource: str | None = None

    def expires_within(self, seconds: float, now: float | None = None) -> bool:
        """True when the token is expired or expires within ``seconds``."""
        if self.expires_at is None:
            return False
        return self.expires_at - (time.time() if now is None else now) <= seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "access_token": self.access_token,
            "token_type": self.token_type,
            "expires_at": self.expires_at,
            "refresh_token": self.refresh_token,
            "scopes": list(self.scopes),
            "resource": self.resource,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Grant:
        return cls(
            access_token=str(data["access_token"]),
            token_type=str(data.get("token_type") or "Bearer"),
            expires_at=None if data.get("expires_at") is None else float(data["expires_at"]),
            refresh_token=data.get("refresh_token"),
            scopes=tuple(data.get("scopes") or ()),
            resource=data.get("resource"),
        )


class TokenStore(Protocol):
    """Grants by key and client registrations by (connector, issuer). Implementations are safe for
    concurrent use by many tasks; a replica-shared one makes a grant made on one replica visible
    to all."""

    async def get(self, key: GrantKey) -> Grant | None: ...

    async def put(self, key: GrantKey, grant: Grant) -> None: ...

    async def delete(self, key: GrantKey) -> bool: ...

    async def keys(self) -> list[GrantKey]: ...

    async def get_registration(self, connector: str, issuer: str) -> dict[str, Any] | None: ...

    async def put_registration(self, connector: str, issuer: str, registration: dict[str, Any]) -> None: ...


class AuthorizationBroker(Protocol):
    """The person's part of an authorization-code grant."""

    def begin(
        self,
        *,
        key: GrantKey,
        authorization_url: str,
        state: str,
        expected_issuer: str | None,
        redeem: Callable[[str], Awaitable[Grant]],
        ttl_s: float = 600.0,
        iss_required: bool = False,
    ) -> str:
        """Register a pending authorization; return the URL to give the person (for a URL-mode
        elicitation). ``expected_issuer``: the issuer the authorization was sent to; an ``iss``
        in the callback must equal it exactly (RFC 9207, no normalisation), advertised or not.
        ``iss_required``: the server advertises ``authorization_response_iss_parameter_supported``,
        so a callback without ``iss`` is refused too."""
        ...

    async def wait(self, key: GrantKey, timeout: float) -> Grant | None:
        """The grant once the callback stored it, or None after ``timeout`` seconds."""
        ...


@dataclass(frozen=True, slots=True)
class OAuthPort:
    """What the gateway gives a connector with an ``oauth:`` block."""

    store: TokenStore
    broker: AuthorizationBroker
    # The gateway's Client ID Metadata Document URL (top-level ``oauth.client_metadata_url``), if any.
    client_metadata_url: str | None = None


class MemoryTokenStore:
    """An in-process :class:`TokenStore` (nothing survives a restart)."""

    def __init__(self) -> None:
        self._grants: dict[GrantKey, Grant] = {}
        self._registrations: dict[tuple[str, str], dict[str, Any]] = {}

    async def get(self, key: GrantKey) -> Grant | None:
        return self._grants.get(key)

    async def put(self, key: GrantKey, grant: Grant) -> None:
        self._grants[key] = grant

    async def delete(self, key: GrantKey) -> bool:
        return self._grants.pop(key, None) is not None

    async def keys(self) -> list[GrantKey]:
        return list(self._grants)

    async def get_registration(self, connector: str, issuer: str) -> dict[str, Any] | None:
        return self._registrations.get((connector, issuer))

    async def put_registration(self, connector: str, issuer: str, registration: dict[str, Any]) -> None:
        self._registrations[(connector, issuer)] = dict(registration)


class LocalAuthorizationBroker:
    """An in-process broker with no HTTP routes: :meth:`begin` returns the authorization URL itself
    and :meth:`complete` (called by whoever receives the redirect: a test, a CLI) redeems the code.
    The gateway's broker serves ``/oauth/start/{id}`` and ``/oauth/callback`` instead."""

    def __init__(self, store: TokenStore) -> None:
        self._store = store
        self._pending: dict[str, tuple[GrantKey, str | None, Callable[[str], Awaitable[Grant]], float, bool]] = {}
        self._done: dict[GrantKey, asyncio.Event] = {}

    def begin(
        self,
        *,
        key: GrantKey,
        authorization_url: str,
        state: str,
        expected_issuer: str | None,
        redeem: Callable[[str], Awaitable[Grant]],
        ttl_s: float = 600.0,
        iss_required: bool = False,
    ) -> str:
        self._pending[state] = (key, expected_issuer, redeem, time.monotonic() + ttl_s, iss_required)
        if key not in self._done or self._done[key].is_set():  # a new authorization: wait for its grant
            self._done[key] = asyncio.Event()
        return authorization_url

    async def complete(self, state: str, code: str, iss: str | None = None) -> Grant:
        """Redeem the code of the redirect that carried ``state``; ``ValueError`` for an unknown or
        expired ``state``, an ``iss`` that is not the expected issuer (exact match), or no ``iss``
        where it is required."""
        entry = self._pending.pop(state, None)
        if entry is None or entry[3] < time.monotonic():
            raise ValueError("unknown or expired state")
        key, expected_issuer, redeem, _, iss_required = entry
        if iss is None and iss_required:
            raise ValueError("the authorization response has no iss, which its server advertises")
        if expected_issuer is not None and iss is not None and iss != expected_issuer:
            raise ValueError("the authorization response's iss is not the expected issuer")
        grant = await redeem(code)
        await self._store.put(key, grant)
        self._done.setdefault(key, asyncio.Event()).set()
        return grant

    async def wait(self, key: GrantKey, timeout: float) -> Grant | None:
        event = self._done.setdefault(key, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            return None
        return await self._store.get(key)


def new_state() -> str:
    """An unguessable ``state`` / PKCE verifier seed (43+ URL-safe characters)."""
    return secrets.token_urlsafe(32)


def _local_port() -> OAuthPort:
    store = MemoryTokenStore()
    return OAuthPort(store=store, broker=LocalAuthorizationBroker(store))


# Used by a connector the gateway did not give a port (a connector started alone in a test).
LOCAL_OAUTH: OAuthPort = _local_port()
