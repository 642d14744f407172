"""Support of the HTTP attack tests: a ``/healthz`` prober in a process of its own (so the attack
a test runs cannot delay it) and raw-socket helpers (requests exactly as written, on loopback).

    python -m tests.security.http_support URL [EVERY_S]

probes ``URL/healthz`` every ``EVERY_S`` seconds (default 0.01), each on a new connection as a
kubelet's probes are, and prints each latency in seconds (``fail <why>`` for a probe that did not
get 200) until its stdin closes. :func:`probing_healthz` runs it around a block.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp

from .support import Probe

__all__ = ["probing_healthz", "INIT", "open_raw", "closed_after", "port_of"]

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}

REPO = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def probing_healthz(base_url: str, every_s: float = 0.01) -> AsyncIterator[Probe]:
    """Probe ``/healthz`` from another process while the block runs; a failed probe counts as an
    infinite latency. The prober is up and answered before the block starts."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.security.http_support", base_url, str(every_s),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=REPO)
    assert proc.stdin is not None and proc.stdout is not None
    stdout = proc.stdout
    probe = Probe()
    first = asyncio.Event()

    async def read() -> None:
        async for line in stdout:
            text = line.decode().strip()
            probe.samples.append(float("inf") if text.startswith("fail") else float(text))
            first.set()

    reader = asyncio.create_task(read())
    try:
        async with asyncio.timeout(30):
            await first.wait()
        probe.samples.clear()
        yield probe
    finally:
        proc.stdin.close()
        try:
            async with asyncio.timeout(10):
                await proc.wait()
                await reader
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


async def open_raw(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A plain TCP connection to the gateway at ``url``."""
    return await asyncio.open_connection("127.0.0.1", port_of(url))


async def closed_after(reader: asyncio.StreamReader, started: float, limit_s: float = 10.0) -> tuple[float, bytes]:
    """Read until the server closes the connection: seconds since ``started``, and what it sent."""
    received = b""
    try:
        async with asyncio.timeout(limit_s):
            while chunk := await reader.read(65536):
                received += chunk
    except ConnectionResetError:
        pass
    return time.perf_counter() - started, received


async def _main(base_url: str, every_s: float) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def watch_stdin() -> None:
        sys.stdin.read()
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=watch_stdin, daemon=True).start()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
        while True:  # a last probe after the stop: the one that covers the end of the block
            started = time.perf_counter()
            try:
                async with http.get(base_url + "/healthz") as resp:
                    await resp.read()
                    outcome = f"{time.perf_counter() - started:.6f}" if resp.status == 200 else f"fail {resp.status}"
            except aiohttp.ClientError as exc:
                outcome = f"fail {exc!r}"
            print(outcome, flush=True)
            if stop.is_set():
                return
            try:
                await asyncio.wait_for(stop.wait(), every_s)
            except TimeoutError:
                pass


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 0.01))
