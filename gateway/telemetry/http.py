"""``GET /metrics`` for Prometheus, on the gateway's HTTP app or on a port of its own.

* :func:`add_routes` adds ``/metrics`` to the gateway's aiohttp app (the HTTP app calls it, with a
  handler that asks for a credential when auth is on: the exposition names tools and connectors).
  When ``telemetry.metrics_port`` is set the route is *not* added there: metrics then live only
  on their own port, which a NetworkPolicy can open to the monitoring namespace alone, and the
  public port does not reveal tool names.
* :func:`start_metrics_server` serves ``/metrics``, a trivial ``/healthz`` and ``/readyz`` with
  the full detail (connectors, their errors, sessions: see :func:`readiness`) and, given its
  handler, the status page (:mod:`gateway.status`) on ``telemetry.metrics_port``; the gateway starts it and stops it after the last request.
  A worker of ``serve --workers N`` serves it on a loopback socket the supervisor made instead
  (``sock``): the supervisor owns the metrics port and merges the workers (:mod:`.supervisor`).
  :class:`MetricsListener` is the gateway's one such server, started, moved or stopped as the
  ``telemetry`` section of each (re)loaded config asks.
* :func:`use_aggregate`: in a worker, ``/metrics`` on the main port answers with the supervisor's
  merged exposition, fetched from its loopback URL, not this process's own numbers (a scrape
  would see one worker at random). The worker's own listener keeps serving its own registry.

The exposition is rendered in a worker thread: the process collector reads /proc, and a large
registry takes milliseconds to render, neither of which should stall the event loop serving MCP.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import ClientError, ClientSession, ClientTimeout, web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS_TYPE
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from gateway.config import TelemetryConfig
from gateway.protocol.errors import ConfigError
from gateway.telemetry import metrics

__all__ = ["add_routes", "metrics_handler", "start_metrics_server", "MetricsListener", "render", "readiness",
           "use_aggregate"]

# The supervisor's merged /metrics (serve --workers N without telemetry.metrics_port), or None.
_aggregate_url: str | None = None
AGGREGATE_TIMEOUT_S = 10.0  # the supervisor's own fetches are bounded at 5 s each, in parallel


# The listener's warnings are the gateway's (logged as gateway.app, as they always were).
_app_log = logging.getLogger("gateway.app")


def use_aggregate(url: str | None) -> None:
    """Answer ``/metrics`` on the main port from ``url`` (the supervisor's), or locally (None)."""
    global _aggregate_url
    _aggregate_url = url


def render(openmetrics: bool = False) -> tuple[bytes, str]:
    """The current exposition and its content type."""
    if openmetrics:
        return generate_openmetrics(metrics.REGISTRY), OPENMETRICS_TYPE  # type: ignore[no-untyped-call]
    return generate_latest(metrics.REGISTRY), CONTENT_TYPE_LATEST


async def metrics_handler(request: web.Request) -> web.Response:
    """``/metrics`` of the main port: this process's registry, or the supervisor's merged one."""
    if _aggregate_url is not None:
        return await _from_supervisor(_aggregate_url)
    return await _own_metrics(request)


async def _from_supervisor(url: str) -> web.Response:
    try:
        async with ClientSession(timeout=ClientTimeout(total=AGGREGATE_TIMEOUT_S)) as client, \
                client.get(url) as upstream:
            body = await upstream.read()
            response = web.Response(status=upstream.status, body=body)
            response.headers["Content-Type"] = upstream.headers.get("Content-Type", "text/plain")
            return response
    except (ClientError, TimeoutError) as exc:
        return web.Response(status=503, text=f"the workers' supervisor did not answer /metrics: "
                                             f"{type(exc).__name__}: {exc}")


async def _own_metrics(request: web.Request) -> web.Response:
    openmetrics = "application/openmetrics-text" in request.headers.get("Accept", "")
    body, content_type = await asyncio.to_thread(render, openmetrics)
    response = web.Response(body=body)
    # Set the header directly: aiohttp's content_type= rejects parameters such as "version=0.0.4".
    response.headers["Content-Type"] = content_type
    return response


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def add_routes(app: web.Application, telemetry: TelemetryConfig, handler: Handler = metrics_handler) -> None:
    """Add ``GET /metrics`` (served by ``handler``) unless metrics are off or on their own port."""
    if not telemetry.metrics or telemetry.metrics_port is not None:
        return
    app.router.add_get("/metrics", handler)


def readiness(health: dict[str, Any], strict: bool, verbose: bool) -> web.Response:
    """``/readyz``: 200 when ready (and, if ``strict``, every connector up), else 503; the body is
    ``{"status": ...}`` alone unless ``verbose``, then with the whole ``health`` detail."""
    ok = bool(health["ready"])
    degraded = not all(c["up"] for c in health["connectors"].values())
    if strict and degraded:
        ok = False
    status = "draining" if health.get("draining") else "starting" if not health["ready"] \
        else "degraded" if strict and degraded else "ready"
    body = {"status": status, **health} if verbose else {"status": status}
    return web.Response(status=200 if ok else 503, text=json.dumps(body), content_type="application/json")


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def start_metrics_server(host: str, port: int, health: Callable[[], dict[str, Any]] | None = None,
                               status: Handler | None = None, sock: socket.socket | None = None) -> web.AppRunner:
    """Serve ``/metrics`` (this process's registry) on ``port`` of ``host`` (the gateway's own
    host), or on the listening socket ``sock`` when given, ``/readyz`` with the detail ``health()``
    returns and ``/status`` served by ``status``; returns the runner, whose ``cleanup()`` stops it.
    Port 0 picks a free port: see ``runner.addresses``."""
    app = web.Application()
    app.router.add_get("/metrics", _own_metrics)
    if status is not None:
        app.router.add_get("/status", status)
    app.router.add_get("/healthz", _healthz)
    if health is not None:
        ready = health

        async def readyz(request: web.Request) -> web.Response:
            return readiness(ready(), request.query.get("strict") in ("1", "true"), verbose=True)

        app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site: web.BaseSite = web.SockSite(runner, sock) if sock is not None else web.TCPSite(runner, host, port)
    await site.start()
    return runner


class MetricsListener:
    """The gateway's own ``/metrics`` listener (:func:`start_metrics_server`): on
    ``telemetry.metrics_port``, or on a worker's socket from the supervisor."""

    def __init__(self) -> None:
        self._server: web.AppRunner | None = None
        self._port: int | None = None

    async def apply(self, telemetry: TelemetryConfig, host: str, health: Callable[[], dict[str, Any]],
                    status: Handler, *, sock: socket.socket | None = None, optional: bool = False) -> None:
        """Serve as ``telemetry`` asks (a reload that keeps the port keeps the server). A port that
        is taken is a ConfigError, or a warning and no listener when ``optional`` (a stdio gateway
        sharing the deployment's config: the stdio client matters more than a second /metrics)."""
        if sock is not None:
            # A worker: its listener is the supervisor's socket whatever the port says (the port
            # is the supervisor's), started once and kept across reloads.
            if self._server is None:
                self._server = await start_metrics_server("", 0, health, status, sock=sock)
            return
        port = telemetry.metrics_port if telemetry.metrics else None
        if self._server is not None and port == self._port:
            return  # a reload that kept the port keeps the server (and its open scrapes)
        await self.close()
        if port is not None:
            try:
                self._server = await start_metrics_server(host, port, health, status)
            except OSError as exc:  # the port is taken: a config problem, said as one
                if not optional:
                    raise ConfigError(f"cannot serve /metrics on port {port}: {exc.strerror or exc}",
                                      "telemetry.metrics_port") from None
                _app_log.warning("telemetry.metrics_port %s: %s; this stdio gateway serves no /metrics", port,
                                 exc.strerror or exc)
                port = None
        self._port = port

    async def close(self) -> None:
        if self._server is not None:
            await self._server.cleanup()
            self._server = None
