"""Telemetry overhead: metrics + tracing on versus off, per call, in one run.

Two gateways in this process serve the same calls through the whole filter chain (the dispatcher,
as a transport would call it, without HTTP so the network does not drown the difference):

* ``prompts/get`` on a static connector — the gateway alone;
* ``tools/call`` on an OpenAPI connector against a loopback REST backend — the gateway plus the
  backend child span and ``traceparent`` injection.

``off``: ``telemetry: {metrics: false}`` and no OTLP endpoint (no telemetry filter at all).
``on``: metrics on and tracing on at sample ratio 1.0, spans batched to an exporter that drops
them (as OTLP would ship them from its background thread). Rounds alternate off/on so drift
affects both alike; the table shows p50/p90 per call and the added p50.

Target (issue 7): added p50 <= 0.2 ms per call.
Run: ``.venv/bin/python bench/telemetry.py [--calls 2000] [--rounds 6]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiohttp import web
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.app import Gateway  # noqa: E402
from gateway.config import parse_config  # noqa: E402
from gateway.context import Principal  # noqa: E402
from gateway.session import Session  # noqa: E402
from gateway.telemetry import tracing  # noqa: E402

TARGET_MS = 0.2


class DropExporter(SpanExporter):
    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def bench_session(gw: Gateway) -> Session:
    """A real, initialized session object whose messages go nowhere (no transport)."""

    async def send(message: dict[str, Any]) -> None:
        pass

    session = Session(gw, "streamable_http", send, Principal("bench", kind="api_key"))
    session.lifecycle.initialized()
    session.protocol_version = "2025-11-25"
    return session


async def start_backend() -> tuple[web.AppRunner, str]:
    state: dict[str, str] = {}

    async def spec(request: web.Request) -> web.Response:
        return web.json_response({
            "openapi": "3.0.3", "info": {"title": "bench", "version": "1"}, "servers": [{"url": state["url"]}],
            "paths": {"/items/{id}": {"get": {"operationId": "getItem", "parameters": [
                {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "ok"}}}}}})

    async def item(request: web.Request) -> web.Response:
        return web.json_response({"id": request.match_info["id"]})

    app = web.Application()
    app.router.add_get("/openapi.json", spec)
    app.router.add_get("/items/{id}", item)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    state["url"] = f"http://127.0.0.1:{runner.addresses[0][1]}"
    return runner, state["url"]


def config(url: str, metrics: bool) -> str:
    return f"""
audit: {{enabled: false}}
telemetry: {{metrics: {str(metrics).lower()}}}
connectors:
  - name: team
    type: static
    prompts: [{{name: hello, arguments: [{{name: who}}], messages: [{{text: "hello {{who}}"}}]}}]
  - name: api
    type: openapi
    spec: {url}/openapi.json
    retries: 0
"""


CALLS = {
    "prompts/get (static)": ("prompts/get", {"name": "team_hello", "arguments": {"who": "ops"}}),
    "tools/call (openapi)": ("tools/call", {"name": "api_getItem", "arguments": {"id": "7"}}),
}


async def measure(gw: Gateway, method: str, params: dict[str, Any], n: int) -> list[float]:
    session = bench_session(gw)
    dispatch = gw.dispatcher.dispatch
    out = []
    for i in range(n):
        start = time.perf_counter()
        await dispatch(session, i, method, params)
        out.append(time.perf_counter() - start)
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0


async def run(calls: int, rounds: int) -> float:
    runner, url = await start_backend()
    off_cfg = parse_config(config(url, metrics=False))
    on_cfg = parse_config(config(url, metrics=True))
    tracing.configure(off_cfg.telemetry)
    off = Gateway(off_cfg)
    await off.start()
    tracing.configure(on_cfg.telemetry)
    on = Gateway(on_cfg)
    await on.start()
    assert not any(type(f).__name__ == "TelemetryFilter" for f in off.filters)
    assert any(type(f).__name__ == "TelemetryFilter" for f in on.filters)
    exporter = DropExporter()
    samples: dict[tuple[str, str], list[float]] = {}
    worst = 0.0
    try:
        for name, (method, params) in CALLS.items():
            for gw, label in ((off, "off"), (on, "on")):  # warm-up: connection pools, label children
                if label == "on":
                    with tracing.use_exporter(exporter, batch=True):
                        await measure(gw, method, params, 200)
                else:
                    await measure(gw, method, params, 200)
            for _ in range(rounds):
                tracing.configure(off_cfg.telemetry)
                samples.setdefault((name, "off"), []).extend(await measure(off, method, params, calls))
                tracing.configure(on_cfg.telemetry)
                with tracing.use_exporter(exporter, batch=True):
                    samples.setdefault((name, "on"), []).extend(await measure(on, method, params, calls))
    finally:
        await off.stop(grace_s=0)
        await on.stop(grace_s=0)
        await runner.cleanup()

    print(f"calls per row: {calls * rounds} ({rounds} alternating rounds of {calls}); "
          f"spans exported: {exporter.spans}")
    header = f"{'call':<24} {'off p50 ms':>11} {'on p50 ms':>10} {'off p90':>8} {'on p90':>8} {'added p50 ms':>13} {'target':>7}"
    print(header)
    print("-" * len(header))
    for name in CALLS:
        a, b = samples[(name, "off")], samples[(name, "on")]
        added = statistics.median(b) * 1000 - statistics.median(a) * 1000
        worst = max(worst, added)
        verdict = "ok" if added <= TARGET_MS else "OVER"
        print(f"{name:<24} {pct(a, 0.5):>11.3f} {pct(b, 0.5):>10.3f} {pct(a, 0.9):>8.3f} {pct(b, 0.9):>8.3f} "
              f"{added:>13.3f} {verdict:>7}")
    print(f"target: added p50 <= {TARGET_MS} ms per call (metrics + tracing on, sample ratio 1.0)")
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)
    asyncio.run(run(args.calls, args.rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
