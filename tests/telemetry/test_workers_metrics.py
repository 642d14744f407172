"""``serve --workers N`` and metrics (issue 27, finding 1): one scrape sees every worker, summed.

Real processes: the supervisor and its workers (Redis as the shared state store), real HTTP on
loopback, many short connections so the kernel (SO_REUSEPORT) spreads the calls over both
workers. Each worker's own listener (whose address the supervisor prints) tells how many calls it
served, so the test knows both got some and that the merged scrape is their sum. A worker that
cannot listen stops the supervisor once, with its reason, instead of being restarted forever.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import aiohttp
import pytest

from tests.scale.harness import state_section
from tests.support import REPO, free_port, until_ok
from tests.telemetry.metrics_client import Samples

pytestmark = pytest.mark.timeout(180)

CALLS = 40
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "workers-test", "version": "1"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Connection": "close"}
LISTENING = re.compile(r"^mcp-gateway listening on ")
STARTED = re.compile(r"(\d+) workers on port \d+ \(pids ([\d, ]+); metrics of each on ([^)]*)\)")


def config(tmp_path: Path, metrics_port: int | None) -> Path:
    telemetry: dict[str, object] = {"metrics": True}
    if metrics_port is not None:
        telemetry["metrics_port"] = metrics_port
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps({
        "audit": {"enabled": False}, "gateway": {"cursor_secret": "workers"}, "telemetry": telemetry,
        "state": state_section(),
        "connectors": [{"name": "docs", "type": "static",
                        "resources": [{"uri": "docs://a", "name": "a", "text": "hi"}]}]}))
    return path


class Supervisor:
    """A running ``serve --workers N``; its stderr is drained by a thread (a full pipe would block it)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()

    def wait_for(self, pattern: re.Pattern[str], count: int = 1, timeout: float = 60.0) -> re.Match[str]:
        """The ``count``-th line matching ``pattern``, waiting for it at most ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = [m for line in self.lines if (m := pattern.search(line))]
                if len(found) >= count:
                    return found[count - 1]
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise AssertionError(f"no {pattern.pattern!r} in the supervisor's stderr: {''.join(self.lines)}")
                self._changed.wait(min(left, 0.5))

    async def running(self) -> None:
        assert self.proc.poll() is None, "the supervisor exited: " + "".join(self.lines)

    def close(self) -> None:
        """After the supervisor exited: the rest of its stderr read (bounded), the pipe closed."""
        self._reader.join(10)
        assert self.proc.stderr is not None
        self.proc.stderr.close()

    def children(self) -> list[int]:
        pid = self.proc.pid
        return sorted(int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split())


@contextmanager
def supervisor(path: Path, port: int, workers: int = 2) -> Iterator[Supervisor]:
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "serve", "--config", str(path), "--port",
                             str(port), "--workers", str(workers), "--reload-poll", "0"],
                            stderr=subprocess.PIPE, text=True, cwd=REPO)
    sup = Supervisor(proc)
    try:
        yield sup
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        sup.close()


@asynccontextmanager
async def serving(path: Path, port: int) -> AsyncIterator[tuple[Supervisor, list[int], list[str]]]:
    """The supervisor once both workers listen on the main port and answer their own /readyz with
    200 (a worker's gateway is ready a moment before it listens): (it, worker pids, their URLs)."""
    with supervisor(path, port) as sup:
        found = await asyncio.to_thread(sup.wait_for, STARTED)
        pids = sorted(int(p) for p in found.group(2).split(", "))
        urls = found.group(3).split(", ")
        await asyncio.to_thread(sup.wait_for, LISTENING, len(pids), 90.0)
        async with aiohttp.ClientSession() as http, asyncio.timeout(90):
            for url in urls:
                await until_ok(http, url + "/readyz", sup.running)
        yield sup, pids, urls


async def initializes(http: aiohttp.ClientSession, url: str) -> float:
    """The ``initialize`` requests a scrape of ``url`` counts, all labels summed."""
    async with http.get(url) as resp:
        assert resp.status == 200, await resp.text()
        samples = Samples(await resp.text())
    return sum(value for (name, labels), value in samples.values.items()
               if name == "mcp_gateway_requests_total" and ("method", "initialize") in labels)


async def make_calls(http: aiohttp.ClientSession, port: int) -> None:
    """CALLS initializes, each on a connection of its own (Connection: close): the kernel spreads them."""
    for _ in range(CALLS):
        async with http.post(f"http://127.0.0.1:{port}/mcp", json=INIT, headers=HEADERS) as resp:
            assert resp.status == 200, await resp.text()
            await resp.read()


async def test_two_workers_with_a_metrics_port_serve_summed_counters_on_one_scrape(tmp_path: Path) -> None:
    port, metrics_port = free_port(), free_port()
    async with serving(config(tmp_path, metrics_port), port) as (sup, pids, urls), aiohttp.ClientSession() as http:
        assert sup.children() == pids
        await make_calls(http, port)
        own = [await initializes(http, url + "/metrics") for url in urls]
        assert sum(own) == CALLS and all(n > 0 for n in own), own  # both workers served some
        assert await initializes(http, f"http://127.0.0.1:{metrics_port}/metrics") == CALLS
        # The pod is ready when every worker is; nothing was restarted.
        async with http.get(f"http://127.0.0.1:{metrics_port}/readyz") as resp:
            assert resp.status == 200 and set((await resp.json())["workers"]) == {str(p) for p in pids}
        assert sup.children() == pids
        assert not any("in its place" in line for line in sup.lines), sup.lines


async def test_two_workers_without_a_metrics_port_answer_the_sum_on_the_main_port(tmp_path: Path) -> None:
    port = free_port()
    async with serving(config(tmp_path, None), port) as (sup, pids, urls), aiohttp.ClientSession() as http:
        await make_calls(http, port)
        own = [await initializes(http, url + "/metrics") for url in urls]
        assert sum(own) == CALLS and all(n > 0 for n in own), own
        # Every scrape of the shared port, whichever worker takes it, is the whole pod.
        for _ in range(6):
            headers = {"Connection": "close"}
            async with http.get(f"http://127.0.0.1:{port}/metrics", headers=headers) as resp:
                assert resp.status == 200
                samples = Samples(await resp.text())
            total = sum(v for (name, labels), v in samples.values.items()
                        if name == "mcp_gateway_requests_total" and ("method", "initialize") in labels)
            assert total == CALLS
        assert sup.children() == pids


def test_a_worker_that_cannot_listen_stops_the_supervisor_once(tmp_path: Path) -> None:
    """The main port is held by a listener without SO_REUSEPORT: no worker can bind it. Each says
    why, the supervisor says it stops, and exits 2 (the worker's code) instead of restarting."""
    path = config(tmp_path, free_port())
    with socket.create_server(("127.0.0.1", 0)) as taken, supervisor(path, port := taken.getsockname()[1]) as sup:
        try:
            code = sup.proc.wait(90)
        except subprocess.TimeoutExpired:
            pytest.fail("the supervisor kept running: " + "".join(sup.lines))
        sup.close()
    err = "".join(sup.lines)
    assert code == 2, err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "address already in use" in err.lower()
    assert err.count("before it was serving") == 1 and "not restarting it" in err
    assert "in its place" not in err


def test_a_taken_metrics_port_is_refused_before_any_worker_starts(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        path = config(tmp_path, port := taken.getsockname()[1])
        proc = subprocess.run([sys.executable, "-m", "gateway.cli", "serve", "--config", str(path), "--port",
                               str(free_port()), "--workers", "2"], capture_output=True, text=True, timeout=60,
                              cwd=REPO)
    assert proc.returncode == 2
    assert f"telemetry.metrics_port: cannot serve /metrics on 127.0.0.1:{port}" in proc.stderr
    assert "workers on port" not in proc.stderr  # refused before starting any


async def test_a_worker_that_dies_after_serving_is_started_again_and_scraped(tmp_path: Path) -> None:
    """Only start-up failures stop the supervisor: a worker SIGKILLed while serving (the OOM
    killer) is replaced once, on the same private metrics socket, and the scrape answers again."""
    port, metrics_port = free_port(), free_port()
    async with serving(config(tmp_path, metrics_port), port) as (sup, pids, urls), aiohttp.ClientSession() as http:
        os.kill(pids[0], signal.SIGKILL)
        found = await asyncio.to_thread(sup.wait_for, re.compile(rf"worker {pids[0]} exited with -9; started (\d+)"))
        replacement = int(found.group(1))
        async with asyncio.timeout(90):  # the replacement listens on the slot's socket once it has started
            ready = await until_ok(http, f"http://127.0.0.1:{metrics_port}/readyz", sup.running)
        workers = set(json.loads(ready)["workers"])
        children = sup.children()
        assert children == sorted([replacement, pids[1]])
        assert workers == {str(p) for p in children}
        async with http.get(f"http://127.0.0.1:{metrics_port}/metrics") as resp:
            assert resp.status == 200
        assert sup.proc.poll() is None
