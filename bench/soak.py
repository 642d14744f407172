"""Soak: the gateway proxying an upstream MCP server under steady load, watched for leaks.

The gateway (as shipped: metrics and SQLite audit on) chains the official-SDK echo upstream over
Streamable HTTP (the same processes as ``bench/proxy.py``) while ``--concurrency`` callers call
``echo`` without pause for ``--seconds``. Every ``--every`` seconds it prints the gateway's
resident memory, its open file descriptors, the sockets to the upstream in TIME_WAIT (a
connection closed per call instead of reused would pile them up) and the calls/s of that window.

Verdict at the end: after the first window (warm-up: imports, caches, first connections), memory
may grow by at most 10% and open descriptors by at most 8, and TIME_WAIT stays under 100.

Run: ``.venv/bin/python bench/soak.py [--seconds 60] [--concurrency 8] [--every 5]``.

Faults (issue 19): ``--faults`` (or ``--minutes M``, which implies it and splits M minutes over the
phases) runs mixed load on three connectors at once: ``up`` (the SDK echo upstream behind a TCP
proxy that can reset requests arriving on used keep-alive connections,
``tests/connectors/mcp/resetting_proxy.py``), ``other`` (a second SDK upstream, reached directly),
``notes`` (static resources), ``rest`` (OpenAPI, its backend in this process) and ``db`` (SQL on
SQLite); every caller cycles ``tools/call`` on each, ``resources/read`` and a paged
``tools/list``. Phases, in turn: ``steady``; ``resets`` (5 resets of used connections spread over
the phase); ``kill`` (``up``'s upstream SIGKILLed, started again on the same port after a fifth of
the phase); ``rest`` (the REST backend answers 500 for a third of the phase, then hangs past the
connector's 1 s timeout, then recovers). Each phase prints the requests answered, the errors by
connector and kind, the time ``up`` took to serve again after its upstream came back, RSS and
open descriptors; the run ends with audit rows against answered requests (they must be equal).
Verdict: no errors but on the connector a phase faults (none in ``steady``), at most one failed
call per reset, and audit rows = answered requests. Not covered yet: PostgreSQL backends killed,
the audit store down, hot reload (tests/security and tests/audit keep those under test).
``.venv/bin/python bench/soak.py --minutes 10`` is the full run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent))

from proxy import REPO, UPSTREAM, Caller, free_port, process, start_gateway  # noqa: E402

sys.path.insert(0, str(REPO))
from tests.connectors.mcp.resetting_proxy import ResettingProxy  # noqa: E402

__all__ = ["main", "soak"]


@dataclass
class Sample:
    at_s: float
    rss_kib: int
    fds: int
    time_wait: int
    calls_s: float


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def time_wait_to(port: int) -> int:
    """Sockets in TIME_WAIT whose remote end is 127.0.0.1:``port`` (Linux /proc/net/tcp)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "06" and int(fields[2].split(":")[1], 16) == port:
            count += 1
    return count


async def soak(seconds: float, concurrency: int, every: float) -> list[Sample]:
    up_port = free_port()
    upstream_url = f"http://127.0.0.1:{up_port}/mcp"
    samples: list[Sample] = []
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(process(sys.executable, "-c", UPSTREAM, str(up_port), ready_url=upstream_url))
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        gw_url, gw_pid = await start_gateway(stack, tmp / "gateway", upstream_url, bare=False)
        http = await stack.enter_async_context(aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)))
        callers = [Caller(http, gw_url, "echo") for _ in range(concurrency)]
        await asyncio.gather(*(c.open() for c in callers))
        calls = 0
        end = time.perf_counter() + seconds

        async def loop(c: Caller) -> None:
            nonlocal calls
            while time.perf_counter() < end:
                await c.call()
                calls += 1

        workers = asyncio.gather(*(loop(c) for c in callers))
        started = last = time.perf_counter()
        last_calls = 0
        while not workers.done():
            await asyncio.wait([workers], timeout=every)
            now = time.perf_counter()
            samples.append(Sample(now - started, rss_kib(gw_pid), open_fds(gw_pid), time_wait_to(up_port),
                                  (calls - last_calls) / (now - last)))
            last, last_calls = now, calls
        await workers
    return samples


def report(samples: list[Sample]) -> tuple[str, bool]:
    lines = [f"{'t (s)':>7}{'RSS MiB':>10}{'open fds':>10}{'TIME_WAIT':>11}{'calls/s':>10}", "-" * 48]
    for s in samples:
        lines.append(f"{s.at_s:>7.0f}{s.rss_kib / 1024:>10.1f}{s.fds:>10}{s.time_wait:>11}{s.calls_s:>10.0f}")
    base, final = samples[0], samples[-1]
    growth = (final.rss_kib - base.rss_kib) / base.rss_kib
    worst_tw = max(s.time_wait for s in samples)
    ok = growth <= 0.10 and final.fds - base.fds <= 8 and worst_tw < 100
    lines.append("")
    lines.append(f"after warm-up: RSS {100 * growth:+.1f}% (<= +10%), open fds {final.fds - base.fds:+d} (<= +8), "
                 f"TIME_WAIT at most {worst_tw} (< 100): {'no leak seen' if ok else 'LEAK SUSPECTED'}")
    return "\n".join(lines), ok


# -- faults ------------------------------------------------------------------------------------

@dataclass
class Phase:
    name: str
    answered: int = 0
    errors: dict[tuple[str, str], int] = field(default_factory=dict)  # (connector, kind) -> count
    recovered_s: float | None = None
    rss_kib: int = 0
    fds: int = 0
    resets: int = 0

    def failed(self, connector: str, kind: str) -> None:
        self.errors[(connector, kind)] = self.errors.get((connector, kind), 0) + 1

    def errors_of(self, connector: str) -> int:
        return sum(n for (c, _k), n in self.errors.items() if c == connector)


# (connector, method, params): what each caller cycles through.
MIX: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("up", "tools/call", {"name": "up_echo", "arguments": {"text": "hi"}}),
    ("other", "tools/call", {"name": "other_echo", "arguments": {"text": "hi"}}),
    ("notes", "resources/read", {"uri": "notes://runbook"}),
    ("rest", "tools/call", {"name": "rest_ok", "arguments": {}}),
    ("db", "tools/call", {"name": "db_one", "arguments": {}}),
    ("gateway", "tools/list", {}),
)
CONNECTORS = ("up", "other", "notes", "rest", "db")

REST_SPEC = {"openapi": "3.0.3", "info": {"title": "soak", "version": "1"},
             "paths": {"/ok": {"get": {"operationId": "ok", "responses": {"200": {"description": "ok"}}}}}}


class RestBackend:
    """The OpenAPI connector's backend, in this process: ``mode`` is ok, 500 or hang."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        async def ok(request: web.Request) -> web.Response:
            if self.mode == "500":
                return web.Response(status=500, text="boom")
            if self.mode == "hang":
                await asyncio.sleep(30)
            return web.json_response({"ok": True})

        app = web.Application()
        app.router.add_get("/ok", ok)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def faults_config(up_url: str, other_url: str, rest_url: str, folder: Path) -> str:
    mcp = {"type": "mcp", "transport": "streamable_http", "protocol": "legacy", "reconnect_initial_s": 0.1,
           "reconnect_max_s": 1.0, "ping_interval_s": 2}
    (folder / "soak.json").write_text(json.dumps(REST_SPEC))
    import sqlite3

    with contextlib.closing(sqlite3.connect(folder / "soak.db")) as db:  # the SQL connector needs the file
        db.execute("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT)")
        db.commit()
    return json.dumps({
        "gateway": {"log_level": "warning", "page_size": 1},
        "audit": {"store": f"sqlite:///{folder / 'audit.db'}", "spill_path": str(folder / "audit.spill")},
        "connectors": [
            {"name": "up", "url": up_url, **mcp}, {"name": "other", "url": other_url, **mcp},
            {"name": "notes", "type": "static", "resources": [{"uri": "notes://runbook", "name": "runbook",
                                                               "text": "# Runbook"}]},
            {"name": "rest", "type": "openapi", "spec": str(folder / "soak.json"), "base_url": rest_url,
             "timeout_s": 1, "retries": 0},
            {"name": "db", "type": "sql", "url": f"sqlite+aiosqlite:///{folder / 'soak.db'}",
             "queries": [{"name": "one", "description": "one row", "sql": "SELECT 1 AS one"}]},
        ]})


async def _one(caller: Caller, method: str, params: dict[str, Any]) -> str | None:
    """Send one request; None when it succeeded, else the kind of failure."""
    caller.ids += 1
    try:
        msg = await caller._post({"jsonrpc": "2.0", "id": caller.ids, "method": method, "params": params})
    except (RuntimeError, aiohttp.ClientError) as exc:
        return f"http: {str(exc)[:40]}"
    if msg is None:
        return "no answer"
    if "error" in msg:
        return f"{msg['error'].get('code')}"
    if msg["result"].get("isError"):
        return "isError"
    return None


async def faults(phase_s: float, concurrency: int) -> tuple[list[Phase], int, int]:
    """The phases (module docstring); returns them, the requests answered and the audit rows."""
    up_port, other_port = free_port(), free_port()
    phases: list[Phase] = []
    async with contextlib.AsyncExitStack() as stack:
        up_argv = (sys.executable, "-c", UPSTREAM, str(up_port))
        up_proc = await asyncio.create_subprocess_exec(*up_argv, stdout=asyncio.subprocess.DEVNULL,
                                                       stderr=asyncio.subprocess.DEVNULL)
        procs = [up_proc]
        stack.push_async_callback(_stop_all, procs)
        await stack.enter_async_context(process(sys.executable, "-c", UPSTREAM, str(other_port),
                                                ready_url=f"http://127.0.0.1:{other_port}/mcp"))
        from proxy import wait_http
        await wait_http(f"http://127.0.0.1:{up_port}/mcp")
        proxy = await stack.enter_async_context(ResettingProxy(up_port))
        rest = RestBackend()
        await rest.start()
        stack.push_async_callback(rest.stop)
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        (tmp / "gateway").mkdir()
        config = tmp / "gateway" / "gateway.yaml"
        audit_db = tmp / "gateway" / "audit.db"
        config.write_text(faults_config(f"http://127.0.0.1:{proxy.port}/mcp",
                                        f"http://127.0.0.1:{other_port}/mcp", rest.url, tmp / "gateway"))
        gw_port = free_port()
        gateway = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--port", str(gw_port),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(REPO)})
        await wait_http(f"http://127.0.0.1:{gw_port}/readyz")
        gw_url = f"http://127.0.0.1:{gw_port}/mcp"
        http = await stack.enter_async_context(aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)))
        callers = [Caller(http, gw_url, "") for _ in range(concurrency)]
        await asyncio.gather(*(c.open() for c in callers))
        answered = 0

        async def load(phase: Phase, until: float) -> None:
            nonlocal answered

            async def loop(i: int, c: Caller) -> None:
                nonlocal answered
                step = i
                while time.perf_counter() < until:
                    connector, method, params = MIX[step % len(MIX)]
                    step += 1
                    kind = await _one(c, method, params)
                    answered += kind is None or not kind.startswith("http")
                    phase.answered += 1
                    if kind is not None:
                        phase.failed(connector, kind)
                        await asyncio.sleep(0.01)  # a fast failure must not spin

            await asyncio.gather(*(loop(i, c) for i, c in enumerate(callers)))

        async def up_serves() -> float:
            nonlocal answered
            started = time.perf_counter()
            probe = Caller(http, gw_url, "")
            await probe.open()
            while True:
                kind = await _one(probe, "tools/call", MIX[0][2])
                answered += kind is None or not kind.startswith("http")
                if kind is None:
                    return time.perf_counter() - started
                await asyncio.sleep(0.05)

        def close_phase(phase: Phase) -> None:
            phase.rss_kib, phase.fds = rss_kib(gateway.pid), open_fds(gateway.pid)
            phases.append(phase)

        steady = Phase("steady")
        await load(steady, time.perf_counter() + phase_s)
        close_phase(steady)

        resets = Phase("resets")
        end = time.perf_counter() + phase_s
        running = asyncio.create_task(load(resets, end))
        for n in range(1, 6):
            await asyncio.sleep(phase_s / 6)
            proxy.arm()
            with contextlib.suppress(TimeoutError):
                await proxy.wait_resets(n, timeout=phase_s)
        await running
        resets.resets = proxy.resets
        close_phase(resets)

        kill = Phase("kill")
        end = time.perf_counter() + phase_s
        running = asyncio.create_task(load(kill, end))
        procs[0].kill()
        await procs[0].wait()
        await asyncio.sleep(phase_s / 5)
        procs[0] = await asyncio.create_subprocess_exec(*up_argv, stdout=asyncio.subprocess.DEVNULL,
                                                        stderr=asyncio.subprocess.DEVNULL)
        kill.recovered_s = await up_serves()
        await running
        close_phase(kill)

        failing = Phase("rest")  # REST backend: 500s for a third of the phase, then hangs, then fine
        end = time.perf_counter() + phase_s
        running = asyncio.create_task(load(failing, end))
        for mode in ("500", "hang", "ok"):
            rest.mode = mode
            await asyncio.sleep(phase_s / 3)
        await running
        close_phase(failing)

        gateway.terminate()  # drains and flushes the audit log
        await gateway.wait()
        rows = _audit_rows(audit_db)
    return phases, answered, rows


async def _stop_all(procs: list[asyncio.subprocess.Process]) -> None:
    for proc in procs:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def _audit_rows(db: Path) -> int:
    import sqlite3

    with contextlib.closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT count(*) FROM gw_audit_events WHERE method != 'initialize'").fetchone()[0])


def faults_report(phases: list[Phase], answered: int, rows: int) -> tuple[str, bool]:
    faulted = {"resets": "up", "kill": "up", "rest": "rest"}
    head = "".join(f"{'err ' + c:>12}" for c in (*CONNECTORS, "gateway"))
    lines = [f"{'phase':<8}{'requests':>10}{head}{'recover s':>11}{'RSS MiB':>9}{'fds':>6}  errors by kind", "-" * 120]
    ok = True
    for p in phases:
        kinds = ", ".join(f"{c}:{k}={n}" for (c, k), n in sorted(p.errors.items())) or "-"
        recover = f"{p.recovered_s:.1f}" if p.recovered_s is not None else "-"
        counts = "".join(f"{p.errors_of(c):>12}" for c in (*CONNECTORS, "gateway"))
        lines.append(f"{p.name:<8}{p.answered:>10}{counts}{recover:>11}{p.rss_kib / 1024:>9.1f}{p.fds:>6}  {kinds}")
        # Only the connector the phase faults may fail; nothing fails in the steady phase.
        ok = ok and all(p.errors_of(c) == 0 for c in (*CONNECTORS, "gateway") if c != faulted.get(p.name))
        if p.name == "resets":
            ok = ok and p.resets == 5 and p.errors_of("up") <= p.resets
    lines.append("")
    lines.append(f"audit rows {rows} vs answered requests {answered} (initialize excluded from both)")
    ok = ok and rows == answered
    lines.append(f"verdict: {'held' if ok else 'DID NOT HOLD'}")
    return "\n".join(lines), ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--every", type=float, default=5.0, help="seconds per sample")
    parser.add_argument("--faults", action="store_true", help="mixed load, then each fault in turn")
    parser.add_argument("--minutes", type=float, default=0.0, help="the faults run, this long in all")
    args = parser.parse_args()
    if args.faults or args.minutes:
        phase_s = args.minutes * 60 / 4 if args.minutes else args.seconds / 4
        print(f"soak with faults: {args.concurrency} callers, 4 phases of {phase_s:g}s (steady, resets, kill, rest)")
        text, ok = faults_report(*asyncio.run(faults(phase_s, args.concurrency)))
        print(text)
        sys.exit(0 if ok else 1)
    print(f"soak: gateway as shipped in front of the mcp SDK echo upstream, {args.concurrency} callers, "
          f"{args.seconds:g}s")
    text, ok = report(asyncio.run(soak(args.seconds, args.concurrency, args.every)))
    print(text)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
