"""Soak: the gateway proxying an upstream MCP server under steady load, watched for leaks.

The gateway (as shipped: metrics and SQLite audit on) chains the official-SDK echo upstream over
Streamable HTTP (the same processes as ``bench/proxy.py``) while ``--concurrency`` callers call
``echo`` without pause for ``--seconds``. Every ``--every`` seconds it prints the gateway's
resident memory, its open file descriptors, the sockets to the upstream in TIME_WAIT (a
connection closed per call instead of reused would pile them up) and the calls/s of that window.

Verdict at the end: after the first window (warm-up: imports, caches, first connections), memory
may grow by at most 10% and open descriptors by at most 8, and TIME_WAIT stays under 100.

Run: ``.venv/bin/python bench/soak.py [--seconds 60] [--concurrency 8] [--every 5]``.

Faults (issue 19): ``--minutes M`` (or ``--faults``, with ``--seconds`` as the total) runs the
soak-and-faults sequence instead: mixed load from ``--concurrency`` sessions (16 unless given) on
every connector kind at once (two SDK upstreams over Streamable HTTP, a static resource, an
OpenAPI backend, SQL on PostgreSQL; ``tools/call``, ``resources/read``, a paged ``tools/list``),
the audit log in PostgreSQL, and the run's time split evenly over eight phases, each applying one
fault under that load: ``steady`` (none), ``resets`` (connections reset under the upstream
client), ``kill`` (upstream SIGKILL + restart), ``rest`` (REST 500s, then hangs), ``sql`` (the SQL
connector's PostgreSQL backends killed), ``audit`` (the audit store unreachable for up to 20 s),
``hostile`` (requests carrying lone surrogates, NULs, control characters, emoji and a
non-UTF-8 header mixed into the load) and ``reload`` (4 config changes written to the watched
file). ``bench/soak_rig.py`` sets the
rig up, ``bench/soak_faults.py`` drives the faults and states each phase's targets.

Per phase it prints the requests sent and answered, the audit rows of the phase, the errors by
connector (and below, by kind), the time to recover, the gateway's RSS and open descriptors (first
> last sample, and the peak), then what the fault did and every target with ``ok`` or ``FAILED``.
Targets: no errors but on the connector the phase faults (none in ``steady`` and ``audit``), so
0 errors on the never-faulted ``other`` over the whole run; at most one failed call per reset; the
SQL pool back by itself; every spilled audit event replayed and the gateway's RSS after the replay
within 3% of before the outage; no ERROR or traceback in the gateway's log through ``sql``,
``audit`` and ``hostile``; the audit store up through ``hostile``; each reload restarting
``notes`` alone; audit rows = answered requests in every phase. Exit status 0 when every target
held.

PostgreSQL: ``--pg-url`` (default ``$TEST_PG_URL``, else ``postgresql://postgres@127.0.0.1:5432/test``)
must allow creating databases and roles; two scratch databases and a role are made per run and
dropped at its end.

``--phases audit,reload`` runs only those (in that order; the time is split among them; a phase
may be named twice: ``steady,audit,audit`` shows whether a second outage costs memory again);
``--log FILE`` keeps the gateway's log (level info: reloads, audit store lost and back).

``.venv/bin/python bench/soak.py --minutes 10`` is the full run (75 s per phase);
``--faults --seconds 21 --concurrency 4`` a quick one (the smoke test's);
``--minutes 2 --phases steady,audit`` the audit outage at its full 20 s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from proxy import UPSTREAM, Caller, free_port, process, start_gateway  # noqa: E402
from soak_faults import PHASES, faults, faults_report  # noqa: E402
from soak_rig import open_fds, rss_kib  # noqa: E402

__all__ = ["main", "soak"]


@dataclass
class Sample:
    at_s: float
    rss_kib: int
    fds: int
    time_wait: int
    calls_s: float


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="the leak soak's length (with --faults: the total)")
    parser.add_argument("--concurrency", type=int, default=None, help="callers (8; with faults 16)")
    parser.add_argument("--every", type=float, default=5.0, help="seconds per sample of the leak soak")
    parser.add_argument("--faults", action="store_true", help="the soak-and-faults sequence, --seconds in all")
    parser.add_argument("--minutes", type=float, default=0.0, help="the soak-and-faults sequence, this long in all")
    parser.add_argument("--phases", default=",".join(p.__name__ for p in PHASES),
                        help="the fault phases to run, comma-separated, in this order (default: all)")
    parser.add_argument("--log", type=Path, help="keep the gateway's log (level info) in this file (faults only)")
    parser.add_argument("--pg-url", default=os.environ.get("TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"),
                        help="PostgreSQL server for the SQL connector and the audit store (faults only)")
    args = parser.parse_args()
    if args.faults or args.minutes:
        concurrency = args.concurrency or 16
        by_name = {p.__name__: p for p in PHASES}
        unknown = [n for n in args.phases.split(",") if n not in by_name]
        if unknown:
            parser.error(f"unknown phase(s) {', '.join(unknown)}; known: {', '.join(by_name)}")
        only = tuple(by_name[n] for n in args.phases.split(","))
        phase_s = (args.minutes * 60 if args.minutes else args.seconds) / len(only)
        print(f"soak with faults: {concurrency} callers, {len(only)} phases of {phase_s:g}s ({args.phases})", flush=True)
        if args.log is not None:
            args.log = args.log.resolve()
            args.log.write_bytes(b"")
        text, ok = faults_report(asyncio.run(faults(phase_s, concurrency, args.pg_url, only, args.log)))
        print(text)
        sys.exit(0 if ok else 1)
    concurrency = args.concurrency or 8
    print(f"soak: gateway as shipped in front of the mcp SDK echo upstream, {concurrency} callers, "
          f"{args.seconds:g}s")
    text, ok = report(asyncio.run(soak(args.seconds, concurrency, args.every)))
    print(text)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
