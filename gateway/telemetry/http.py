"""``GET /metrics`` for Prometheus, on the gateway's HTTP app or on a port of its own.

* :func:`add_routes` adds ``/metrics`` to the gateway's aiohttp app (the HTTP app calls it, with a
  handler that asks for a credential when auth is on: the exposition names tools and connectors).
  When ``telemetry.metrics_port`` is set the route is *not* added there: metrics then live only
  on their own port, which a NetworkPolicy can open to the monitoring namespace alone, and the
  public port does not reveal tool names.
* :func:`start_metrics_server` serves ``/metrics``, a trivial ``/healthz`` and ``/readyz`` with
  the full detail (connectors, their errors, sessions: see :func:`readiness`) and, given its
  handler, the status page (:mod:`gateway.status`) on ``telemetry.metrics_port``; the gateway starts it and stops it after the last request.

The exposition is rendered in a worker thread: the process collector reads /proc, and a large
registry takes milliseconds to render, neither of which should stall the event loop serving MCP.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS_TYPE
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from gateway.config import TelemetryConfig
from gateway.telemetry import metrics

__all__ = ["add_routes", "metrics_handler", "start_metrics_server", "render", "readiness"]


def render(openmetrics: bool = False) -> tuple[bytes, str]:
    """The current exposition and its content type."""
    if openmetrics:
        return generate_openmetrics(metrics.REGISTRY), OPENMETRICS_TYPE  # type: ignore[no-untyped-call]
    return generate_latest(metrics.REGISTRY), CONTENT_TYPE_LATEST


async def metrics_handler(request: web.Request) -> web.Response:
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
                               status: Handler | None = None) -> web.AppRunner:
    """Serve ``/metrics`` on ``port`` of ``host`` (the gateway's own host), ``/readyz`` with
    the detail ``health()`` returns and ``/status`` served by ``status``; returns the runner, whose
    ``cleanup()`` stops it. Port 0 picks a free port: see ``runner.addresses``."""
    app = web.Application()
    app.router.add_get("/metrics", metrics_handler)
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
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner
