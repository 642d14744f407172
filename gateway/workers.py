"""``serve --workers N``: N serving processes on one port, so one pod uses its cores.

The supervisor (this process) loads the config only to refuse what cannot work — N > 1 with the
``memory`` state store, whose sessions would live in one worker while the kernel spreads a client's
connections over all of them — then starts N ``serve --reuse-port`` children on the same host and
port (``SO_REUSEPORT``: the kernel balances connections between them). They share sessions and
routing through ``state.store`` exactly as replicas in separate pods do.

Signals: SIGTERM/SIGINT are passed to every worker (each drains as a lone ``serve`` would) and the
supervisor exits when they all have; SIGHUP is passed on (each reloads). A worker that dies on its
own (a crash, the OOM killer) is started again, at most once a second.
"""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import time

from gateway.config import load_config
from gateway.protocol.errors import ConfigError

__all__ = ["serve_workers", "worker_argv"]

RESTART_MIN_S = 1.0


def worker_argv(argv: list[str], port: int) -> list[str]:
    """A worker's command line: ``serve`` with the same options, a fixed port, ``--reuse-port``."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in ("--workers", "--port"):
            skip = True
            continue
        if arg.startswith(("--workers=", "--port=")):
            continue
        out.append(arg)
    return [sys.executable, "-m", "gateway.cli", *out, "--port", str(port), "--reuse-port"]


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def serve_workers(args: argparse.Namespace, argv: list[str]) -> int:
    if args.workers < 1:
        print(f"--workers must be at least 1, not {args.workers}", file=sys.stderr)
        return 2
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"{args.config}: {exc}", file=sys.stderr)
        return 2
    if not config.state.shared:
        print(f"{args.config}: --workers {args.workers} needs a state store the workers share "
              "(state: {store: redis://HOST:PORT/DB}); with state.store memory each session would live in one "
              "worker while the kernel spreads its requests over all of them", file=sys.stderr)
        return 2
    host = args.host or config.gateway.http.host
    port = config.gateway.http.port if args.port is None else args.port
    if port == 0:  # every worker must bind the same port: choose it here
        port = _free_port(host)
    command = worker_argv(argv, port)
    workers = [subprocess.Popen(command) for _ in range(args.workers)]
    print(f"mcp-gateway: {args.workers} workers on port {port} (pids {', '.join(str(w.pid) for w in workers)})",
          file=sys.stderr, flush=True)
    stopping = False

    def forward(signum: int, _frame: object) -> None:
        nonlocal stopping
        if signum in (signal.SIGTERM, signal.SIGINT):
            stopping = True
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    started = [time.monotonic()] * len(workers)
    while True:
        if stopping:
            codes = [w.wait() for w in workers]
            return max(codes, default=0)
        for i, worker in enumerate(workers):
            code = worker.poll()
            if code is not None and not stopping and time.monotonic() - started[i] >= RESTART_MIN_S:
                print(f"mcp-gateway: worker {worker.pid} exited with {code}; starting another", file=sys.stderr,
                      flush=True)
                workers[i] = subprocess.Popen(command)
                started[i] = time.monotonic()
        time.sleep(0.2)
