"""Which upstream session serves a call of the MCP connector, besides the shared one.

:class:`SessionPool` keeps the connector's other upstream sessions, by key:

* ``per_client`` (legacy upstreams): one session per downstream session (key: its id), opened on
  its first call with that client's capabilities and bound to it (an upstream request with no
  call in flight goes to the bound client), closed in :meth:`SessionPool.closed`;
* a dual-era upstream (a 2026-07-28 channel, ``protocol: auto``, that also accepts ``initialize``:
  found on the first legacy caller's call, :meth:`SessionPool._open_own_era`) serves each caller in its own era: a 2026-07-28 caller
  over the stateless shared channel, a legacy caller over an upstream *session*, so a tool that
  asks mid-call (``ctx.elicit``, ``create_message``, ``list_roots``) keeps its back-channel. With
  ``session: shared`` every legacy caller shares one such session (key :data:`LEGACY_SHARED`,
  opened on the first legacy call), with ``per_client`` each downstream session gets its own
  (key: its id, as for a legacy upstream). Over stdio a session is a connection, and a connection
  is a process: the legacy session is a second process of the upstream command (with ``shared``,
  a second source of listings and resource updates: :mod:`connectors.mcp.era_process`);
* upstream identity (``identity: user|exchange`` or ``credentials.per_principal``,
  :mod:`connectors.oauth.identity`): one session per principal (key ``principal:<name>``)
  carrying that principal's credential; for a 2026-07-28 upstream a request channel adopting the
  shared one's era (:func:`~connectors.mcp.identity.adopt_channel`), and besides it, for a legacy
  caller of a dual-era upstream, a legacy session (key ``legacy-principal:<name>``). At most
  :data:`MAX_PRINCIPAL_SESSIONS` are kept: past that the least recently used one is closed.

Opening is single-flight per key (a lock): concurrent first calls share one session. The pool
never decides about the shared session (the connector's reconnect loop does); a session it holds
that is lost is dropped (:meth:`SessionPool.lost`) and opened again on the next call.
:class:`~connectors.oauth.client.AuthorizationRequired` from opening a principal's session goes
to the caller, which asks for the authorization and retries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp

from connectors.egress import EgressPolicy
from connectors.oauth.identity import UpstreamIdentity
from gateway.protocol.errors import BackendUnavailable, ProtocolError
from gateway.protocol.versions import is_modern

from .client import SessionHandler, TransportFactory, UpstreamSession, opening_error
from .config import MCPConfig
from .factory import transport_factory
from .identity import adopt_channel
from .transport import HTTPStatusError

log = logging.getLogger("connectors.mcp")

if TYPE_CHECKING:
    from gateway.context import CallContext, SessionHandle

__all__ = ["SessionPool", "SHARED_CLIENT_CAPS", "CLIENT_INFO", "MAX_PRINCIPAL_SESSIONS", "LEGACY_SHARED",
           "legacy_caller"]

SHARED_CLIENT_CAPS: dict[str, Any] = {"sampling": {}, "elicitation": {"form": {}, "url": {}},
                                       "roots": {"listChanged": True}}
CLIENT_INFO: dict[str, Any] = {"name": "mcp-gateway", "version": "0.1.0"}
# Per-principal upstream sessions kept open (identity user/exchange, per-principal credentials).
MAX_PRINCIPAL_SESSIONS = 1000
# The key of the one upstream session the legacy callers of a dual-era upstream share
# (``session: shared``); downstream session ids never contain a colon.
LEGACY_SHARED = "legacy:shared"


def legacy_caller(ctx: CallContext) -> bool:
    """Whether ``ctx``'s caller speaks a handshake revision (it has a session of its own)."""
    version = getattr(ctx.session, "protocol_version", None)
    return not (isinstance(version, str) and is_modern(version))


def _in_own_era(shared: UpstreamSession, ctx: CallContext) -> bool:
    """Whether ``ctx``'s call goes to a (possibly) dual-era upstream over a legacy session."""
    return shared.modern and shared.dual_era is not False and legacy_caller(ctx)


def _refused(exc: BaseException) -> bool:
    """Whether an ``initialize`` failed because the upstream serves no handshake revision (a JSON-RPC
    error such as -32022, an HTTP 4xx), as opposed to being unreachable or slow."""
    if isinstance(exc, HTTPStatusError):
        return 400 <= exc.status < 500
    return isinstance(exc, ProtocolError) and not isinstance(exc, BackendUnavailable)


class SessionPool:
    def __init__(self, name: str, config: MCPConfig, base_dir: Path, egress: EgressPolicy,
                 identity: UpstreamIdentity, handler: SessionHandler,
                 http: Callable[[], aiohttp.ClientSession | None],
                 spawn: Callable[[Coroutine[Any, Any, Any]], None],
                 legacy_opened: Callable[[UpstreamSession], Awaitable[None]] | None = None) -> None:
        """``handler``: the connector (what the upstream initiates); ``http``: its current HTTP
        client (legacy SSE; made at start); ``spawn``: its background-task runner;
        ``legacy_opened``: awaited once the legacy callers' shared session of a dual-era upstream
        (:data:`LEGACY_SHARED`) is opened, before it is stored (no call goes over it before)."""
        self.name = name
        self.config = config
        self.base_dir = base_dir
        self.egress = egress
        self.identity = identity
        self.handler = handler
        self._http = http
        self._spawn = spawn
        self._legacy_opened = legacy_opened
        self.clients: dict[str, UpstreamSession] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._bindings: dict[UpstreamSession, SessionHandle] = {}

    def transport_factory(self, ctx: CallContext | None = None) -> TransportFactory:
        """Transports carrying the service identity's credential, or (``ctx``) its caller's."""
        auth = self.identity.auth_for(ctx) if ctx is not None else self.identity.service_auth()
        return transport_factory(self.name, self.config, self.base_dir, self._http(), self.egress, auth)

    async def _open(self, capabilities: dict[str, Any], ctx: CallContext | None = None) -> UpstreamSession:
        """A legacy upstream session of one downstream session (``per_client``), or of one
        principal (``ctx``: per-principal identity)."""
        session = UpstreamSession(self.name, self.transport_factory(ctx), self.handler, client_info=CLIENT_INFO,
                                  capabilities=capabilities)
        await session.open(self.config.connect_timeout_s)
        return session

    async def _open_own_era(self, shared: UpstreamSession, capabilities: dict[str, Any],
                            ctx: CallContext | None = None) -> UpstreamSession | None:
        """A legacy session to the 2026-07-28 upstream of ``shared``, or None when it refuses the
        handshake (a modern-only server: ``shared.dual_era`` becomes False, and its legacy callers
        are bridged over the stateless channel from then on). The first one settles the question:
        ``server/discover`` does not tell (the SDK lists only 2026-07-28 in it while serving both)."""
        session = UpstreamSession(self.name, self.transport_factory(ctx), self.handler, client_info=CLIENT_INFO,
                                  capabilities=capabilities)
        timeout_s = self.config.connect_timeout_s
        try:
            await session.connect(timeout_s)
            await session.handshake(timeout_s)
        except BaseException as exc:
            await session.close()
            if not _refused(exc):
                raise opening_error(self.name, exc, f"did not initialize within {timeout_s:g}s") from None
            if shared.dual_era is None:
                log.info("upstream %s serves 2026-07-28 only (initialize: %s): its legacy callers are bridged "
                         "over 2026-07-28", self.name, exc)
            shared.dual_era = False
            return None
        if shared.dual_era is None:
            log.info("upstream %s serves both eras: legacy callers reach it over an upstream session (%s)",
                     self.name, session.protocol_version)
        shared.dual_era = True
        return session

    async def session_for(self, shared: UpstreamSession | None, ctx: CallContext, down_detail: str) -> UpstreamSession:
        """The session serving ``ctx``'s call; ``shared``: the connector's (None: it is down,
        ``down_detail`` says why)."""
        if shared is None:
            raise BackendUnavailable.connector_down(self.name, down_detail)
        if self.identity.per_principal:
            return await self._principal_session(shared, ctx)
        own_era = _in_own_era(shared, ctx)
        if shared.modern and not own_era or not shared.modern and self.config.session == "shared":
            return shared
        per_client = self.config.session == "per_client"
        key = ctx.session.id if per_client else LEGACY_SHARED
        session = self.clients.get(key)
        if session is not None and session.alive:
            return session
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            session = self.clients.get(key)
            if session is None or not session.alive:
                # A shared legacy session declares what the gateway can relay for any caller
                # (each ask goes to the caller whose call it belongs to), as the shared one does.
                caps = dict(ctx.session.client_capabilities or {}) if per_client else dict(SHARED_CLIENT_CAPS)
                if own_era:
                    opened = await self._open_own_era(shared, caps)
                    if opened is None:
                        return shared
                    session = opened
                else:
                    session = await self._open(caps)
                if own_era and not per_client and self._legacy_opened is not None:
                    # Before it is stored: no call (which takes a stored session without the lock)
                    # goes over it until the hook is done.
                    try:
                        await self._legacy_opened(session)
                    except BaseException:
                        await session.close()
                        raise
                self.clients[key] = session
                if per_client:
                    self._bindings[session] = ctx.session
        return session

    async def _principal_session(self, shared: UpstreamSession, ctx: CallContext) -> UpstreamSession:
        """The session (legacy) or request channel (modern) carrying the caller's credential (at
        most ``MAX_PRINCIPAL_SESSIONS``: the least recently used one is closed past that)."""
        self.identity.auth_for(ctx)  # refused here without a credential; the caller's JWT kept current
        own_era = _in_own_era(shared, ctx)
        key = ("legacy-" if own_era else "") + self.identity.session_key(ctx)
        session = self.clients.pop(key, None)
        if session is not None:
            self.clients[key] = session  # most recently used last
            if session.alive:
                return session
        async with self._locks.setdefault(key, asyncio.Lock()):
            session = self.clients.get(key)
            if session is None or not session.alive:
                if shared.modern and not own_era:  # no handshake: the shared channel's era, this principal's credential
                    session = UpstreamSession(self.name, self.transport_factory(ctx), self.handler,
                                              client_info=CLIENT_INFO, capabilities=SHARED_CLIENT_CAPS)
                    adopt_channel(session, shared)
                elif own_era:
                    opened = await self._open_own_era(shared, dict(ctx.session.client_capabilities or {}), ctx)
                    if opened is None:  # modern only after all: this principal's stateless channel
                        return await self._principal_session(shared, ctx)
                    session = opened
                else:
                    session = await self._open(dict(ctx.session.client_capabilities or {}), ctx)
                self.clients[key] = session
                principals = [k for k in self.clients if k.startswith(("principal:", "legacy-principal:"))]
                for stale in principals[:max(0, len(principals) - MAX_PRINCIPAL_SESSIONS)]:
                    self._spawn(self.clients.pop(stale).close())
        return session

    def bound(self, session: UpstreamSession) -> SessionHandle | None:
        """The downstream session a ``per_client`` upstream session belongs to."""
        return self._bindings.get(session)

    def lost(self, session: UpstreamSession) -> None:
        """``session`` (one of the pool's) is gone: forget it and close it."""
        for key, value in list(self.clients.items()):
            if value is session:
                del self.clients[key]
        self._bindings.pop(session, None)
        self._spawn(session.close())

    def take_all(self) -> list[UpstreamSession]:
        """Every session of the pool, which forgets them (the connector stops and closes them)."""
        sessions = list(self.clients.values())
        self.clients.clear()
        self._bindings.clear()
        return sessions

    async def closed(self, session_id: str) -> None:
        """A downstream session ended: its ``per_client`` upstream session is closed."""
        self._locks.pop(session_id, None)
        session = self.clients.pop(session_id, None)
        if session is not None:
            self._bindings.pop(session, None)
            await session.close()
