"""The Gateway: builds connectors, catalog and filter chain from config; start, reload, stop.

Owns the live sessions and everything that crosses sessions: list_changed broadcasts after a
catalog rebuild, resource subscriptions (:class:`~gateway.subscriptions.Subscriptions`), log
messages from connectors, and graceful shutdown (stop taking sessions, let in-flight requests
finish within the grace period, then stop connectors and flush the filters).

The parts get exactly what they use, never the Gateway itself: the filter chain is built
explicitly by :func:`build_filters` (each filter constructed with its own config section and the
catalog function it needs), sessions see the :class:`~gateway.session.SessionHost` protocol,
transports the :class:`~gateway.transports.host.SessionFactory` protocol, connectors their
:class:`~connectors.base.ConnectorEvents` and :class:`~connectors.instrumentation.Instrumentation`.

A connector that fails to start is recorded in :attr:`Gateway.failed` and left out of the
catalog; it never stops the gateway, which starts it again in the background with a capped
exponential backoff (:mod:`gateway.startup`) and adds it to the catalog once it is up. Nor does a
name collision (the first connector keeps the name, the rest is reported), unless
``gateway.names.on_collision`` is ``error``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from connectors.base import Connector
from connectors.config import ConnectorConfig
from connectors.registry import connector_class
from gateway.auth import Authenticator
from gateway.catalog import LIST_CHANGED, Catalog
from gateway.checks import config_warnings, policy_problems
from gateway.config import AuthConfig, GatewayConfig, RelayLimits, ServerRequestLimits, locate
from gateway.context import CallContext, LocalHandler, Principal
from gateway.dispatch import MODERN_CATALOG_METHODS, CacheHints, Dispatcher
from gateway.endpoints.host import EndpointHost, Endpoints
from gateway.filters import Filter
from gateway.filters.chain import build_filters, start_filters, stop_filters
from gateway.listeners import Listeners
from gateway.mrtr import ParkedCalls
from gateway.mrtr_remote import ParkedElsewhere
from gateway.oauth.service import OAuthService
from gateway.protocol.cursors import CursorCodec
from gateway.protocol.errors import ConfigError, InvalidParams, ProtocolError
from gateway.protocol.request_state import RequestStateCodec
from gateway.protocol.versions import MODERN_VERSIONS
from gateway.readiness import probe_backends, readiness_detail
from gateway.session import Send, Session
from gateway.startup import StartRetries, start_connector
from gateway.state import StateStore, make_store
from gateway.state.bus import Bus
from gateway.state.records import restore, session_record
from gateway.stateless import StatelessSession
from gateway.status import StatusQuery, StatusView, collect, respond
from gateway.subscriptions import Subscriptions
from gateway.tasks import TASK_METHODS, TASKS_EXTENSION, TaskHandles, TaskRouter
from gateway.telemetry import known as known_series
from gateway.telemetry import metrics, tracing
from gateway.telemetry.http import MetricsListener

__all__ = ["Gateway", "build_filters", "Identity"]

log = logging.getLogger("gateway.app")

_POLICY_SECTIONS = ("auth", "access", "rate_limits", "audit", "telemetry")
_PROBE_EVERY_S = 5.0  # how fresh /readyz keeps the rate-limit backend's state without traffic


@dataclass(frozen=True, slots=True)
class Identity:
    """The server's name, version and instructions, as ``initialize`` reports them."""

    name: str
    version: str
    instructions: str | None


class Gateway:
    """One running gateway: config, connectors, catalog, filter chain and sessions."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.catalog = Catalog(config.gateway.page_size, CursorCodec(config.gateway.cursor_secret))
        self.subscriptions = Subscriptions(self.catalog, self.spawn)
        self.listeners = Listeners(self.subscriptions)
        # 2026-07-28: calls parked for a client's MRTR retry, and the seal of their requestState
        # (cursor_secret: replicas sharing it accept each other's states).
        self.parked = ParkedCalls(config.gateway.request_timeout_s)
        self.request_states = RequestStateCodec(config.gateway.cursor_secret)
        self.tasks = TaskRouter(TaskHandles(config.gateway.cursor_secret), lambda: self.connectors)
        self.connectors: dict[str, Connector] = {}
        self.failed: dict[str, str] = {}
        # The last failure each connector reported (a failed start, going down): /status shows it.
        self.last_errors: dict[str, str] = {}
        self._serving = False
        self.retries = StartRetries(config.gateway.start_retry, self._retry_start, self._adopt)
        self.sessions: dict[str, Session] = {}
        # What replicas share (state.store): memory (nothing) or Redis; the HTTP app starts its routing.
        self.state: StateStore = make_store(config.state)
        self.bus = Bus(self.state)  # routed messages by kind (the HTTP app starts the store with it)
        self._parked_elsewhere = ParkedElsewhere(self.bus, self) if self.state.shared else None
        if self.state.shared:  # subscriptions held for sessions are taken over when their replica goes
            self.subscriptions.share(self.state, self.bus, self.sessions.get)
        # Upstream OAuth (gateway/oauth): token store, broker and routes, opened once a connector needs them.
        self.oauth = OAuthService(lambda: self.config, self.state, self.bus)
        self.filters: list[Filter] = []
        self.dispatcher = self._dispatcher([])
        self.endpoints = Endpoints(self, self.catalog)  # virtual servers at /mcp/{name} (gateway.endpoints)
        # Anonymous until start(): the configured keys load with the filter chain.
        self.authenticator = Authenticator(AuthConfig(), name=config.gateway.name)
        self.ready = False
        self.draining = False
        # While draining: when a request last started or ended, and an event for each of those.
        self._last_activity = 0.0
        self._activity = asyncio.Event()
        self.started_at = 0.0
        self.config_loaded_at = 0.0  # epoch seconds of the start or reload that installed self.config
        self._metrics = MetricsListener()  # /metrics, /readyz and /status on telemetry.metrics_port
        # `mcp-gateway stdio` with the deployment's config: its metrics port is usually the HTTP
        # gateway's, already taken; the stdio client matters more than a second /metrics.
        self.metrics_port_optional = False
        # serve --workers N: the loopback socket the supervisor made for this worker's own metrics
        # listener (the supervisor holds telemetry.metrics_port and merges the workers); set by cli.
        self.metrics_socket: socket.socket | None = None
        self._rebuild_handle: asyncio.Handle | None = None
        self._announced: frozenset[str] = frozenset()  # listings a backend announced since the last rebuild
        self._background: set[asyncio.Task[Any]] = set()

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, serving: bool = True) -> None:
        """Start connectors and build the catalog; ``serving=False`` (``mcp-gateway list``) skips
        the filter chain and the metrics, which only matter when clients connect.

        What can refuse the config (an unreadable key file) is built before any connector starts;
        whatever fails after that (a name collision) first stops the connectors, so no process,
        pool or task outlives the failed start."""
        authenticator = None
        self._serving = serving
        if serving:
            authenticator = Authenticator(self.config.auth, self.config.base_dir, self.config.gateway.name)
            # What validate reports without refusing the file (a stdio principal no rule admits).
            for problem in policy_problems(self.config) + config_warnings(self.config):
                where, _ = locate(problem.path, {})
                log.warning("config %s: %s", where, problem.message)
        self.connectors = await self._start_connectors(self.config)
        try:
            self._install_catalog()
            if serving:
                await self._install_filters(authenticator)
                await self._start_metrics()
        except BaseException:
            await self.retries.cancel()
            await asyncio.gather(*(c.stop() for c in self.connectors.values()), return_exceptions=True)
            filters, self.filters = self.filters, []
            await stop_filters(filters)
            raise
        if not serving:
            return
        self.spawn(probe_backends(lambda: self.filters, _PROBE_EVERY_S))
        self.subscriptions.start()  # with replicas: the takeover sweep (a no-op otherwise)
        self.endpoints.warm(self.spawn)  # search endpoints index their tools in the background
        self.started_at = self.config_loaded_at = time.time()
        self.ready = True
        log.info("gateway %s ready: %s", self.config.gateway.name,
                 ", ".join(f"{k}={v}" for k, v in self.catalog.counts().items()))

    async def _start_connectors(self, config: GatewayConfig, only: set[str] | None = None) -> dict[str, Connector]:
        """Create and start connectors (all, or those named in ``only``) concurrently. Those that
        fail are in :attr:`failed` and, when serving, retried in the background (gateway/startup.py)."""
        created: dict[str, Connector] = {}
        for cfg in config.connectors:
            if only is not None and cfg.name not in only:
                continue
            created[cfg.name] = connector_class(cfg.type)(cfg, base_dir=Path(config.base_dir))
        await self.oauth.attach(config, created.values())  # the OAuthPort; no or a wrong key: ConfigError

        async def start_one(connector: Connector) -> None:
            try:
                await start_connector(connector, self)
                self.failed.pop(connector.name, None)
            except Exception as exc:
                detail = str(exc) or type(exc).__name__
                self.failed[connector.name] = self.last_errors[connector.name] = detail
                log.error("connector %s failed to start: %s", connector.name, detail)
                if self._serving:
                    self.retries.schedule(connector.config, detail)

        await asyncio.gather(*(start_one(c) for c in created.values()))
        started = {name: c for name, c in created.items() if name not in self.failed}
        for connector in started.values():
            # Started but down (a database that refused the connection, an upstream not there yet):
            # it serves nothing until it comes up, so say so among the first lines.
            health = connector.health()
            if not health.up:
                log.error("connector %s is down after start: %s (it keeps retrying)", connector.name,
                          health.detail or "no detail")
        return started

    async def _retry_start(self, cfg: ConnectorConfig) -> Connector:
        """A start attempt of ``cfg``'s connector for :class:`StartRetries`: a fresh instance."""
        connector = connector_class(cfg.type)(cfg, base_dir=Path(self.config.base_dir))
        await self.oauth.attach(self.config, [connector])
        await start_connector(connector, self)
        return connector

    def _adopt(self, connector: Connector) -> None:
        """A connector that failed at start is up now: into the catalog, and sessions hear of it."""
        if self.config.connector(connector.name) != connector.config:  # replaced by a reload meanwhile
            self.spawn(connector.stop())
            return
        self.failed.pop(connector.name, None)
        self.connectors[connector.name] = connector
        self._announce(self._install_catalog(strict=False))

    def _install_catalog(self, strict: bool | None = None) -> set[str]:
        """``strict`` (None: ``gateway.names.on_collision: error``): a collision raises ConfigError."""
        strict = self.config.gateway.names.on_collision == "error" if strict is None else strict
        ordered = [(self.connectors[c.name], c.public_prefix) for c in self.config.connectors if c.name in self.connectors]
        self.catalog.set_connectors(ordered)
        changed = self.catalog.rebuild(strict=strict)
        self.endpoints.configure(self.config.endpoints)
        self.endpoints.rebuild(self.spawn)
        known_series.prime(self.config, self.catalog)  # rare-event counters at 0 for what is known now
        return changed

    async def _install_filters(self, authenticator: Authenticator | None = None) -> None:
        """Build and start the filter chain for the current config; stop the one it replaces."""
        # First what can refuse the config (a malformed key): nothing has started yet then.
        if authenticator is None:
            authenticator = Authenticator(self.config.auth, self.config.base_dir, self.config.gateway.name)
        filters = build_filters(self.config, self.catalog)
        await start_filters(filters)
        old, self.filters = self.filters, filters
        self.authenticator = authenticator
        self.dispatcher = self._dispatcher(filters)
        await stop_filters(old)

    def _dispatcher(self, filters: list[Filter]) -> Dispatcher:
        cfg = self.config
        # Listings differ between principals when access rules hide things: then they are private.
        hints = CacheHints(cfg.gateway.cache_ttl_s, private_listings=bool(cfg.access))
        return Dispatcher(self.catalog, self.subscriptions, cfg.gateway.request_timeout_s, filters,
                          server_info={"name": cfg.gateway.name, "version": cfg.gateway.version},
                          cache=hints, tasks=self.tasks)

    async def _start_metrics(self) -> None:
        """Register with the scrape-time collector; serve /metrics on its own port if asked."""
        metrics.STATE.add(self)
        metrics.BUILD_INFO.info({"version": str(self.config.gateway.version)})
        metrics.CONFIG_LAST_RELOAD.set_to_current_time()
        await self._metrics.apply(self.config.telemetry, self.config.gateway.http.host, self.health,
                                  self._status_on_metrics_port, sock=self.metrics_socket,
                                  optional=self.metrics_port_optional)

    async def reload(self, new: GatewayConfig) -> dict[str, list[str]]:
        """Apply a validated config: restart changed connectors only; sessions stay connected.

        Returns ``{"started": [...], "stopped": [...], "kept": [...]}``. On a start-up error of the
        new catalog (a name collision) the old connectors and config are restored and ConfigError
        is raised.
        """
        old = self.config
        old_by_name = {c.name: c for c in old.connectors}
        new_by_name = {c.name: c for c in new.connectors}
        kept = [n for n, c in new_by_name.items() if old_by_name.get(n) == c and n in self.connectors]
        to_stop = [n for n in self.connectors if n not in kept]
        to_start = {n for n in new_by_name if n not in kept}
        await self.retries.cancel()  # what still fails is started (and retried) again below
        self.retries = StartRetries(new.gateway.start_retry, self._retry_start, self._adopt)
        for name in [n for n in self.failed if n not in new_by_name]:
            del self.failed[name]
        started = await self._start_connectors(new, only=to_start)
        previous = self.connectors
        self.config = new
        self.connectors = {**{n: previous[n] for n in kept}, **started}
        try:
            changed = self._install_catalog()
        except ConfigError:
            for connector in started.values():
                await connector.stop()
            self.config, self.connectors = old, previous
            self._install_catalog(strict=False)
            await self.retries.cancel()  # the refused config's; the old config's failures are retried again
            self.retries = StartRetries(old.gateway.start_retry, self._retry_start, self._adopt)
            for cfg in old.connectors:
                if cfg.name not in previous:  # failed under the old config (it may have started for the new)
                    self.failed[cfg.name] = detail = self.failed.get(cfg.name) or self.last_errors.get(cfg.name, "?")
                    self.retries.schedule(cfg, detail)
            raise
        if to_stop:
            # Calls in flight may still run on the replaced connectors: stop those when the calls
            # finish (within the shutdown grace period), so that a reload loses nothing.
            self.spawn(self._retire([previous[name] for name in to_stop]))
        self.catalog.page_size = new.gateway.page_size
        if any(getattr(old, s) != getattr(new, s) for s in _POLICY_SECTIONS):
            await self._install_filters()
            if old.telemetry != new.telemetry:
                await self._start_metrics()
        else:  # a connector's timeout_s, the identity or the cache hints may have changed
            self.dispatcher = self._dispatcher(self.filters)
        self.config_loaded_at = time.time()
        self._announce(changed)
        log.info("config reloaded: started %s, stopped %s, kept %s", sorted(started), to_stop, kept)
        return {"started": sorted(started), "stopped": to_stop, "kept": kept}

    async def _retire(self, connectors: list[Connector]) -> None:
        pending = [t for s in list(self.sessions.values()) for t in s.inflight_tasks()]
        try:
            if pending:
                await asyncio.wait(pending, timeout=self.config.gateway.shutdown_grace_s)
        finally:
            for connector in connectors:
                try:
                    await connector.stop()
                except Exception:
                    log.exception("stopping replaced connector %s failed", connector.name)

    async def drain(self, grace_s: float | None = None, linger_s: float | None = None) -> None:
        """Stop accepting sessions; within the grace period, wait for in-flight requests and then
        for ``linger_s`` (``gateway.drain_linger_s``) without any request, so that a client's
        follow-up to its last call (the SDK lists tools after a call) is still answered. Every
        request during the drain starts the linger again; the last session closing ends it."""
        self.ready = False
        self.draining = True
        grace = self.config.gateway.shutdown_grace_s if grace_s is None else grace_s
        linger = self.config.gateway.drain_linger_s if linger_s is None else linger_s
        deadline = time.monotonic() + grace
        quiet_since = time.monotonic()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            tasks = [t for s in list(self.sessions.values()) for t in s.inflight_tasks()]
            if tasks:
                await asyncio.wait(tasks, timeout=remaining)
                quiet_since = time.monotonic()
                continue
            quiet_since = max(quiet_since, self._last_activity)
            wait = quiet_since + linger - time.monotonic()
            if not self.sessions or wait <= 0:
                return
            self._activity.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(wait, remaining)):
                    await self._activity.wait()

    async def stop(self, grace_s: float | None = None) -> None:
        self.listeners.close_all()
        if not self.draining:
            await self.drain(grace_s)
        self.parked.close()
        for session in list(self.sessions.values()):
            await session.close()
        await self.subscriptions.close()
        await self.state.close()
        await self.retries.cancel()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*list(self._background), return_exceptions=True)  # retired connectors stop
        await asyncio.gather(*(c.stop() for c in self.connectors.values()), return_exceptions=True)
        await self.oauth.close()
        await self.endpoints.close()
        await stop_filters(self.filters)
        metrics.STATE.discard(self)
        await self._metrics.close()
        await asyncio.to_thread(tracing.force_flush)
        if self._rebuild_handle is not None:
            self._rebuild_handle.cancel()

    # -- sessions: the SessionFactory of the transports ----------------------------------------
    @property
    def accepting(self) -> bool:
        """False once draining has begun: transports refuse new sessions (503)."""
        return not self.draining

    def open_session(self, transport: str, send: Send, principal: Principal) -> Session:
        """A new session served by this gateway; :meth:`add_session` registers it once established."""
        session = Session(self, transport, send, principal)
        if self.state.shared:  # a client's answer landing on another replica is routed back here
            session.request_prefix = f"gw.{self.state.replica}."
        return session

    def session_record(self, session: Session) -> dict[str, Any]:
        """What the shared store keeps of a session (:mod:`gateway.state.records`)."""
        return session_record(session, self.subscriptions.of(session))

    def adopt_session(self, transport: str, send: Send, session_id: str, record: dict[str, Any],
                      principal: Principal) -> Session:
        """A session another replica started, rebuilt here from its shared record and registered."""
        session = self.open_session(transport, send, principal)
        restore(session, session_id, record)
        self.add_session(session)
        return session

    def add_session(self, session: Session) -> None:
        """Register a session: broadcasts, metrics and shutdown reach it from now on."""
        self.sessions[session.id] = session

    # -- the SessionHost of every session --------------------------------------------------------
    @property
    def identity(self) -> Identity:
        cfg = self.config.gateway
        return Identity(cfg.name, cfg.version, cfg.instructions)

    @property
    def request_timeout_s(self) -> float:
        return self.config.gateway.request_timeout_s

    @property
    def server_request_limits(self) -> ServerRequestLimits:
        return self.config.gateway.server_requests

    @property
    def relay_limits(self) -> RelayLimits:
        return self.config.gateway.relayed_notifications

    def capabilities(self) -> dict[str, Any]:
        return self.catalog.capabilities()

    async def dispatch(self, session: Session, request_id: str | int, method: str, params: dict[str, Any],
                       traceparent: str | None = None, local: LocalHandler | None = None,
                       via: Dispatcher | None = None, *, authorization: str | None = None) -> dict[str, Any]:
        """``via``: an endpoint's dispatcher (gateway.endpoints), else the gateway's."""
        dispatcher = via or self.dispatcher
        if not self.draining:
            return await dispatcher.dispatch(session, request_id, method, params, traceparent, local, authorization=authorization)
        self._drain_activity()  # a request while draining: the linger starts again, now and at its end
        try:
            return await dispatcher.dispatch(session, request_id, method, params, traceparent, local, authorization=authorization)
        finally:
            self._drain_activity()

    def _drain_activity(self) -> None:
        self._last_activity = time.monotonic()
        self._activity.set()

    async def session_closed(self, session: Session) -> None:
        self.sessions.pop(session.id, None)
        if self.draining:
            self._activity.set()  # the drain ends as soon as no session is left
        self.subscriptions.session_closed(session)
        for connector in list(self.connectors.values()):
            try:
                await connector.session_closed(session.id)
            except Exception:
                log.exception("connector %s failed to release session %s", connector.name, session.id)

    def client_roots_changed(self, session: Session) -> None:
        for connector in self.connectors.values():
            hook = getattr(connector, "roots_changed", None)
            if hook is not None:
                hook(session)

    # -- events from connectors ---------------------------------------------------------------
    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def broadcast(self, method: str, params: dict[str, Any] | None = None) -> None:
        if params is None:  # list_changed: to the sessions and listen streams of /mcp only
            for delivery in self.list_changed_deliveries(method, self):
                self.spawn(delivery)
            return
        for session in list(self.sessions.values()):
            if session.state == "ready":
                self.spawn(session.notify(method, params))

    def list_changed_deliveries(self, method: str, host: Gateway | EndpointHost) -> list[Coroutine[Any, Any, None]]:
        """A list_changed to the ready sessions and the 2026-07-28 listen streams of ``host``
        (the gateway: ``/mcp``; or one endpoint)."""
        out = [s.notify(method) for s in list(self.sessions.values()) if s.state == "ready" and s.host is host]
        return out + self.listeners.broadcast(method, host)

    def schedule_rebuild(self, announced: frozenset[str] = frozenset()) -> None:
        """Coalesce change reports: one rebuild per loop iteration however many arrive.
        ``announced``: listings a backend said changed (``ConnectorEvents.components_changed``)."""
        self._announced |= announced
        if self._rebuild_handle is None:
            self._rebuild_handle = asyncio.get_running_loop().call_soon(self._rebuild)

    def _rebuild(self) -> None:
        self._rebuild_handle = None
        announced, self._announced = self._announced, frozenset()
        changed = self.catalog.rebuild(strict=False)
        # An upstream's own list_changed reaches /mcp's clients even when the listing reads back
        # the same (added and removed again): a client connected to it directly is told too.
        # Endpoints compare their own selection: theirs may not include what the upstream changed.
        self._announce(changed, {LIST_CHANGED[k] for k in announced if k in LIST_CHANGED})

    def _announce(self, changed: set[str], announced: set[str] | frozenset[str] = frozenset()) -> None:
        for method in sorted({LIST_CHANGED[k] for k in changed} | announced):
            self.broadcast(method)
        self.endpoints.rebuild(self.spawn, changed)

    # -- 2026-07-28: what a modern request needs (StatelessHost, ModernHost) ----------------------
    @property
    def replica(self) -> str | None:
        return self.state.replica if self.state.shared else None

    async def resume_elsewhere(self, replica: str, message: dict[str, Any], session: StatelessSession
                               ) -> dict[str, Any]:
        if self._parked_elsewhere is None:
            raise InvalidParams("requestState: the call it continues is held by another replica, and this one "
                                "shares no state with it (state.store); send the request again without it")
        return await self._parked_elsewhere.resume(replica, message, session)

    def knows(self, method: str) -> bool:
        return method in MODERN_CATALOG_METHODS or method in self._modern_methods

    def modern_method(self, method: str) -> LocalHandler | None:
        return self._modern_methods.get(method)

    @functools.cached_property
    def _modern_methods(self) -> dict[str, LocalHandler]:  # asked on every modern request: built once
        methods: dict[str, LocalHandler] = {"server/discover": self._discover, "subscriptions/listen": self.listeners.listen}
        methods.update(dict.fromkeys(TASK_METHODS, self.tasks.handle))
        return methods

    async def _discover(self, ctx: CallContext) -> dict[str, Any]:
        cfg = self.config.gateway
        result: dict[str, Any] = {"supportedVersions": list(MODERN_VERSIONS), "capabilities": self.capabilities()}
        if self.tasks.available():  # an upstream speaks the tasks extension: pass it through
            result["capabilities"]["extensions"] = {TASKS_EXTENSION: {}}
        if cfg.instructions:
            result["instructions"] = cfg.instructions
        return result

    def tool_input_schema(self, name: str) -> dict[str, Any] | None:
        try:
            schema = self.catalog.tool(name).wire.get("inputSchema")
        except ProtocolError:
            return None
        return schema if isinstance(schema, dict) else None

    # -- the operator's status page ------------------------------------------------------------
    async def status(self, query: StatusQuery) -> StatusView:
        """What ``/status`` shows now (:mod:`gateway.status`)."""
        return await collect(self, query)

    async def _status_on_metrics_port(self, request: web.Request) -> web.StreamResponse:
        # The metrics port is the operator's (as its /readyz detail is): no credential asked.
        if not self.config.status.enabled:
            raise web.HTTPNotFound()
        return await respond(request, self.status)

    # -- health -------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """Readiness detail (:func:`gateway.readiness.readiness_detail`)."""
        return readiness_detail(self)
