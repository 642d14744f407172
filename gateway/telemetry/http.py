"""``GET /metrics`` for Prometheus, on the gateway's HTTP app or on a port of its own.

* :func:`add_routes` adds ``/metrics`` to the gateway's aiohttp app (the HTTP app calls it). When
  ``telemetry.metrics_port`` is set the route is *not* added there: metrics then live only on
  their own port, which a NetworkPolicy can open to the monitoring namespace alone, and the
  public port does not reveal tool names.
* :func:`start_metrics_server` serves ``/metrics`` (and a trivial ``/healthz``) on
  ``telemetry.metrics_port``; the gateway starts it and stops it after the last request.

The exposition is rendered in a worker thread: the process collector reads /proc, and a large
registry takes milliseconds to render, neither of which should stall the event loop serving MCP.
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS_TYPE
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from gateway.config import TelemetryConfig
from gateway.telemetry import metrics

__all__ = ["add_routes", "metrics_handler", "start_metrics_server", "render"]


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


def add_routes(app: web.Application, telemetry: TelemetryConfig) -> None:
    """Add ``GET /metrics`` unless metrics are off or served on their own port."""
    if not telemetry.metrics or telemetry.metrics_port is not None:
        return
    app.router.add_get("/metrics", metrics_handler)


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def start_metrics_server(host: str, port: int) -> web.AppRunner:
    """Serve ``/metrics`` on ``port`` of ``host`` (the gateway's own host); returns the runner,
    whose ``cleanup()`` stops it. Port 0 picks a free port: see ``runner.addresses``."""
    app = web.Application()
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/healthz", _healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner
