"""Which upstream session serves a call of the MCP connector, besides the shared one.

:class:`SessionPool` keeps the connector's other upstream sessions, by key:

* ``per_client`` (legacy upstreams): one session per downstream session (key: its id), opened on
  its first call with that client's capabilities and bound to it (an upstream request with no
  call in flight goes to the bound client), closed in :meth:`SessionPool.closed`;
* upstream identity (``identity: user|exchange`` or ``credentials.per_principal``,
  :mod:`connectors.oauth.identity`): one session per principal (key ``principal:<name>``)
  carrying that principal's credential; for a 2026-07-28 upstream a request channel adopting the
  shared one's era (:func:`~connectors.mcp.identity.adopt_channel`). At most
  :data:`MAX_PRINCIPAL_SESSIONS` are kept: past that the least recently used one is closed.

Opening is single-flight per key (a lock): concurrent first calls share one session. The pool
never decides about the shared session (the connector's reconnect loop does); a session it holds
that is lost is dropped (:meth:`SessionPool.lost`) and opened again on the next call.
:class:`~connectors.oauth.client.AuthorizationRequired` from opening a principal's session goes
to the caller, which asks for the authorization and retries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp

from connectors.egress import EgressPolicy
from connectors.oauth.identity import UpstreamIdentity
from gateway.protocol.errors import BackendUnavailable

from .client import SessionHandler, TransportFactory, UpstreamSession
from .config import MCPConfig
from .factory import transport_factory
from .identity import adopt_channel

if TYPE_CHECKING:
    from gateway.context import CallContext, SessionHandle

__all__ = ["SessionPool", "SHARED_CLIENT_CAPS", "CLIENT_INFO", "MAX_PRINCIPAL_SESSIONS"]

SHARED_CLIENT_CAPS: dict[str, Any] = {"sampling": {}, "elicitation": {"form": {}, "url": {}},
                                       "roots": {"listChanged": True}}
CLIENT_INFO: dict[str, Any] = {"name": "mcp-gateway", "version": "0.1.0"}
# Per-principal upstream sessions kept open (identity user/exchange, per-principal credentials).
MAX_PRINCIPAL_SESSIONS = 1000


class SessionPool:
    def __init__(self, name: str, config: MCPConfig, base_dir: Path, egress: EgressPolicy,
                 identity: UpstreamIdentity, handler: SessionHandler,
                 http: Callable[[], aiohttp.ClientSession | None],
                 spawn: Callable[[Coroutine[Any, Any, Any]], None]) -> None:
        """``handler``: the connector (what the upstream initiates); ``http``: its current HTTP
        client (legacy SSE; made at start); ``spawn``: its background-task runner."""
        self.name = name
        self.config = config
        self.base_dir = base_dir
        self.egress = egress
        self.identity = identity
        self.handler = handler
        self._http = http
        self._spawn = spawn
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

    async def session_for(self, shared: UpstreamSession | None, ctx: CallContext, down_detail: str) -> UpstreamSession:
        """The session serving ``ctx``'s call; ``shared``: the connector's (None: it is down,
        ``down_detail`` says why)."""
        if shared is None:
            raise BackendUnavailable.connector_down(self.name, down_detail)
        if self.identity.per_principal:
            return await self._principal_session(shared, ctx)
        if self.config.session == "shared" or shared.modern:
            return shared
        sid = ctx.session.id
        session = self.clients.get(sid)
        if session is not None and session.alive:
            return session
        lock = self._locks.setdefault(sid, asyncio.Lock())
        async with lock:
            session = self.clients.get(sid)
            if session is None or not session.alive:
                caps = dict(ctx.session.client_capabilities or {})
                session = await self._open(caps)
                self.clients[sid] = session
                self._bindings[session] = ctx.session
        return session

    async def _principal_session(self, shared: UpstreamSession, ctx: CallContext) -> UpstreamSession:
        """The session (legacy) or request channel (modern) carrying the caller's credential (at
        most ``MAX_PRINCIPAL_SESSIONS``: the least recently used one is closed past that)."""
        self.identity.auth_for(ctx)  # refused here without a credential; the caller's JWT kept current
        key = self.identity.session_key(ctx)
        session = self.clients.pop(key, None)
        if session is not None:
            self.clients[key] = session  # most recently used last
            if session.alive:
                return session
        async with self._locks.setdefault(key, asyncio.Lock()):
            session = self.clients.get(key)
            if session is None or not session.alive:
                if shared.modern:  # no handshake: the shared channel's era, this principal's credential
                    session = UpstreamSession(self.name, self.transport_factory(ctx), self.handler,
                                              client_info=CLIENT_INFO, capabilities=SHARED_CLIENT_CAPS)
                    adopt_channel(session, shared)
                else:
                    session = await self._open(dict(ctx.session.client_capabilities or {}), ctx)
                self.clients[key] = session
                principals = [k for k in self.clients if k.startswith("principal:")]
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
