"""Proxy overhead: an echo tool called (a) directly, (b) through the gateway, (c) through FastMCP.

Everything runs on loopback, measured in one run, printed as one table:

* the upstream is the official ``mcp`` SDK (2.x ``MCPServer``) serving ``echo`` over Streamable
  HTTP, started as its own process (an ``async`` tool: SDK 2.x runs plain functions in a worker
  thread, a cost no proxy row should inherit);
* (b) is ``mcp-gateway serve`` (own process) chaining it with an ``mcp`` connector
  (``streamable_http``, shared upstream session), configured like the peers it is compared with:
  no audit log, no metrics, so the row is the cost of the proxy path. (b+) is the same gateway
  with its defaults, Prometheus metrics on and the audit log written to SQLite in-process: the
  difference from (b) is what those two features cost per call (their own budgets are measured
  by bench/policy.py and bench/telemetry.py);
* (c) is FastMCP's proxy (``create_proxy``/``as_proxy``) over Streamable HTTP in its own process.
  Its interpreter is ``--fastmcp-python`` if given, else this interpreter when it can import
  ``fastmcp`` (``make bench`` installs the ``bench`` extra into the test venv, beside the SDK).
  Without it, row (c) is reported as skipped;
* (b*) is (b) with the response cache on (``cache:`` on the connector, ``echo`` marked read-only
  by an override): every call after the first is answered from the cache, so the row is the
  gateway without its upstream hop — what a cached call costs next to an uncached one (b);
* (d) is a bare aiohttp relay (no MCP logic: aiohttp server, aiohttp client): what one more HTTP
  hop costs with aiohttp alone. The gateway serves with aiohttp too but talks to Streamable HTTP
  upstreams with its own lean client (``connectors/mcp/http1.py``), which is why it can come out
  cheaper than this row despite doing the MCP work.

"server CPU us/call" is the CPU time (/proc) of the process the callers talk to, per call: for (a)
the upstream itself, for the others the proxy process alone.

The caller is a minimal JSON-RPC client over aiohttp (not the SDK client), so the numbers show
server-side cost rather than client overhead. Each caller has its own MCP session; "8 concurrent"
means 8 sessions calling in a loop at once. Targets (issue 3): (b) adds <= 0.5 ms at p50 over (a),
and keeps >= 50% of (a)'s calls/s with 8 concurrent callers. The last line gives (b+)'s figures
beside them, for information.

The 2026-07-28 rows call the same upstream and the same gateway statelessly (no session; ``_meta``
and the request-metadata headers on every call). The last block puts both revisions side by side
at 1 caller: direct and gateway p50, what the gateway adds (target of issue 12: <= 0.5 ms for the
stateless call, as for sessions), and the CPU per call of the upstream (direct) and of the gateway.
The load average is printed at the start and the end: on a busy machine latency rows are noise,
and CPU per call is the figure to compare.

Run: ``.venv/bin/python bench/proxy.py [--seconds 3] [--concurrency 8]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parent.parent

UPSTREAM = """
import sys
from mcp.server.mcpserver import MCPServer
mcp = MCPServer("bench-echo", log_level="WARNING")
@mcp.tool()
async def echo(text: str) -> str:
    '''Echo the text back.'''
    return text
mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
"""

FASTMCP_PROXY = """
import sys
import fastmcp
url, port = sys.argv[1], int(sys.argv[2])
try:
    from fastmcp.server import create_proxy
    proxy = create_proxy(url, name="bench-proxy")
except ImportError:
    proxy = fastmcp.FastMCP.as_proxy(url, name="bench-proxy")
proxy.run(transport="http", host="127.0.0.1", port=port, log_level="warning", show_banner=False)
"""

# A forwarder built on aiohttp alone that does nothing but relay each POST to the upstream and its
# answer back, with no MCP logic at all: this row's distance from (a) is the cost of one more aiohttp
# hop (server and client) on this machine.
FORWARDER = """
import sys
import aiohttp
from aiohttp import web
upstream, port = sys.argv[1], int(sys.argv[2])
PASS = ("Content-Type", "Accept", "Mcp-Session-Id", "MCP-Protocol-Version")
async def forward(request):
    http = request.app["http"]
    headers = {k: request.headers[k] for k in PASS if k in request.headers}
    async with http.request(request.method, upstream, data=await request.read(), headers=headers) as resp:
        body = await resp.read()
        out = {k: resp.headers[k] for k in ("Content-Type", "Mcp-Session-Id") if k in resp.headers}
        return web.Response(status=resp.status, body=body, headers=out)
async def ctx(app):
    app["http"] = aiohttp.ClientSession()
    yield
    await app["http"].close()
app = web.Application()
app.cleanup_ctx.append(ctx)
app.router.add_route("*", "/mcp", forward)
async def ready(request):
    return web.Response(text="ok")
app.router.add_get("/readyz", ready)
web.run_app(app, host="127.0.0.1", port=port, print=None)
"""

__all__ = ["main", "run_bench"]


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_http(url: str, timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout), aiohttp.ClientSession() as http:
        while True:
            try:
                async with http.get(url) as resp:
                    await resp.read()
                    return
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.05)


@asynccontextmanager
async def process(*argv: str, ready_url: str, env: dict[str, str] | None = None) -> AsyncIterator[int]:
    """Run a server process until the block ends; yields its pid."""
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.DEVNULL,
                                                stderr=asyncio.subprocess.DEVNULL, env={**os.environ, **(env or {})})
    try:
        await wait_http(ready_url)
        yield proc.pid
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except TimeoutError:
                proc.kill()
                await proc.wait()


MODERN = "2026-07-28"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN,
               "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
               "io.modelcontextprotocol/clientCapabilities": {}}


class Caller:
    """One caller over Streamable HTTP, calling ``tools/call`` as fast as it is answered: an MCP
    session (``revision`` 2025-06-18), or stateless requests (``revision`` 2026-07-28, no session,
    ``_meta`` and request-metadata headers on every call)."""

    def __init__(self, http: aiohttp.ClientSession, url: str, tool: str, revision: str = "2025-06-18") -> None:
        self.http, self.url, self.tool, self.revision = http, url, tool, revision
        self.headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if revision == MODERN:
            self.headers.update({"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": tool})
        self.ids = 0
        self.answered = 0.0

    async def _post(self, message: dict) -> dict | None:
        async with self.http.post(self.url, data=json.dumps(message), headers=self.headers) as resp:
            sid = resp.headers.get("mcp-session-id")
            if sid:
                self.headers["mcp-session-id"] = sid
            if resp.status == 202:
                return None
            if resp.status >= 400:
                raise RuntimeError(f"HTTP {resp.status}: {(await resp.text())[:200]}")
            if resp.headers.get("Content-Type", "").startswith("text/event-stream"):
                async for line in resp.content:
                    if line.startswith(b"data:") and len(line) > 7:
                        msg = json.loads(line[5:])
                        if msg.get("id") == message.get("id") and "method" not in msg:
                            # The caller has its answer now (latency stops here); reading the end
                            # of the stream only lets the connection be reused for the next call.
                            self.answered = time.perf_counter()
                            while await resp.content.readany():
                                pass
                            return msg
                raise RuntimeError("stream ended without a response")
            msg = await resp.json()
            self.answered = time.perf_counter()
            return msg

    async def open(self) -> None:
        if self.revision == MODERN:
            return  # nothing to open: no session in this revision
        await self._post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        self.headers["mcp-protocol-version"] = "2025-06-18"
        await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call(self) -> None:
        self.ids += 1
        params: dict[str, Any] = {"name": self.tool, "arguments": {"text": "hello"}}
        if self.revision == MODERN:
            params["_meta"] = MODERN_META
        msg = await self._post({"jsonrpc": "2.0", "id": self.ids, "method": "tools/call", "params": params})
        if msg is None or "result" not in msg or msg["result"].get("isError"):
            raise RuntimeError(f"bad answer: {msg}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Result:
    p50_ms: float
    p99_ms: float
    calls_s: float
    cpu_us: float  # CPU of the process the callers talk to, per call


class Target:
    """A URL with ``concurrency`` open sessions and the samples gathered over all rounds."""

    def __init__(self, http: aiohttp.ClientSession, url: str, tool: str, pid: int, concurrency: int,
                 revision: str = "2025-06-18") -> None:
        self.callers = [Caller(http, url, tool, revision) for _ in range(concurrency)]
        self.pid = pid
        self.latencies: list[float] = []
        self.busy = 0.0
        self.cpu = 0.0

    async def open(self, warmup: int = 30) -> None:
        await asyncio.gather(*(c.open() for c in self.callers))
        for c in self.callers:
            for _ in range(max(1, warmup // len(self.callers))):
                await c.call()

    async def round(self, seconds: float) -> None:
        end = time.perf_counter() + seconds
        latencies = self.latencies

        async def loop(c: Caller) -> None:
            while time.perf_counter() < end:
                t0 = time.perf_counter()
                await c.call()
                latencies.append(c.answered - t0)

        started, cpu = time.perf_counter(), cpu_seconds(self.pid)
        await asyncio.gather(*(loop(c) for c in self.callers))
        self.busy += time.perf_counter() - started
        self.cpu += cpu_seconds(self.pid) - cpu

    def result(self) -> Result:
        lat = sorted(self.latencies)
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        return Result(statistics.median(lat) * 1000, p99 * 1000, len(lat) / self.busy, self.cpu / len(lat) * 1e6)


async def measure(urls: dict[str, tuple[str, str, int]], concurrency: int, seconds: float,
                  rounds: int = 6) -> dict[str, Result]:
    """Interleave the targets in short rounds, so load drifting on the machine hits all alike. A
    label ending in ``2026-07-28`` is called statelessly, at that revision."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        targets = {label: Target(http, url, tool, pid, concurrency, MODERN if label.endswith(MODERN) else "2025-06-18")
                   for label, (url, tool, pid) in urls.items()}
        for t in targets.values():
            await t.open()
        for _ in range(rounds):
            for t in targets.values():
                await t.round(seconds / rounds)
        return {label: t.result() for label, t in targets.items()}


def gateway_config(upstream_url: str, bare: bool = False, cached: bool = False) -> str:
    """The gateway with its defaults (metrics on, audit into ./audit.db next to the config), or
    ``bare``: metrics and audit off, the proxy path alone; ``cached``: echo's results cached."""
    connector: dict[str, Any] = {"name": "up", "type": "mcp", "transport": "streamable_http", "url": upstream_url,
                                 "prefix": ""}
    if cached:
        connector.update(cache={"ttl_s": 3600}, overrides={"echo": {"annotations": {"readOnlyHint": True}}})
    config: dict[str, Any] = {"gateway": {"log_level": "warning"}, "connectors": [connector]}
    if bare:
        config.update({"audit": {"enabled": False}, "telemetry": {"metrics": False}})
    return json.dumps(config)


def write_config(folder: Path, upstream_url: str, bare: bool, cached: bool = False) -> Path:
    folder.mkdir()
    path = folder / "gateway.yaml"
    path.write_text(gateway_config(upstream_url, bare, cached))
    return path


async def start_gateway(stack: contextlib.AsyncExitStack, folder: Path, upstream_url: str, bare: bool,
                        cached: bool = False) -> tuple[str, int]:
    """``mcp-gateway serve`` in its own process; returns its /mcp URL and pid."""
    config = write_config(folder, upstream_url, bare, cached)
    port = free_port()
    pid = await stack.enter_async_context(process(
        sys.executable, "-m", "gateway.cli", "serve", "--config", str(config),
        "--port", str(port), ready_url=f"http://127.0.0.1:{port}/readyz", env={"PYTHONPATH": str(REPO)}))
    return f"http://127.0.0.1:{port}/mcp", pid


async def run_bench(seconds: float, concurrency: int, fastmcp_python: Path | None) -> dict[str, dict[int, Result | None]]:
    up_port, fm_port = free_port(), free_port()
    upstream_url = f"http://127.0.0.1:{up_port}/mcp"
    results: dict[str, dict[int, Result | None]] = {}
    async with contextlib.AsyncExitStack() as stack:
        up_pid = await stack.enter_async_context(process(sys.executable, "-c", UPSTREAM, str(up_port),
                                                         ready_url=upstream_url))
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        gw_url, gw_pid = await start_gateway(stack, tmp / "proxy", upstream_url, bare=True)
        full_url, full_pid = await start_gateway(stack, tmp / "defaults", upstream_url, bare=False)
        cached_url, cached_pid = await start_gateway(stack, tmp / "cached", upstream_url, bare=True, cached=True)
        targets = {"(a) direct": (upstream_url, "echo", up_pid),
                   "(b) gateway": (gw_url, "echo", gw_pid),
                   "(b*) gateway, cached": (cached_url, "echo", cached_pid),
                   "(b+) +audit+metrics": (full_url, "echo", full_pid),
                   f"(a) direct {MODERN}": (upstream_url, "echo", up_pid),
                   f"(b) gateway {MODERN}": (gw_url, "echo", gw_pid)}
        fw_port = free_port()
        fw_pid = await stack.enter_async_context(process(sys.executable, "-c", FORWARDER, upstream_url, str(fw_port),
                                                         ready_url=f"http://127.0.0.1:{fw_port}/readyz"))
        targets["(d) aiohttp relay"] = (f"http://127.0.0.1:{fw_port}/mcp", "echo", fw_pid)
        if fastmcp_python is not None:
            fm_url = f"http://127.0.0.1:{fm_port}/mcp"
            fm_pid = await stack.enter_async_context(process(str(fastmcp_python), "-c", FASTMCP_PROXY, upstream_url,
                                                             str(fm_port), ready_url=fm_url))
            targets["(c) FastMCP proxy"] = (fm_url, "echo", fm_pid)
        for label in targets:
            results[label] = {}
        for n in (1, concurrency):
            for label, r in (await measure(targets, n, seconds * len(targets))).items():
                results[label][n] = r
        if "(c) FastMCP proxy" not in results:
            results["(c) FastMCP proxy"] = {1: None, concurrency: None}
    return results


def table(results: dict[str, dict[int, Result | None]], concurrency: int) -> str:
    head = (f"{'target':<31}{'callers':>8}{'p50 ms':>10}{'p99 ms':>10}{'calls/s':>10}"
            f"{'+p50 ms vs (a)':>16}{'% of (a) calls/s':>18}{'server CPU us/call':>20}")
    lines = [head, "-" * len(head)]
    for label, per in results.items():
        # A 2026-07-28 row is compared with the direct call at that revision.
        direct = results[f"(a) direct {MODERN}" if label.endswith(MODERN) else "(a) direct"]
        for n in (1, concurrency):
            r = per.get(n)
            if r is None:
                lines.append(f"{label:<31}{n:>8}{'skipped (fastmcp not installed)':>84}")
                continue
            d = direct[n]
            assert d is not None
            lines.append(f"{label:<31}{n:>8}{r.p50_ms:>10.3f}{r.p99_ms:>10.3f}{r.calls_s:>10.0f}"
                         f"{r.p50_ms - d.p50_ms:>16.3f}{100 * r.calls_s / d.calls_s:>17.1f}%{r.cpu_us:>20.0f}")
    d1, dn = results["(a) direct"][1], results["(a) direct"][concurrency]
    assert d1 and dn
    lines.append("")
    gw1, gwn = results["(b) gateway"][1], results["(b) gateway"][concurrency]
    full1, fulln = results["(b+) +audit+metrics"][1], results["(b+) +audit+metrics"][concurrency]
    assert gw1 and gwn and full1 and fulln
    added = gw1.p50_ms - d1.p50_ms
    lines.append(f"targets: gateway adds {added:.3f} ms at p50 (<= 0.5: {'met' if added <= 0.5 else 'NOT met'}); "
                 f"keeps {100 * gwn.calls_s / dn.calls_s:.0f}% of direct calls/s at {concurrency} callers "
                 f"(>= 50%: {'met' if gwn.calls_s >= dn.calls_s / 2 else 'NOT met'})")
    lines.append(f"for information: with its default SQLite audit log and metrics, the gateway adds "
                 f"{full1.p50_ms - d1.p50_ms:.3f} ms at p50 and keeps {100 * fulln.calls_s / dn.calls_s:.0f}% "
                 f"of direct calls/s at {concurrency} callers")
    c1, cn = results["(b*) gateway, cached"][1], results["(b*) gateway, cached"][concurrency]
    assert c1 and cn
    lines.append(f"response cache: a cached call takes {c1.p50_ms:.3f} ms at p50 vs {gw1.p50_ms:.3f} ms uncached "
                 f"({c1.p50_ms / gw1.p50_ms:.2f}x); {cn.calls_s:.0f} vs {gwn.calls_s:.0f} calls/s at {concurrency} callers")
    lines.append("")
    lines.extend(revision_summary(results, concurrency))
    return "\n".join(lines)


def revision_summary(results: dict[str, dict[int, Result | None]], concurrency: int) -> list[str]:
    """The issue 12 target, side by side for both paths at 1 caller: what the gateway adds at p50
    over calling the same upstream directly (<= 0.5 ms), and the CPU per call of each process."""
    rows = [(f"{MODERN} (stateless)", f"(a) direct {MODERN}", f"(b) gateway {MODERN}"),
            ("2025-06-18 (session)", "(a) direct", "(b) gateway")]
    head = (f"{'1 caller':<24}{'direct p50 ms':>15}{'gateway p50 ms':>16}{'added ms':>10}{'<= 0.5 ms':>11}"
            f"{'upstream CPU us/call':>22}{'gateway CPU us/call':>21}{f'(at {concurrency} callers)':>18}")
    lines = [f"targets (issue 12): a call through the gateway adds <= 0.5 ms at p50 over the direct call, "
             f"{MODERN} (stateless) as for sessions; CPU per call is /proc time of the process named", head,
             "-" * len(head)]
    for name, direct_label, gateway_label in rows:
        d, g = results[direct_label][1], results[gateway_label][1]
        gn = results[gateway_label][concurrency]
        assert d and g and gn
        added = g.p50_ms - d.p50_ms
        lines.append(f"{name:<24}{d.p50_ms:>15.3f}{g.p50_ms:>16.3f}{added:>+10.3f}{'met' if added <= 0.5 else 'NOT met':>11}"
                     f"{d.cpu_us:>22.0f}{g.cpu_us:>21.0f}{gn.cpu_us:>18.0f}")
    relay, direct = results["(d) aiohttp relay"][1], results["(a) direct"][1]
    assert relay and direct
    lines.append(f"for scale: a bare aiohttp relay (d) adds {relay.p50_ms - direct.p50_ms:+.3f} ms at p50 "
                 f"({relay.cpu_us:.0f} us CPU/call)")
    return lines


def machine_load() -> str:
    """The 1-minute load average against the cores: latency rows are only comparable on a quiet machine."""
    return f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"


def find_fastmcp_python(explicit: Path | None) -> Path | None:
    if explicit is not None:
        return explicit if explicit.exists() else None
    import importlib.util
    return Path(sys.executable) if importlib.util.find_spec("fastmcp") is not None else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per row")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--fastmcp-python", type=Path, default=None,
                        help="interpreter with fastmcp installed (default: see the module docstring)")
    args = parser.parse_args()
    fastmcp_python = find_fastmcp_python(args.fastmcp_python)
    if fastmcp_python is not None:
        import subprocess
        version = subprocess.run([str(fastmcp_python), "-c", "import fastmcp, mcp.types as t; "
                                  "print(fastmcp.__version__, t.LATEST_PROTOCOL_VERSION)"],
                                 capture_output=True, text=True).stdout.split()
        print(f"(c) is fastmcp {version[0] if version else '?'} run by {fastmcp_python}")
    print(f"upstream: mcp SDK echo over Streamable HTTP; {args.seconds:g}s per row, rows interleaved in rounds; "
          f"{machine_load()} at the start")
    results = asyncio.run(run_bench(args.seconds, args.concurrency, fastmcp_python))
    print(table(results, args.concurrency))
    print(f"{machine_load()} at the end")


if __name__ == "__main__":
    main()
