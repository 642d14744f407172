"""Soak: the gateway proxying an upstream MCP server under steady load, watched for leaks.

The gateway (as shipped: metrics and SQLite audit on) chains the official-SDK echo upstream over
Streamable HTTP (the same processes as ``bench/proxy.py``) while ``--concurrency`` callers call
``echo`` without pause for ``--seconds``. Every ``--every`` seconds it prints the gateway's
resident memory, its open file descriptors, the sockets to the upstream in TIME_WAIT (a
connection closed per call instead of reused would pile them up) and the calls/s of that window.

Verdict at the end: after the first window (warm-up: imports, caches, first connections), memory
may grow by at most 10% and open descriptors by at most 8, and TIME_WAIT stays under 100.

Run: ``.venv/bin/python bench/soak.py [--seconds 60] [--concurrency 8] [--every 5]``.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--every", type=float, default=5.0, help="seconds per sample")
    args = parser.parse_args()
    print(f"soak: gateway as shipped in front of the mcp SDK echo upstream, {args.concurrency} callers, "
          f"{args.seconds:g}s")
    text, ok = report(asyncio.run(soak(args.seconds, args.concurrency, args.every)))
    print(text)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
