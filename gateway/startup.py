"""Starting connectors: :func:`start_connector` (with :class:`GatewayEvents`, the
:class:`~connectors.base.ConnectorEvents` forwarding to the gateway through :class:`EventsHost`),
and the connectors whose start failed, started again in the background until they come up.

A connector's ``start`` may raise (an OpenAPI spec URL answering 404 or unreachable, a database
refusing the role, an authorization refused): the gateway serves without it and hands it here.
:class:`StartRetries` attempts it again after a capped exponential backoff with jitter
(``gateway.start_retry``: :class:`connectors.backoff.Backoff`), each attempt building a fresh
connector from its config; the first one that starts is handed to ``adopt`` (the gateway puts it
in the catalog and every session gets ``list_changed``). Connectors that stay up but lose their
backend (the MCP connector, the SQL monitor) retry by themselves: they never come here.

Logging: the first failure of a connector is the gateway's ERROR at start; every failed retry is
one WARNING, the whole error only when it differs from the previous one. A reload or the
gateway's stop cancels the retries (a reload starts what is still failing again itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol

from connectors.backoff import Backoff
from connectors.base import Connector, Health
from connectors.config import ConnectorConfig
from gateway.config import RelayLimits, StartRetry
from gateway.relay_gate import RelayGate, admit_broadcast
from gateway.subscriptions import Subscriptions
from gateway.telemetry import metrics
from gateway.telemetry.instrumentation import ConnectorInstrumentation

__all__ = ["StartRetries", "EventsHost", "GatewayEvents", "start_connector"]

log = logging.getLogger("gateway.startup")
# A connector's health changes and failed start clean-ups are logged as the gateway's (as before the split).
app_log = logging.getLogger("gateway.app")

Starter = Callable[[ConnectorConfig], Awaitable[Connector]]


class StartRetries:
    """The background start attempts of the connectors whose start failed, one task each."""

    def __init__(self, settings: StartRetry, start: Starter, adopt: Callable[[Connector], None], *,
                 rand: Callable[[], float] = random.random, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        """``start`` builds and starts one connector (raising what failed; it leaves nothing
        running then); ``adopt`` takes one that started. ``rand``, ``clock``, ``sleep``: for tests."""
        self.settings = settings
        self._start = start
        self._adopt = adopt
        self._rand = rand
        self._clock = clock
        self._sleep = sleep
        self._backoff: dict[str, Backoff] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def schedule(self, cfg: ConnectorConfig, error: str) -> None:
        """``cfg``'s connector failed to start with ``error``: attempt it again after a delay."""
        self._cancel(cfg.name)
        backoff = Backoff(self.settings.initial_s, self.settings.max_s, rand=self._rand, clock=self._clock)
        self._backoff[cfg.name] = backoff
        delay = backoff.failed(error).delay_s
        log.warning("connector %s: next start attempt in %.1f s", cfg.name, delay)
        self._tasks[cfg.name] = asyncio.create_task(self._run(cfg, backoff, delay), name=f"start-retry-{cfg.name}")

    async def _run(self, cfg: ConnectorConfig, backoff: Backoff, delay: float) -> None:
        while True:
            await self._sleep(delay)
            try:
                connector = await self._start(cfg)
            except Exception as exc:  # control flow: every failure is retried, and said once per attempt
                failure = backoff.failed(str(exc) or type(exc).__name__)
                delay = failure.delay_s
                if failure.repeated:
                    log.warning("connector %s still fails to start (attempt %d, same error); next attempt in %.1f s",
                                cfg.name, failure.attempts, delay)
                else:
                    log.warning("connector %s failed to start (attempt %d): %s; next attempt in %.1f s",
                                cfg.name, failure.attempts, backoff.last_error, delay)
                continue
            attempts = backoff.attempts
            backoff.succeeded()
            self._tasks.pop(cfg.name, None)
            self._backoff.pop(cfg.name, None)
            log.info("connector %s started after %d failed attempt%s", cfg.name, attempts, "s" * (attempts != 1))
            self._adopt(connector)
            return

    def state(self, name: str) -> dict[str, Any] | None:
        """``attempts``, ``last_error``, ``next_attempt_in_s`` of a connector being retried, else None."""
        backoff = self._backoff.get(name)
        return backoff.snapshot() if backoff is not None else None

    def _cancel(self, name: str) -> asyncio.Task[None] | None:
        self._backoff.pop(name, None)
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()
        return task

    async def cancel(self) -> None:
        """Stop every retry (a reload or the gateway's stop); an attempt under way is cancelled,
        and ``start`` leaves nothing of it running."""
        tasks = [t for t in (self._cancel(name) for name in list(self._tasks)) if t is not None]
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


class EventsHost(Protocol):
    """What a started connector's events reach of the gateway."""

    @property
    def subscriptions(self) -> Subscriptions: ...
    @property
    def relay_limits(self) -> RelayLimits: ...
    @property
    def last_errors(self) -> MutableMapping[str, str]: ...
    def schedule_rebuild(self, announced: frozenset[str] = frozenset()) -> None: ...
    def broadcast(self, method: str, params: dict[str, Any] | None = None) -> None: ...


class GatewayEvents:
    """The ConnectorEvents a connector is started with: forwards to its gateway."""

    __slots__ = ("gateway", "name", "_relay")

    def __init__(self, gateway: EventsHost, name: str) -> None:
        self.gateway = gateway
        self.name = name
        self._relay = RelayGate(lambda: gateway.relay_limits)  # its log messages of no call, to all

    def components_changed(self, announced: frozenset[str] = frozenset()) -> None:
        self.gateway.schedule_rebuild(announced)

    def resource_updated(self, uri: str) -> None:
        self.gateway.subscriptions.resource_updated(self.name, uri)

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        params: dict[str, Any] = {"level": level, "data": data, "logger": logger or self.name}
        if admit_broadcast(self._relay, self.name, params):
            self.gateway.broadcast("notifications/message", params)

    def health_changed(self, health: Health) -> None:
        if not health.up and health.detail:
            self.gateway.last_errors[self.name] = health.detail
        app_log.log(logging.INFO if health.up else logging.WARNING, "connector %s is %s%s", self.name,
                    "up" if health.up else "down", f": {health.detail}" if health.detail else "")
        metrics.connector_health_changed(self.name, health.up, self)
        self.gateway.schedule_rebuild()


async def start_connector(connector: Connector, gateway: EventsHost) -> None:
    """Start one connector with its :class:`GatewayEvents` and instrumentation; on any failure (a
    cancellation included) nothing of it runs on."""
    try:
        await connector.start(GatewayEvents(gateway, connector.name),
                              ConnectorInstrumentation(connector.name, connector.kind))
    except BaseException:
        try:
            await asyncio.shield(connector.stop())
        except Exception:  # what start raised is the news; a half-started stop failing is a footnote
            app_log.exception("stopping connector %s after its failed start failed", connector.name)
        raise
