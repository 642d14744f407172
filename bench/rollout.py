"""A rolling update measured on one machine: 3 replicas behind HAProxy round robin sharing Redis,
replaced one at a time under steady load, as Kubernetes does it with the production overlay.

The load: ``--sessions`` 2025-06-18 sessions (each with its GET stream open, as SDK clients keep
one) and ``--stateless`` 2026-07-28 callers, all calling ``prompts/get`` of a static prompt as fast
as they are answered (bench/proxy.py's callers, no SDK), for ``--before`` seconds, then during the
rollout. A step, per replica (the Deployment's ``maxSurge: 1, maxUnavailable: 0``): start the new
replica on a fresh port and wait until HAProxy sees it ready (``/readyz``); take the old one out of
rotation (what the endpoints controller does when the pod is deleted: HAProxy runtime API
``state maint``) while the pod's ``preStop`` sleeps ``--prestop`` seconds; then SIGTERM: the gateway
drains (refuses new sessions, finishes in-flight requests, then waits ``drain_linger_s`` without a
request, at most ``shutdown_grace_s``) and exits. ``--in-rotation`` skips the endpoint removal and
the preStop sleep (SIGTERM while the proxy still sends requests, which HAProxy stops after its
health check sees ``/readyz`` answer 503): what a Deployment without a preStop hook gets.

Printed: failed calls by kind (revision, and what the client saw), p50/p99 before vs during, the
sessions lost (a request answered 404 for a session that existed: the client must initialize
again) and the GET streams broken by a replica leaving and reopened on another (a session's GET
stream lives on one replica; its notifications reach it wherever it is reopened).

Run: ``.venv/bin/python bench/rollout.py [--before 5] [--prestop 5] [--in-rotation]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import signal
import statistics
import sys
import tempfile
import textwrap
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from proxy import MODERN, MODERN_META, free_port, wait_http  # bench/proxy.py
from scale import HAPROXY, REDIS, REPO

SLOTS = 6  # HAProxy server slots: 3 replicas, and the 3 that replace them


def gateway_config(prefix: str, linger_s: float, grace_s: float) -> str:
    return textwrap.dedent(f"""\
        gateway: {{name: bench, cursor_secret: bench, log_level: warning, drain_linger_s: {linger_s},
                   shutdown_grace_s: {grace_s}}}
        audit: {{enabled: false}}
        telemetry: {{metrics: false}}
        state: {{store: '{REDIS}', redis_prefix: '{prefix}'}}
        connectors:
          - name: docs
            type: static
            prompts:
              - {{name: hello, description: Say hello, messages: [{{role: user, text: Hello}}]}}
        """)


def haproxy_config(port: int, sock: Path, ports: list[int]) -> str:
    # As a Service with readiness: only ready replicas get requests; a refused connection is
    # retried on another one (a Service's kube-proxy does the same for a pod not yet listening).
    servers = "\n".join(f"    server g{i} 127.0.0.1:{p} check inter 250ms fall 1 rise 1" for i, p in enumerate(ports))
    return textwrap.dedent(f"""\
        global
            maxconn 4000
            stats socket {sock} mode 600 level admin
        defaults
            mode http
            timeout connect 2s
            timeout client 120s
            timeout server 120s
            retries 3
            option redispatch 1
        frontend f
            bind 127.0.0.1:{port}
            default_backend b
        backend b
            balance roundrobin
            option httpchk GET /readyz
        """) + servers + "\n"


@dataclass
class Stats:
    calls: list[tuple[float, float, str]] = field(default_factory=list)  # (start, latency s, kind)
    failed: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, what the client saw)
    failed_at: list[float] = field(default_factory=list)
    sessions_lost: int = 0
    streams_broken: int = 0
    streams_reopened: int = 0


class Client:
    """One caller: a 2025-06-18 session with its GET stream, or 2026-07-28 stateless requests."""

    def __init__(self, http: aiohttp.ClientSession, url: str, kind: str, stats: Stats) -> None:
        self.http, self.url, self.kind, self.stats = http, url + "/mcp", kind, stats
        self.headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if kind == MODERN:
            self.headers.update({"MCP-Protocol-Version": MODERN, "Mcp-Method": "prompts/get", "Mcp-Name": "docs_hello"})
        self.ids = 0
        self.session_ok = asyncio.Event()

    async def _post(self, message: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
        async with self.http.post(self.url, data=json.dumps(message), headers=self.headers) as resp:
            if resp.headers.get("mcp-session-id"):
                self.headers["mcp-session-id"] = resp.headers["mcp-session-id"]
            if resp.status == 202:
                return 202, None
            if resp.headers.get("Content-Type", "").startswith("text/event-stream"):
                async for line in resp.content:
                    if line.startswith(b"data:") and len(line) > 7:
                        msg = json.loads(line[5:])
                        if msg.get("id") == message.get("id") and "method" not in msg:
                            return resp.status, msg
                raise ConnectionResetError("stream ended without a response")
            return resp.status, await resp.json(content_type=None)

    async def open(self) -> None:
        if self.kind == MODERN:
            return
        self.headers.pop("mcp-session-id", None)
        self.headers.pop("mcp-protocol-version", None)
        status, _ = await self._post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        if status != 200:
            raise RuntimeError(f"initialize: HTTP {status}")
        self.headers["mcp-protocol-version"] = "2025-06-18"
        await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.session_ok.set()

    async def call(self) -> None:
        self.ids += 1
        params: dict[str, Any] = {"name": "docs_hello"}
        if self.kind == MODERN:
            params["_meta"] = MODERN_META
        t0 = time.perf_counter()
        try:
            status, msg = await self._post({"jsonrpc": "2.0", "id": self.ids, "method": "prompts/get", "params": params})
        except (aiohttp.ClientError, ConnectionError) as exc:
            self._failed(type(exc).__name__)
            return
        if status == 200 and msg is not None and "result" in msg:
            self.stats.calls.append((t0, time.perf_counter() - t0, self.kind))
            return
        if status == 404 and self.kind != MODERN:  # the session is gone: the client starts another
            self.stats.sessions_lost += 1
            self._failed("HTTP 404 (session lost)")
            self.session_ok.clear()
            await self.open()
            return
        error = (msg or {}).get("error", {}).get("message", "")[:60] if msg else ""
        self._failed(f"HTTP {status} {error}".strip())

    def _failed(self, what: str) -> None:
        self.stats.failed[(self.kind, what)] += 1
        self.stats.failed_at.append(time.perf_counter())

    async def listen(self, stop: asyncio.Event) -> None:
        """Keep the session's GET stream open; count the breaks and the reopenings."""
        broken = False
        while not stop.is_set():
            await self.session_ok.wait()
            try:
                headers = {**self.headers, "Accept": "text/event-stream"}
                async with self.http.get(self.url, headers=headers) as resp:
                    if resp.status == 200:
                        if broken:
                            self.stats.streams_reopened += 1
                            broken = False
                        async for _ in resp.content:
                            pass
            except (aiohttp.ClientError, ConnectionError):
                pass
            if stop.is_set():
                return
            if not broken:
                self.stats.streams_broken += 1
                broken = True
            with contextlib.suppress(TimeoutError):  # the SDK waits a second before reconnecting
                async with asyncio.timeout(1.0):
                    await stop.wait()


class Replica:
    def __init__(self, folder: Path, config: str, port: int) -> None:
        self.port = port
        self.path = folder / f"gateway-{port}.yaml"
        self.path.write_text(config)
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway.cli", "serve", "--config", str(self.path), "--port", str(self.port),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)})
        await wait_http(f"http://127.0.0.1:{self.port}/readyz")

    async def terminate(self) -> float:
        """SIGTERM, and how long the drain took until the process exited."""
        assert self.proc is not None
        t0 = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        await self.proc.wait()
        return time.perf_counter() - t0


async def haproxy_command(sock: Path, command: str) -> str:
    reader, writer = await asyncio.open_unix_connection(str(sock))
    writer.write(command.encode() + b"\n")
    await writer.drain()
    out = await reader.read()
    writer.close()
    return out.decode()


async def wait_in_rotation(sock: Path, slot: int, up: bool) -> None:
    async with asyncio.timeout(30):
        while True:
            try:
                stat = await haproxy_command(sock, "show stat")
            except OSError:  # HAProxy is starting: its socket is not there yet
                await asyncio.sleep(0.05)
                continue
            line = next(row for row in stat.splitlines() if row.startswith(f"b,g{slot},"))
            if ("UP" in line.split(",")[17]) == up:
                return
            await asyncio.sleep(0.05)


def log(what: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {what}", file=sys.stderr, flush=True)


def pcts(latencies: list[float]) -> tuple[float, float]:
    lat = sorted(latencies)
    if not lat:
        return float("nan"), float("nan")
    return statistics.median(lat) * 1000, lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000


async def run(args: argparse.Namespace) -> None:
    prefix = f"gw:bench:{secrets.token_hex(3)}"
    ports = [free_port() for _ in range(SLOTS)]
    stats = Stats()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = gateway_config(prefix, args.linger, args.grace)
        replicas = [Replica(folder, config, p) for p in ports]
        await asyncio.gather(*(r.start() for r in replicas[:3]))
        log('replicas started')
        sock = folder / "haproxy.sock"
        port = free_port()
        (folder / "haproxy.cfg").write_text(haproxy_config(port, sock, ports))
        haproxy = await asyncio.create_subprocess_exec(HAPROXY, "-db", "-f", str(folder / "haproxy.cfg"),
                                                       stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        try:
            for slot in range(3):
                await wait_in_rotation(sock, slot, True)
                log('in rotation')
            url = f"http://127.0.0.1:{port}"
            stop = asyncio.Event()
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
                clients = [Client(http, url, "2025-06-18", stats) for _ in range(args.sessions)]
                clients += [Client(http, url, MODERN, stats) for _ in range(args.stateless)]
                for c in clients:
                    await c.open()
                log('clients open')

                async def drive(c: Client) -> None:
                    while not stop.is_set():
                        await c.call()

                tasks = [asyncio.create_task(drive(c)) for c in clients]
                tasks += [asyncio.create_task(c.listen(stop)) for c in clients if c.kind != MODERN]
                began = time.perf_counter()
                await asyncio.sleep(args.before)
                rollout_began = time.perf_counter()
                log('rollout begins')
                drains: list[float] = []
                for old in range(3):  # maxSurge 1, maxUnavailable 0: the new one first
                    new = old + 3
                    await replicas[new].start()
                    await wait_in_rotation(sock, new, True)
                    log(f"replica {new} ready")
                    if not args.in_rotation:  # the pod is deleted: endpoints go, preStop sleeps
                        await haproxy_command(sock, f"set server b/g{old} state maint")
                        await asyncio.sleep(args.prestop)
                    log(f"SIGTERM to replica {old}")
                    drains.append(await replicas[old].terminate())
                    log(f"replica {old} exited")
                    await wait_in_rotation(sock, old, False)
                rollout_ended = time.perf_counter()
                await asyncio.sleep(3.0)  # the GET streams reopen (a client waits a second first)
                stop.set()
                for task in tasks:  # the GET streams stay open: cut them
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            haproxy.terminate()
            await haproxy.wait()
            for r in replicas:
                if r.proc is not None and r.proc.returncode is None:
                    r.proc.terminate()
                    await r.proc.wait()
    before = [lat for t, lat, _ in stats.calls if began <= t < rollout_began]
    during = [lat for t, lat, _ in stats.calls if rollout_began <= t < rollout_ended]
    b50, b99 = pcts(before)
    d50, d99 = pcts(during)
    mode = "SIGTERM while in rotation (no preStop)" if args.in_rotation else \
        f"endpoints removed, preStop {args.prestop:g}s, then SIGTERM"
    print(f"\nrolling update of 3 replicas ({mode}; drain_linger_s {args.linger:g}, shutdown_grace_s "
          f"{args.grace:g}); {args.sessions} sessions with GET streams + {args.stateless} stateless callers, "
          f"{os.cpu_count()} CPUs")
    print(f"rollout took {rollout_ended - rollout_began:.1f}s; drains took " + ", ".join(f"{d:.1f}s" for d in drains))
    print(f"{'phase':<8} {'calls':>7} {'calls/s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    print(f"{'before':<8} {len(before):>7} {len(before) / (rollout_began - began):>8.0f} {b50:>8.2f} {b99:>8.2f}")
    print(f"{'during':<8} {len(during):>7} {len(during) / (rollout_ended - rollout_began):>8.0f} {d50:>8.2f} {d99:>8.2f}")
    print("failed calls: " + (", ".join(f"{kind} {what}: {n}" for (kind, what), n in sorted(stats.failed.items()))
                              or "none"))
    print(f"sessions lost: {stats.sessions_lost}; GET streams broken by a replica leaving: {stats.streams_broken}, "
          f"reopened on another: {stats.streams_reopened}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=float, default=5.0, help="seconds of steady load before the rollout")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--stateless", type=int, default=8)
    parser.add_argument("--prestop", type=float, default=5.0, help="the preStop sleep (the overlay's: 5)")
    parser.add_argument("--linger", type=float, default=3.0, help="gateway.drain_linger_s")
    parser.add_argument("--grace", type=float, default=30.0, help="gateway.shutdown_grace_s (the overlay's: 30)")
    parser.add_argument("--in-rotation", action="store_true", help="SIGTERM without endpoint removal or preStop")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
