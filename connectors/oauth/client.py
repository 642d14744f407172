"""One connector's OAuth client: discovery, registration, grants, refresh and step-up.

:class:`OAuthClient` keeps, per connector, the discovered authorization server (found again on
every 401: a resource may move to another issuer, SEP-2352), the client identity there
(:mod:`connectors.oauth.registration`) and the grants, per :class:`~connectors.oauth.port.GrantKey`
(connector, issuer, principal; ``""`` is the service identity), in memory over the port's
:class:`~connectors.oauth.port.TokenStore`.

* :meth:`OAuthClient.token` returns a usable grant: the cached one while it is fresh (a grant is
  renewed ``min(refresh_margin_s, 10 % of its lifetime)`` before it expires), else one renewal
  per key at a time (single-flight: concurrent callers wait for the same request): refresh (a
  rotated refresh token replaces the old one; ``invalid_grant`` drops the grant), else a new grant:
  ``client_credentials`` for the service identity when the client can authenticate and the server
  offers it, RFC 8693 exchange of the caller's JWT for ``identity: exchange``, else an
  authorization code a person completes: :class:`AuthorizationRequired` carries the URL from the
  port's broker (the connector sends it to the principal as a URL-mode elicitation, or, for the
  service identity, shows it to the operator) and the key to wait on.
* :meth:`OAuthClient.unauthorized` (a 401): discovery again; a token that was sent and refused is
  refreshed once, then dropped (the next :meth:`token` obtains a new one).
* :meth:`OAuthClient.insufficient_scope` (a 403 ``insufficient_scope``): the next grant asks for
  the union of the scopes asked so far, granted, and challenged; at most ``max_step_up`` times per
  (principal, challenged scopes), then :class:`UpstreamAuthError` naming the scope.
* The scope a 401 named is remembered per authorization server (this connector, that issuer) and
  asked for by every principal's first authorization there, not only by the principal that got
  the 401 (which would make everyone else's first authorization ask for nothing, then step up).
* An authorization round that ends without a grant (refused at the callback: a wrong or missing
  ``iss``; an error; nobody came) makes the next link for that key wait, doubling from
  :data:`LINK_BACKOFF_INITIAL_S` to :data:`LINK_BACKOFF_MAX_S`: meanwhile :meth:`token` raises
  :class:`UpstreamAuthError` saying when, instead of issuing (and logging) a link per reconnect.

Errors never carry a token, a secret or a code; the authorization URL is not a secret (it holds
a PKCE challenge and a ``state`` that only the broker can redeem).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from gateway.protocol.errors import BackendUnavailable

from . import grants
from .challenge import Challenge
from .config import OAuthConfig
from .discovery import Discovery, DiscoveryError, discover
from .http import OAuthHTTP, OAuthHTTPError
from .port import Grant, GrantKey, OAuthPort, new_state
from .registration import ClientIdentity, RegistrationError, client_for

__all__ = ["OAuthClient", "AuthorizationRequired", "UpstreamAuthError", "SERVICE", "LINK_BACKOFF_INITIAL_S",
           "LINK_BACKOFF_MAX_S"]

log = logging.getLogger("connectors.oauth")

SERVICE = ""  # the principal of the service identity (listings, shared sessions)
# The wait before a new authorization link after a round that ended without a grant, doubled per
# such round in a row: a refusing server (a wrong iss) must not get a link per reconnect attempt.
LINK_BACKOFF_INITIAL_S = 1.0
LINK_BACKOFF_MAX_S = 60.0


class UpstreamAuthError(BackendUnavailable):
    """Authorization with the upstream failed (refused discovery, registration or grant, a scope
    never granted). The message says why, never with a secret."""


class AuthorizationRequired(UpstreamAuthError):
    """A person must authorise at ``url`` before ``key`` has a grant."""

    def __init__(self, connector: str, key: GrantKey, url: str) -> None:
        who = "an operator" if key.principal == SERVICE else f"principal {key.principal}"
        super().__init__(f"upstream {connector} needs {who} to authorise the gateway at its authorization "
                         f"server {key.issuer}", {"connector": connector, "authorization": "required"})
        self.key = key
        self.url = url


class OAuthClient:
    def __init__(self, connector: str, server_url: str, cfg: OAuthConfig, http: OAuthHTTP,
                 port: Callable[[], OAuthPort], clock: Callable[[], float] = time.monotonic) -> None:
        """``port``: the connector's current :class:`OAuthPort` (read on use: the gateway sets it
        after construction); ``clock``: monotonic seconds, for the link backoff (tests inject one)."""
        self.connector = connector
        self.server_url = server_url
        self.cfg = cfg
        self.http = http
        self._port = port
        self._discovery: Discovery | None = None
        self._discovered_at = 0.0
        self._discovery_lock = asyncio.Lock()
        self._clients: dict[str, ClientIdentity] = {}  # by issuer
        self._grants: dict[GrantKey, tuple[Grant, float]] = {}  # grant, renew-after instant
        self._flights: dict[GrantKey, asyncio.Future[Grant]] = {}
        self._scopes: dict[str, tuple[str, ...]] = {}  # per principal: what to ask for next
        self._challenged: dict[str, tuple[str, ...]] = {}  # per issuer: the scope a 401 named
        self.clock = clock
        # per key: (rounds in a row that ended without a grant, when the last one did, no link before)
        self._link_failures: dict[GrantKey, tuple[int, float, float]] = {}
        self._step_ups: dict[tuple[str, tuple[str, ...]], int] = {}
        self._refused: dict[GrantKey, int] = {}
        self.token_requests = 0  # grants requested from token endpoints (for tests and benchmarks)

    # -- discovery ---------------------------------------------------------------------------
    @property
    def discovered(self) -> Discovery | None:
        return self._discovery

    async def discovery(self, challenge: Challenge | None = None, *, again: bool = False) -> Discovery:
        """The authorization server of the upstream (discovered once; ``again`` after a 401)."""
        if self._discovery is not None and not again:
            return self._discovery  # the per-request path: no lock
        started = time.monotonic()
        async with self._discovery_lock:
            if self._discovery is not None and (not again or self._discovered_at >= started):
                return self._discovery
            try:
                found = await discover(self.http, self.server_url, challenge or Challenge(),
                                       self.cfg.client.issuer if self.cfg.client is not None else None)
            except (DiscoveryError, OAuthHTTPError) as exc:
                raise UpstreamAuthError(f"upstream {self.connector}: {exc}") from None
            if self._discovery is not None and found.issuer != self._discovery.issuer:
                log.warning("upstream %s moved to authorization server %s", self.connector, found.issuer)
            self._discovery, self._discovered_at = found, time.monotonic()
            return found

    async def client(self, d: Discovery) -> ClientIdentity:
        known = self._clients.get(d.issuer)
        if known is None:
            port = self._port()
            try:
                known = await client_for(self.http, d, self.cfg, port.store, self.connector, port.client_metadata_url)
            except (RegistrationError, OAuthHTTPError) as exc:
                raise UpstreamAuthError(f"upstream {self.connector}: {exc}") from None
            self._clients[d.issuer] = known
        return known

    # -- grants ------------------------------------------------------------------------------
    def key(self, d: Discovery, principal: str) -> GrantKey:
        return GrantKey(self.connector, d.issuer, principal)

    async def cached(self, key: GrantKey) -> Grant | None:
        entry = self._grants.get(key)
        if entry is not None:
            return entry[0]
        grant = await self._port().store.get(key)
        if grant is not None:
            self._remember(key, grant)
        return grant

    def _remember(self, key: GrantKey, grant: Grant) -> None:
        renew = float("inf")
        if grant.expires_at is not None:
            lifetime = max(0.0, grant.expires_at - time.time())
            renew = grant.expires_at - min(self.cfg.refresh_margin_s, lifetime * 0.1)
        self._grants[key] = (grant, renew)
        self._link_failures.pop(key, None)

    async def _keep(self, key: GrantKey, grant: Grant) -> Grant:
        self._remember(key, grant)
        await self._port().store.put(key, grant)
        return grant

    async def forget(self, key: GrantKey) -> None:
        self._grants.pop(key, None)
        await self._port().store.delete(key)

    async def token(self, principal: str, subject_token: str | None = None) -> Grant:
        """A usable grant for ``principal`` (see the module doc); raises
        :class:`AuthorizationRequired` or :class:`UpstreamAuthError`."""
        d = await self.discovery()
        key = self.key(d, principal)
        entry = self._grants.get(key)
        if entry is not None and time.time() < entry[1]:
            return entry[0]
        flight = self._flights.get(key)
        if flight is None:
            flight = asyncio.ensure_future(self._renew(d, key, subject_token))
            self._flights[key] = flight
            flight.add_done_callback(lambda _f: self._flights.pop(key, None))
        return await asyncio.shield(flight)

    async def _renew(self, d: Discovery, key: GrantKey, subject_token: str | None) -> Grant:
        grant = await self.cached(key)
        entry = self._grants.get(key)
        if grant is not None and entry is not None and time.time() < entry[1]:
            return grant
        if grant is not None and grant.refresh_token:
            client = await self.client(d)
            try:
                self.token_requests += 1
                return await self._keep(key, await grants.refresh(self.http, d, client, grant))
            except grants.TokenError as exc:
                log.info("upstream %s: refresh refused (%s); a new grant is needed", self.connector, exc.error)
                await self.forget(key)
            except OAuthHTTPError as exc:
                raise UpstreamAuthError(f"upstream {self.connector}: {exc}") from None
        return await self._new_grant(d, key, subject_token)

    def scopes_for(self, d: Discovery, principal: str, challenge: Challenge | None = None) -> tuple[str, ...]:
        if principal in self._scopes:
            return self._scopes[principal]
        if self.cfg.scopes:
            return tuple(self.cfg.scopes)
        if challenge is not None and challenge.scope:
            return challenge.scope
        return self._challenged.get(d.issuer) or d.resource_scopes

    async def _new_grant(self, d: Discovery, key: GrantKey, subject_token: str | None) -> Grant:
        client = await self.client(d)
        scopes = self.scopes_for(d, key.principal)
        identity = self.cfg.identity
        try:
            if key.principal == SERVICE and client.confidential and d.supports_grant("client_credentials"):
                self.token_requests += 1
                return await self._keep(key, await grants.client_credentials(self.http, d, client, scopes))
            if identity == "exchange" and key.principal != SERVICE:
                if subject_token is None:
                    raise UpstreamAuthError(f"upstream {self.connector} exchanges the caller's token, and this call "
                                            "carries none")
                ex = self.cfg.exchange
                self.token_requests += 1
                grant = await grants.exchange(self.http, d, client if client.confidential else None, subject_token,
                                              ex.subject_token_type if ex else "urn:ietf:params:oauth:token-type:jwt",
                                              ex.audience if ex else None, scopes, ex.token_url if ex else None)
                # An exchanged token belongs to the caller's token: kept in memory only.
                self._remember(key, grant)
                return grant
        except grants.TokenError as exc:
            raise UpstreamAuthError(f"upstream {self.connector}: {exc}") from None
        except OAuthHTTPError as exc:
            raise UpstreamAuthError(f"upstream {self.connector}: {exc}") from None
        raise self._authorization(d, key, client, scopes)

    def _authorization(self, d: Discovery, key: GrantKey, client: ClientIdentity,
                       scopes: tuple[str, ...]) -> AuthorizationRequired:
        """Begin a new authorization of ``key``: every elicitation gets its own link and ``state``.
        A link is never handed out twice: the gateway's start links are single use, so a copy given
        to a second call after the person opened the first would only answer "already used". The
        calls waiting for ``key`` all wake on whichever authorization completes first (the broker
        wakes per key); the other links stay pending until they expire."""
        if not d.pkce_s256:
            raise UpstreamAuthError(f"upstream {self.connector}: authorization server {d.issuer} does not advertise "
                                    "PKCE S256 (code_challenge_methods_supported); the gateway refuses to authorise there")
        if not self.cfg.redirect_uri:
            raise UpstreamAuthError(f"upstream {self.connector} needs an authorization code grant, and its oauth block "
                                    "has no redirect_uri")
        _, _, not_before = self._link_failures.get(key, (0, 0.0, 0.0))
        wait = not_before - self.clock()
        if wait > 0:
            raise UpstreamAuthError(f"upstream {self.connector}: the last authorization at {d.issuer} ended without a "
                                    f"grant (refused at the gateway's callback, or not completed); a new authorization "
                                    f"link in {wait:.1f}s", {"connector": self.connector, "retry_after_s": round(wait, 1)})
        if "offline_access" in d.as_scopes and "offline_access" not in scopes and scopes:
            scopes = (*scopes, "offline_access")  # SEP-2207: ask for a refresh token where offered
        verifier, challenge = grants.pkce_pair()
        state = new_state()
        url = grants.authorization_request(d, client, redirect_uri=self.cfg.redirect_uri, state=state,
                                           challenge=challenge, scopes=scopes)
        redirect_uri = self.cfg.redirect_uri

        async def redeem(code: str) -> Grant:
            self.token_requests += 1
            grant = await grants.redeem_code(self.http, d, client, code, verifier, redirect_uri, scopes)
            self._remember(key, grant)
            return grant

        ttl = self.cfg.authorization_timeout_s * 2
        start = self._port().broker.begin(key=key, authorization_url=url, state=state, expected_issuer=d.issuer,
                                          redeem=redeem, ttl_s=ttl, iss_required=d.iss_supported)
        return AuthorizationRequired(self.connector, key, start)

    async def wait_authorized(self, key: GrantKey, timeout: float) -> Grant | None:
        """The grant of ``key`` once authorised, or None (refused, or not in ``timeout``): then the
        next link for ``key`` waits (see the module doc)."""
        started = self.clock()
        grant = await self._port().broker.wait(key, timeout)
        if grant is not None:
            self._remember(key, grant)
            return grant
        failures, failed_at, _ = self._link_failures.get(key, (0, float("-inf"), 0.0))
        if failed_at < started:  # one step per round, however many calls waited for it
            now = self.clock()
            delay = min(LINK_BACKOFF_MAX_S, LINK_BACKOFF_INITIAL_S * 2 ** failures)
            self._link_failures[key] = (failures + 1, now, now + delay)
        return None

    # -- challenges --------------------------------------------------------------------------
    async def unauthorized(self, principal: str, challenge: Challenge, sent: str | None) -> None:
        """A 401 answered a request that carried ``sent`` (None: no token). Afterwards
        :meth:`token` gives what to send next."""
        before = self._discovery
        d = await self.discovery(challenge, again=sent is not None or before is None)
        if challenge.scope and not self.cfg.scopes:
            self._challenged[d.issuer] = challenge.scope  # every principal's first authorization asks for it
            if principal not in self._scopes:
                self._scopes[principal] = challenge.scope
        if sent is None or (before is not None and before.issuer != d.issuer):
            return
        key = self.key(d, principal)
        grant = await self.cached(key)
        if grant is None or grant.access_token != sent:
            return  # already replaced by a concurrent request
        refused = self._refused.get(key, 0) + 1
        self._refused[key] = refused
        if refused > 3:
            self._refused[key] = 0
            raise UpstreamAuthError(f"upstream {self.connector} keeps refusing the tokens of its authorization server "
                                    f"{d.issuer} (HTTP 401 {challenge.error or ''})".rstrip())
        if grant.refresh_token and refused == 1:
            self._grants[key] = (grant, 0.0)  # stale: the next token() refreshes it
        else:
            await self.forget(key)

    def accepted(self, principal: str) -> None:
        """A request with ``principal``'s token succeeded."""
        d = self._discovery
        if d is not None:
            self._refused.pop(self.key(d, principal), None)

    async def insufficient_scope(self, principal: str, challenge: Challenge, sent: str | None) -> None:
        d = await self.discovery()
        key = self.key(d, principal)
        budget = (principal, challenge.scope)
        used = self._step_ups.get(budget, 0)
        named = " ".join(challenge.scope) or "(unnamed)"
        if used >= self.cfg.max_step_up:
            raise UpstreamAuthError(f"upstream {self.connector} requires scope {named!r}, which "
                                    f"{used} re-authorisation(s) did not grant (max_step_up)",
                                    {"connector": self.connector, "scope": named})
        self._step_ups[budget] = used + 1
        grant = await self.cached(key)
        union = list(self.scopes_for(d, principal))
        for scope in (*(grant.scopes if grant else ()), *challenge.scope):
            if scope not in union:
                union.append(scope)
        self._scopes[principal] = tuple(union)
        if grant is not None and (sent is None or grant.access_token == sent):
            self._grants.pop(key, None)
            await self._port().store.delete(key)

    async def aclose(self) -> None:
        await self.http.close()

