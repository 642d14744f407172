"""Resource subscriptions across sessions: one connector subscription per URI, however many
sessions watch it.

The first session that subscribes to a public URI subscribes the owning connector; the last one to
leave (by ``resources/unsubscribe`` or by closing) unsubscribes it. A connector's
``resource_updated`` report reaches every session watching the public URI.

**Replicas sharing a store** (:meth:`Subscriptions.share`): a Streamable HTTP session is served by
any replica, so its subscription must outlive the replica that made it. The watcher of such a
session is then not its copy here but a :class:`_Remote` handle naming the session id: it reaches
the session through its copy on this replica when there is one, else routed to every replica (the
one holding the session's GET stream delivers it). The replica that subscribed upstream records
the entry (session, URI) in the store as held by it (:meth:`StateStore.hold`), and keeps it while
the session lives, whichever replica serves the session's requests: closing its copy of the session
(idle, drain) does not end it. Every :data:`SWEEP_S`, each replica takes over the entries of
replicas that are gone (SIGKILL, or stopped: nobody listens on their channel any more), atomically
(one taker), and subscribes upstream for them; an entry whose session record is gone (DELETE, expiry)
is dropped. ``resources/unsubscribe`` landing on a replica that does not hold the entry is routed
to the one that does. Legacy SSE sessions and 2026-07-28 listen streams live in one process:
their watchers stay local.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from gateway.catalog import Catalog
from gateway.context import ANONYMOUS, CallContext, Principal, SessionHandle
from gateway.protocol import jsonrpc
from gateway.protocol.errors import ProtocolError
from gateway.session import Session
from gateway.state import StateStore
from gateway.state.bus import Bus
from gateway.state.records import principal_of

if TYPE_CHECKING:
    from connectors.base import Connector

__all__ = ["Subscriptions", "SWEEP_S", "UNSUB_KIND"]

log = logging.getLogger("gateway.subscriptions")

Spawn = Callable[[Coroutine[Any, Any, Any]], None]
# How often a replica looks for subscriptions held by replicas that are gone (the longest a
# session's resource updates pause when the replica holding its upstream subscription dies).
SWEEP_S = 1.0
# Every this many sweeps, entries whose session record is gone are dropped.
PRUNE_EVERY = 30
UNSUB_KIND = "unsub"  # routed: a resources/unsubscribe for an entry another replica holds


class _Watcher(Protocol):
    async def notify(self, method: str, params: dict[str, Any] | None = None,
                     related_request_id: str | int | None = None) -> None: ...


def _entry(session_id: str, uri: str) -> str:
    return json.dumps([session_id, uri], separators=(",", ":"))


class _Remote:
    """The watcher of a session served by any replica (see the module docstring)."""

    transport = "streamable_http"
    protocol_version = ""

    def __init__(self, owner: Subscriptions, session_id: str, principal: Principal) -> None:
        self._owner = owner
        self.id = session_id
        self.principal = principal
        self.client_info: dict[str, Any] = {}
        self.client_capabilities: dict[str, Any] = {}

    async def notify(self, method: str, params: dict[str, Any] | None = None,
                     related_request_id: str | int | None = None) -> None:
        local = self._owner.local_session(self.id)
        if local is not None:  # its channel sends on the GET stream here, or routes it
            await local.notify(method, params)
            return
        store = self._owner.store
        if store is not None:
            await store.route(None, {"t": "notify", "sid": self.id, "msg": jsonrpc.notification(method, params)})

    async def request(self, method: str, params: dict[str, Any] | None = None,
                      related_request_id: str | int | None = None, timeout: float | None = None) -> dict[str, Any]:
        raise ProtocolError("a subscription holder sends no requests")


class Subscriptions:
    """Who watches which public resource URI."""

    def __init__(self, catalog: Catalog, spawn: Spawn) -> None:
        self.catalog = catalog
        self._spawn = spawn
        self._watchers: dict[str, set[_Watcher]] = {}
        self._by_session: dict[_Watcher, set[str]] = {}
        # Replicas sharing a store (share()): the store, this replica's sessions, the remote handles.
        self.store: StateStore | None = None
        self.local_session: Callable[[str], Session | None] = lambda _sid: None
        self._remotes: dict[str, _Remote] = {}
        self._sweeps = 0
        self._stopped = asyncio.Event()
        self._keeper: asyncio.Task[None] | None = None

    def share(self, store: StateStore, bus: Bus, local_session: Callable[[str], Session | None]) -> None:
        """Hold subscriptions of Streamable HTTP sessions for replicas (module docstring); the
        gateway then runs :meth:`keep` while it serves."""
        self.store = store
        self.local_session = local_session
        bus.on(UNSUB_KIND, self.deliver)

    def start(self) -> None:
        """Run :meth:`keep` (the serving gateway calls this once it is started)."""
        if self.store is not None and self._keeper is None:
            self._keeper = asyncio.get_running_loop().create_task(self.keep())

    def watched(self) -> frozenset[str]:
        return frozenset(self._watchers)

    def _watcher(self, session: SessionHandle) -> _Watcher:
        if self.store is None or not isinstance(session, Session) or session.transport != "streamable_http":
            return session
        return self._remote(session.id, session.principal)

    def _remote(self, session_id: str, principal: Principal) -> _Remote:
        remote = self._remotes.get(session_id)
        if remote is None:
            remote = self._remotes[session_id] = _Remote(self, session_id, principal)
        return remote

    async def subscribe(self, session: SessionHandle, public_uri: str, connector: Connector, local: str,
                        ctx: CallContext) -> None:
        watcher = self._watcher(session)
        watchers = self._watchers.setdefault(public_uri, set())
        first, new = not watchers, watcher not in watchers
        watchers.add(watcher)
        if first:
            try:
                await connector.subscribe(local, ctx)
            except BaseException:
                self._discard(watcher, public_uri)
                raise
        self._by_session.setdefault(watcher, set()).add(public_uri)
        if new and isinstance(watcher, _Remote):
            await self._hold(watcher.id, public_uri, True)

    async def unsubscribe(self, session: SessionHandle, public_uri: str, connector: Connector, local: str,
                          ctx: CallContext) -> None:
        watcher = self._watcher(session)
        if isinstance(watcher, _Remote) and self.store is not None:  # whoever holds it lets go too
            await self.store.route(None, {"t": UNSUB_KIND, "sid": watcher.id, "uri": public_uri})
        if self._discard(watcher, public_uri):
            if isinstance(watcher, _Remote):
                await self._hold(watcher.id, public_uri, False)
            if public_uri not in self._watchers:
                await connector.unsubscribe(local, ctx)

    def _discard(self, watcher: _Watcher, public_uri: str) -> bool:
        """Forget one watch; True when it was there."""
        uris = self._by_session.get(watcher)
        if uris is not None:
            uris.discard(public_uri)
            if not uris:
                del self._by_session[watcher]
                if isinstance(watcher, _Remote):
                    self._remotes.pop(watcher.id, None)
        watchers = self._watchers.get(public_uri)
        if not watchers or watcher not in watchers:
            return False
        watchers.discard(watcher)
        if not watchers:
            del self._watchers[public_uri]
        return True

    def of(self, session: SessionHandle) -> frozenset[str]:
        """The public URIs this session is subscribed to (through this replica)."""
        return frozenset(self._by_session.get(self._watcher(session), ()))

    def session_closed(self, session: SessionHandle) -> None:
        """Forget a closed session; URIs nobody watches any more are unsubscribed upstream. With
        replicas, a Streamable HTTP session's copy closing here does not end its subscriptions."""
        if self._watcher(session) is not session:
            return
        for uri in self._by_session.pop(session, ()):
            watchers = self._watchers.get(uri)
            if watchers is None:
                continue
            watchers.discard(session)
            if not watchers:
                del self._watchers[uri]
                self._drop_upstream(uri)

    def _drop_upstream(self, public_uri: str) -> None:
        try:
            connector, local, _ = self.catalog.resource_owner(public_uri)
        except ProtocolError:  # the resource went away with its connector: nothing to release
            return
        self._spawn(connector.unsubscribe(local, None))

    def resource_updated(self, connector_name: str, local_uri: str) -> None:
        public = self.catalog.public_uri(connector_name, local_uri)
        for session in list(self._watchers.get(public, ())):
            self._spawn(session.notify("notifications/resources/updated", {"uri": public}))

    # -- replicas ---------------------------------------------------------------------------------
    async def _hold(self, session_id: str, uri: str, held: bool) -> None:
        assert self.store is not None
        try:
            await self.store.hold([_entry(session_id, uri)], held)
        except Exception as exc:  # the subscription works here; only its failover is lost
            log.warning("subscription %s of session %s: recording it in the state store failed: %r",
                        uri, session_id, exc)

    def deliver(self, message: dict[str, Any]) -> None:
        """A ``resources/unsubscribe`` another replica served, for an entry this one may hold."""
        sid, uri = message.get("sid"), message.get("uri")
        remote = self._remotes.get(str(sid))
        if remote is not None and isinstance(uri, str):
            self._spawn(self._let_go(remote, uri))

    async def _let_go(self, watcher: _Remote, uri: str) -> None:
        if self._discard(watcher, uri):
            await self._hold(watcher.id, uri, False)
            if uri not in self._watchers:
                self._drop_upstream(uri)

    async def keep(self) -> None:
        """Sweep every :data:`SWEEP_S` until :meth:`close` (a failed sweep is retried)."""
        while not self._stopped.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SWEEP_S):
                    await self._stopped.wait()
                    return
            try:
                await self.sweep()
            except Exception as exc:
                log.warning("subscription sweep failed: %r", exc)

    async def close(self) -> None:
        """Stop sweeping, after the sweep under way (never cut inside a store command: the store
        closes next)."""
        self._stopped.set()
        if self._keeper is not None:
            await self._keeper

    async def sweep(self) -> None:
        """Take over what gone replicas held; let go of what another replica took (this one looked
        gone to it); now and then, drop entries whose session ended."""
        assert self.store is not None
        for entry in await self.store.take_over():
            await self._take(entry)
        held = await self.store.held_here()
        self._sweeps += 1
        prune = self._sweeps % PRUNE_EVERY == 0
        for remote in list(self._remotes.values()):
            for uri in list(self._by_session.get(remote, ())):
                if _entry(remote.id, uri) not in held or (prune and await self.store.load_session(remote.id) is None):
                    await self._let_go(remote, uri)

    async def _take(self, entry: str) -> None:
        assert self.store is not None
        try:
            sid, uri = json.loads(entry)
            connector, local, _ = self.catalog.resource_owner(uri)
            record = await self.store.load_session(sid)
        except (ValueError, TypeError, ProtocolError):
            record = None
        if record is None:  # the session ended (or its resource is gone): nothing to hold
            await self.store.hold([entry], False)
            return
        watcher = self._remote(sid, principal_of(record) or ANONYMOUS)
        watchers = self._watchers.setdefault(uri, set())
        first = not watchers
        watchers.add(watcher)
        self._by_session.setdefault(watcher, set()).add(uri)
        log.info("took over the subscription of session %s to %s (its replica is gone)", sid, uri)
        if first:
            ctx = CallContext(session=watcher, method="resources/subscribe", request_id=f"takeover:{sid}",
                              params={"uri": uri}, principal=watcher.principal, target=uri,
                              deadline=time.monotonic() + 30.0)
            try:
                await connector.subscribe(local, ctx)
            except Exception as exc:  # kept: a connector re-subscribes what it watches when it is back
                log.warning("subscription %s of session %s: subscribing upstream failed: %r", uri, sid, exc)
