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
* :func:`use_aggregate`: in a worker, ``/metrics`` on the main port answers with the supervisor's
  merged exposition, fetched from its loopback URL, not this process's own numbers (a scrape
  would see one worker at random). The worker's own listener keeps serving its own registry.

The exposition is rendered in a worker thread: the process collector reads /proc, and a large
registry takes milliseconds to render, neither of which should stall the event loop serving MCP.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import ClientError, ClientSession, ClientTimeout, web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS_TYPE
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from gateway.config import TelemetryConfig
from gateway.telemetry import metrics

__all__ = ["add_routes", "metrics_handler", "start_metrics_server", "render", "readiness", "use_aggregate"]

# The supervisor's merged /metrics (serve --workers N without telemetry.metrics_port), or None.
_aggregate_url: str | None = None
AGGREGATE_TIMEOUT_S = 10.0  # the supervisor's own fetches are bounded at 5 s each, in parallel


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
