"""The Gateway: builds connectors, catalog and filter chain from config; start, reload, stop.

Owns the live sessions and everything that crosses sessions: list_changed broadcasts after a
catalog rebuild, resource subscriptions (one connector subscription per URI however many sessions
watch it), log messages from connectors, and graceful shutdown (stop taking sessions, let in-flight
requests finish within the grace period, then stop connectors and flush the filters).

A connector that fails to start is recorded in :attr:`Gateway.failed` and left out of the
catalog; it never stops the gateway. Name collisions at start-up do (they are config errors).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import time
from typing import TYPE_CHECKING, Any

from connectors.base import Connector, Health
from connectors.registry import connector_class
from gateway.catalog import Catalog
from gateway.config import GatewayConfig
from gateway.context import CallContext
from gateway.dispatch import Dispatcher
from gateway.filters import CHAIN_ORDER, Filter
from gateway.protocol.cursors import CursorCodec
from gateway.protocol.errors import ConfigError
from gateway.telemetry import metrics

if TYPE_CHECKING:
    from gateway.session import Session

__all__ = ["Gateway"]

log = logging.getLogger("gateway.app")

_LIST_CHANGED = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
    "resourceTemplates": "notifications/resources/list_changed",
}
_POLICY_SECTIONS = ("auth", "access", "rate_limits", "audit", "telemetry")


class _ConnectorEvents:
    """The ConnectorEvents a connector is started with: forwards to its gateway."""

    __slots__ = ("gateway", "name")

    def __init__(self, gateway: Gateway, name: str) -> None:
        self.gateway = gateway
        self.name = name

    def components_changed(self) -> None:
        self.gateway.schedule_rebuild()

    def resource_updated(self, uri: str) -> None:
        self.gateway.resource_updated(self.name, uri)

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        params: dict[str, Any] = {"level": level, "data": data, "logger": logger or self.name}
        self.gateway.broadcast("notifications/message", params)

    def health_changed(self, health: Health) -> None:
        log.log(logging.INFO if health.up else logging.WARNING, "connector %s is %s%s", self.name,
                "up" if health.up else "down", f": {health.detail}" if health.detail else "")
        metrics.connector_health_changed(self.name, health.up, self)
        self.gateway.schedule_rebuild()


def _build_filters(gateway: Gateway) -> list[Filter]:
    filters: list[Filter] = []
    for name in CHAIN_ORDER:
        module_name = f"gateway.filters.{name}"
        if importlib.util.find_spec(module_name) is None:
            continue
        built = importlib.import_module(module_name).build(gateway)
        if built is not None:
            filters.append(built)
    return filters


def _build_authenticator(gateway: Gateway) -> Any:
    if importlib.util.find_spec("gateway.auth") is None:
        return None
    module = importlib.import_module("gateway.auth")
    builder = getattr(module, "build_authenticator", None)
    return builder(gateway) if builder is not None else None


class Gateway:
    """One running gateway: config, connectors, catalog, filter chain and sessions."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.catalog = Catalog(config.gateway.page_size, CursorCodec(config.gateway.cursor_secret))
        self.connectors: dict[str, Connector] = {}
        self.failed: dict[str, str] = {}
        self.sessions: dict[str, Session] = {}
        self.filters: list[Filter] = []
        self.dispatcher = Dispatcher(self)
        self.authenticator: Any = None
        self.ready = False
        self.draining = False
        self.started_at = 0.0
        self._subscribers: dict[str, set[Session]] = {}
        self._rebuild_handle: asyncio.Handle | None = None
        self._background: set[asyncio.Task[Any]] = set()

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, serving: bool = True) -> None:
        """Start connectors and build the catalog; ``serving=False`` (``mcp-gateway list``) skips
        the filter chain and authentication, which only matter when clients connect."""
        self.connectors = await self._start_connectors(self.config)
        try:
            self._install_catalog(strict=True)
        except ConfigError:  # a name collision: release what started (processes, pools) first
            await asyncio.gather(*(c.stop() for c in self.connectors.values()), return_exceptions=True)
            raise
        if not serving:
            return
        self.filters = _build_filters(self)
        await self._start_filters(self.filters)
        self.dispatcher = Dispatcher(self, self.filters)
        self.authenticator = _build_authenticator(self)
        self.started_at = time.time()
        self.ready = True
        log.info("gateway %s ready: %s", self.config.gateway.name,
                 ", ".join(f"{k}={v}" for k, v in self.catalog.counts().items()))

    async def _start_connectors(self, config: GatewayConfig, only: set[str] | None = None) -> dict[str, Connector]:
        """Create and start connectors (all, or those named in ``only``) concurrently."""
        created: dict[str, Connector] = {}
        for cfg in config.connectors:
            if only is not None and cfg.name not in only:
                continue
            created[cfg.name] = connector_class(cfg.type)(cfg, base_dir=config.base_dir)

        async def start_one(connector: Connector) -> None:
            try:
                await connector.start(_ConnectorEvents(self, connector.name))
                self.failed.pop(connector.name, None)
            except Exception as exc:
                detail = str(exc) or type(exc).__name__
                self.failed[connector.name] = detail
                log.error("connector %s failed to start: %s", connector.name, detail)
                await connector.stop()

        await asyncio.gather(*(start_one(c) for c in created.values()))
        return {name: c for name, c in created.items() if name not in self.failed}

    def _install_catalog(self, strict: bool) -> set[str]:
        ordered = [(self.connectors[c.name], c.public_prefix) for c in self.config.connectors if c.name in self.connectors]
        self.catalog.set_connectors(ordered)
        return self.catalog.rebuild(strict=strict)

    async def _start_filters(self, filters: list[Filter]) -> None:
        for flt in filters:
            start = getattr(flt, "start", None)
            if start is not None:
                await start()

    async def _stop_filters(self, filters: list[Filter]) -> None:
        for flt in reversed(filters):
            stop = getattr(flt, "stop", None)
            if stop is not None:
                try:
                    await stop()
                except Exception:
                    log.exception("stopping filter %s failed", type(flt).__name__)

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
        started = await self._start_connectors(new, only=to_start)
        previous = self.connectors
        self.config = new
        self.connectors = {**{n: previous[n] for n in kept}, **started}
        try:
            changed = self._install_catalog(strict=True)
        except ConfigError:
            for connector in started.values():
                await connector.stop()
            self.config, self.connectors = old, previous
            self._install_catalog(strict=False)
            raise
        if to_stop:
            # Calls in flight may still run on the replaced connectors: stop those when the calls
            # finish (within the shutdown grace period), so that a reload loses nothing.
            self.spawn(self._retire([previous[name] for name in to_stop]))
        self.catalog.page_size = new.gateway.page_size
        if any(getattr(old, s) != getattr(new, s) for s in _POLICY_SECTIONS):
            filters = _build_filters(self)
            await self._start_filters(filters)
            old_filters, self.filters = self.filters, filters
            self.authenticator = _build_authenticator(self)
            self.dispatcher = Dispatcher(self, filters)
            await self._stop_filters(old_filters)
        else:
            self.dispatcher = Dispatcher(self, self.filters)
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

    async def drain(self, grace_s: float | None = None) -> None:
        """Stop accepting sessions and wait (up to the grace period) for in-flight requests."""
        self.ready = False
        self.draining = True
        grace = self.config.gateway.shutdown_grace_s if grace_s is None else grace_s
        deadline = time.monotonic() + grace
        while True:
            tasks = [t for s in list(self.sessions.values()) for t in s.inflight_tasks()]
            remaining = deadline - time.monotonic()
            if not tasks or remaining <= 0:
                return
            await asyncio.wait(tasks, timeout=remaining)

    async def stop(self, grace_s: float | None = None) -> None:
        if not self.draining:
            await self.drain(grace_s)
        for session in list(self.sessions.values()):
            await session.close()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*list(self._background), return_exceptions=True)  # retired connectors stop
        await asyncio.gather(*(c.stop() for c in self.connectors.values()), return_exceptions=True)
        await self._stop_filters(self.filters)
        if self._rebuild_handle is not None:
            self._rebuild_handle.cancel()

    # -- sessions -----------------------------------------------------------------------------
    def add_session(self, session: Session) -> None:
        self.sessions[session.id] = session

    async def session_closed(self, session: Session) -> None:
        self.sessions.pop(session.id, None)
        for uri in list(session.subscriptions):
            watchers = self._subscribers.get(uri)
            if watchers is not None:
                watchers.discard(session)
                if not watchers:
                    del self._subscribers[uri]
                    self._drop_upstream_subscription(uri)
        for connector in list(self.connectors.values()):
            try:
                await connector.session_closed(session.id)
            except Exception:
                log.exception("connector %s failed to release session %s", connector.name, session.id)

    def _drop_upstream_subscription(self, public_uri: str) -> None:
        try:
            connector, local, _ = self.catalog.resource_owner(public_uri)
        except Exception:
            return
        self.spawn(connector.unsubscribe(local, None))  # type: ignore[arg-type]

    def client_roots_changed(self, session: Session) -> None:
        for connector in self.connectors.values():
            hook = getattr(connector, "roots_changed", None)
            if hook is not None:
                hook(session)

    async def subscribe(self, session: Session, public_uri: str, connector: Connector, local: str,
                        ctx: CallContext) -> None:
        watchers = self._subscribers.setdefault(public_uri, set())
        first = not watchers
        watchers.add(session)
        if first:
            try:
                await connector.subscribe(local, ctx)
            except BaseException:
                watchers.discard(session)
                if not watchers:
                    self._subscribers.pop(public_uri, None)
                raise

    async def unsubscribe(self, session: Session, public_uri: str, connector: Connector, local: str,
                          ctx: CallContext) -> None:
        watchers = self._subscribers.get(public_uri)
        if not watchers or session not in watchers:
            return
        watchers.discard(session)
        if not watchers:
            del self._subscribers[public_uri]
            await connector.unsubscribe(local, ctx)

    # -- events from connectors ---------------------------------------------------------------
    def spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def broadcast(self, method: str, params: dict[str, Any] | None = None) -> None:
        for session in list(self.sessions.values()):
            if session.state == "ready":
                self.spawn(session.notify(method, params))

    def schedule_rebuild(self) -> None:
        """Coalesce change reports: one rebuild per loop iteration however many arrive."""
        if self._rebuild_handle is None:
            self._rebuild_handle = asyncio.get_running_loop().call_soon(self._rebuild)

    def _rebuild(self) -> None:
        self._rebuild_handle = None
        self._announce(self.catalog.rebuild(strict=False))

    def _announce(self, changed: set[str]) -> None:
        for method in sorted({_LIST_CHANGED[k] for k in changed}):
            self.broadcast(method)

    def resource_updated(self, connector_name: str, local_uri: str) -> None:
        public = self.catalog.public_uri(connector_name, local_uri)
        for session in list(self._subscribers.get(public, ())):
            self.spawn(session.notify("notifications/resources/updated", {"uri": public}))

    # -- health -------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """Readiness detail: the gateway's state and every connector's health."""
        connectors: dict[str, Any] = {}
        for cfg in self.config.connectors:
            if cfg.name in self.failed:
                connectors[cfg.name] = {"up": False, "detail": self.failed[cfg.name]}
            elif cfg.name in self.connectors:
                h = self.connectors[cfg.name].health()
                connectors[cfg.name] = {"up": h.up, "detail": h.detail} if h.detail else {"up": h.up}
        return {"ready": self.ready and not self.draining, "draining": self.draining,
                "sessions": len(self.sessions), "connectors": connectors}
