"""Core overhead: ``ping`` and ``tools/list`` through the gateway's Streamable HTTP endpoint next to
a bare aiohttp handler that returns the same JSON bytes (the floor), measured in one run on loopback.

    .venv/bin/python bench/core.py [--iterations N] [--concurrency C] [--tools T]

Each server runs in its own child process (one core each, like production); the client is a raw
aiohttp client in this process with an already initialized session. For every operation the table
shows p50/p99 latency of sequential requests and the throughput with C concurrent clients, for the
gateway, for the floor, and their ratio. The gateway runs the core only (audit and metrics off) with
a ``testkit`` connector serving T tools on one page. ``BENCH_ITERATIONS`` overrides the iteration
count (the smoke test runs with a handful).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

__all__ = ["main"]

PROTOCOL = "2025-11-25"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "MCP-Protocol-Version": PROTOCOL}
BODIES = {
    "ping": json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode(),
    "tools/list": json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode(),
}
_EXTRA_TOOLS = 5  # testkit's slow, progress, sample, log and ask tools


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the two servers (child processes) ------------------------------------------------------------

async def _serve_gateway(port: int, tools: int) -> None:
    from aiohttp import web

    from connectors import registry
    from gateway.app import Gateway
    from gateway.config import parse_config
    from gateway.transports.http_app import build_app
    from tests.e2e.testkit import KIND

    registry.KINDS["testkit"] = KIND
    config = parse_config(f"""
audit: {{enabled: false}}
telemetry: {{metrics: false}}
gateway: {{name: bench, page_size: {tools + _EXTRA_TOOLS}, log_level: warning}}
connectors:
  - {{name: kit, type: testkit, tools: {tools}}}
""", base_dir=REPO)
    gateway = Gateway(config)
    await gateway.start()
    runner = web.AppRunner(build_app(gateway), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


async def _serve_floor(port: int, replies: dict[str, bytes]) -> None:
    from aiohttp import web

    async def handler(request: web.Request) -> web.Response:
        await request.read()  # the gateway reads the body too
        return web.Response(body=replies[request.path], content_type="application/json")

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/ping", handler)
    app.router.add_post("/list", handler)
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


def _spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), *args], cwd=REPO,
                            stdout=subprocess.DEVNULL)


async def _wait_ready(http: aiohttp.ClientSession, url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            async with http.get(url + "/healthz") as resp:
                if resp.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{url} did not become ready")


# -- measuring -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Result:
    p50_ms: float
    p99_ms: float
    rps: float


Call = Callable[[], Awaitable[None]]


def _post(http: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str], expect: bytes) -> Call:
    async def call() -> None:
        async with http.post(url, data=body, headers=headers) as resp:
            data = await resp.read()
        if resp.status != 200 or data != expect:
            raise RuntimeError(f"unexpected reply from {url}: {resp.status} {data[:200]!r}")

    return call


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def _sequential(call: Call, n: int) -> Result:
    samples = []
    start = time.perf_counter()
    for _ in range(n):
        t0 = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    return Result(statistics.median(samples) * 1000, _percentile(samples, 0.99), n / elapsed)


async def _concurrent(call: Call, n: int, clients: int) -> Result:
    samples: list[float] = []
    per_client = max(1, n // clients)

    async def worker() -> None:
        for _ in range(per_client):
            t0 = time.perf_counter()
            await call()
            samples.append(time.perf_counter() - t0)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    elapsed = time.perf_counter() - start
    return Result(statistics.median(samples) * 1000, _percentile(samples, 0.99), len(samples) / elapsed)


async def _run(iterations: int, clients: int, tools: int) -> list[tuple[str, str, Result, Result]]:
    gw_port, floor_port = _free_port(), _free_port()
    gateway = _spawn("--serve-gateway", str(gw_port), "--tools", str(tools))
    floor: subprocess.Popen[bytes] | None = None
    rows = []
    try:
        connector = aiohttp.TCPConnector(limit=clients)
        async with aiohttp.ClientSession(connector=connector) as http:
            gw_url = f"http://127.0.0.1:{gw_port}"
            await _wait_ready(http, gw_url, gateway)
            init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                    "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
            async with http.post(gw_url + "/mcp", json=init, headers=HEADERS) as resp:
                session_headers = {**HEADERS, "Mcp-Session-Id": resp.headers["Mcp-Session-Id"]}
            async with http.post(gw_url + "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                                 headers=session_headers) as resp:
                assert resp.status == 202
            expected = {}
            for op, body in BODIES.items():
                async with http.post(gw_url + "/mcp", data=body, headers=session_headers) as resp:
                    expected[op] = await resp.read()
            assert len(json.loads(expected["tools/list"])["result"]["tools"]) == tools + _EXTRA_TOOLS
            with tempfile.TemporaryDirectory() as tmp:
                files = {op: Path(tmp) / f"{i}.json" for i, op in enumerate(BODIES)}
                for op, path in files.items():
                    path.write_bytes(expected[op])
                floor = _spawn("--serve-floor", str(floor_port), str(files["ping"]), str(files["tools/list"]))
                floor_url = f"http://127.0.0.1:{floor_port}"
                await _wait_ready(http, floor_url, floor)
            for op, path in (("ping", "/ping"), ("tools/list", "/list")):
                through = _post(http, gw_url + "/mcp", BODIES[op], session_headers, expected[op])
                bare = _post(http, floor_url + path, BODIES[op], session_headers, expected[op])
                for call in (through, bare):  # warm up both
                    await _sequential(call, max(5, iterations // 20))
                rows.append((op, "sequential", await _sequential(through, iterations), await _sequential(bare, iterations)))
                rows.append((op, f"{clients} clients", await _concurrent(through, iterations, clients),
                             await _concurrent(bare, iterations, clients)))
    finally:
        for proc in (gateway, floor):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=10)
    return rows


def _table(rows: list[tuple[str, str, Result, Result]], tools: int, iterations: int) -> str:
    head = (f"{'operation':<12} {'mode':<12} {'p50 gw':>8} {'p50 floor':>9} {'ratio':>6} {'p99 gw':>8} "
            f"{'p99 floor':>9} {'ratio':>6} {'req/s gw':>9} {'req/s floor':>11} {'ratio':>6}")
    lines = [f"core overhead, Streamable HTTP on loopback ({iterations} requests per cell, latencies in ms, "
             f"tools/list = {tools + _EXTRA_TOOLS} tools)", head, "-" * len(head)]
    for op, mode, gw, floor in rows:
        lines.append(f"{op:<12} {mode:<12} {gw.p50_ms:>8.3f} {floor.p50_ms:>9.3f} {gw.p50_ms / floor.p50_ms:>5.2f}x "
                     f"{gw.p99_ms:>8.3f} {floor.p99_ms:>9.3f} {gw.p99_ms / floor.p99_ms:>5.2f}x "
                     f"{gw.rps:>9.0f} {floor.rps:>11.0f} {floor.rps / gw.rps:>5.2f}x")
    lines.append("ratio = gateway / floor for latency, floor / gateway for throughput (1.00x = no overhead)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=int(os.environ.get("BENCH_ITERATIONS", "2000")))
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--tools", type=int, default=46)
    parser.add_argument("--serve-gateway", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve-floor", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_gateway is not None:
        asyncio.run(_serve_gateway(args.serve_gateway, args.tools))
        return 0
    if args.serve_floor is not None:
        port, ping_file, list_file = args.serve_floor
        replies = {"/ping": Path(ping_file).read_bytes(), "/list": Path(list_file).read_bytes()}
        asyncio.run(_serve_floor(int(port), replies))
        return 0
    rows = asyncio.run(_run(args.iterations, args.concurrency, args.tools))
    print(_table(rows, args.tools, args.iterations))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
