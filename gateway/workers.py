"""``serve --workers N``: N serving processes on one port, so one pod uses its cores.

The supervisor (this process) loads the config only to refuse what cannot work — N > 1 with the
``memory`` state store, whose sessions would live in one worker while the kernel spreads a client's
connections over all of them — then starts N ``serve --reuse-port`` children on the same host and
port (``SO_REUSEPORT``: the kernel balances connections between them). They share sessions and
routing through ``state.store`` exactly as replicas in separate pods do.

Metrics (with ``telemetry.metrics`` on): the supervisor, not a worker, listens on
``telemetry.metrics_port`` (bound before any worker starts, so a taken port is said once, exit 2),
and each worker serves its own registry on a loopback socket the supervisor made for its slot
(kept across that worker's restarts, passed as ``--metrics-fd``). A scrape of the metrics port is
every worker's exposition merged (:mod:`gateway.telemetry.supervisor`); without a metrics port the
supervisor serves the merge on a loopback port and the workers' ``/metrics`` on the main port
answers with it (``--metrics-aggregate``). docs/architecture.md says why this and not
prometheus_client's multiprocess mode.

Start-up failures stop the supervisor, never loop: each worker writes ``ready`` on a pipe
(``--ready-fd``) once it listens. A worker that exits before it did (its port, a config problem
found at start) has said why on stderr; the supervisor says which worker and its exit code, stops
the others and exits non-zero. A worker that dies after serving (a crash, the OOM killer) is
started again, at most once a second per slot.

Signals: SIGTERM/SIGINT are passed to every worker (each drains as a lone ``serve`` would) and the
supervisor exits when they all have; SIGHUP is passed on (each reloads; the supervisor keeps the
metrics port it bound at start).
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

from gateway.config import load_config
from gateway.protocol.errors import ConfigError
from gateway.telemetry.supervisor import WorkerMetrics

__all__ = ["serve_workers", "worker_argv"]

RESTART_MIN_S = 1.0
POLL_S = 0.2
STOP_EXTRA_S = 5.0  # past shutdown_grace_s, a worker stopped because another failed is killed


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


@dataclass
class _Slot:
    """One worker place: its current process, whether it said it serves, its metrics socket."""

    metrics_socket: socket.socket | None
    proc: subprocess.Popen[bytes] | None = None
    ready_pipe: int = -1  # read end; -1 once read or closed
    ready: bool = False
    started: float = 0.0

    def start(self, command: list[str]) -> None:
        read, write = os.pipe()
        os.set_blocking(read, False)
        extra = ["--ready-fd", str(write)]
        fds = [write]
        if self.metrics_socket is not None:
            extra += ["--metrics-fd", str(self.metrics_socket.fileno())]
            fds.append(self.metrics_socket.fileno())
        try:
            self.proc = subprocess.Popen([*command, *extra], pass_fds=fds)
        finally:
            os.close(write)
        self.ready_pipe, self.ready, self.started = read, False, time.monotonic()

    def read_ready(self) -> None:
        """Take what the worker wrote on its pipe (non-blocking): ``ready``, or EOF when it exited."""
        if self.ready_pipe < 0:
            return
        try:
            data = os.read(self.ready_pipe, 64)
        except BlockingIOError:
            return
        self.ready = self.ready or data.startswith(b"ready")
        os.close(self.ready_pipe)
        self.ready_pipe = -1

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def metrics_url(self) -> str:
        assert self.metrics_socket is not None
        host, port = self.metrics_socket.getsockname()[:2]
        return f"http://{host}:{port}"


def _stop(slots: list[_Slot], grace_s: float) -> None:
    """SIGTERM every running worker; SIGKILL those still running after ``grace_s``."""
    procs = [s.proc for s in slots if s.proc is not None and s.proc.poll() is None]
    for proc in procs:
        proc.terminate()
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def serve_workers(args: argparse.Namespace, argv: list[str]) -> int:
    """Run ``args.workers`` workers until SIGTERM/SIGINT (their highest exit code) or until one
    fails to start (its exit code, 1 if it had none); 2 for a config this cannot serve."""
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
    slots = [_Slot(socket.create_server(("127.0.0.1", 0)) if config.telemetry.metrics else None)
             for _ in range(args.workers)]
    merged: WorkerMetrics | None = None
    try:
        if config.telemetry.metrics:
            metrics_port = config.telemetry.metrics_port
            try:
                merged = WorkerMetrics(host if metrics_port is not None else "127.0.0.1", metrics_port or 0,
                                       lambda: [(s.pid, s.metrics_url(), s.ready) for s in slots])
            except OSError as exc:
                print(f"{args.config}: telemetry.metrics_port: cannot serve /metrics on {host}:{metrics_port}: "
                      f"{exc.strerror or exc}", file=sys.stderr)
                return 2
            merged.start()
            if metrics_port is None:  # the main port's /metrics answers with the merge
                command += ["--metrics-aggregate", f"http://127.0.0.1:{merged.port}/metrics"]
        return _supervise(slots, command, port, config.gateway.shutdown_grace_s + STOP_EXTRA_S)
    finally:
        if merged is not None:
            merged.close()
        for slot in slots:
            if slot.metrics_socket is not None:
                slot.metrics_socket.close()


def _supervise(slots: list[_Slot], command: list[str], port: int, stop_grace_s: float) -> int:
    for slot in slots:
        slot.start(command)
    own = "; metrics of each on " + ", ".join(s.metrics_url() for s in slots) if slots[0].metrics_socket else ""
    print(f"mcp-gateway: {len(slots)} workers on port {port} (pids {', '.join(str(s.pid) for s in slots)}{own})",
          file=sys.stderr, flush=True)
    stopping = False

    def forward(signum: int, _frame: object) -> None:
        nonlocal stopping
        if signum in (signal.SIGTERM, signal.SIGINT):
            stopping = True
        for slot in slots:
            if slot.proc is not None and slot.proc.poll() is None:
                slot.proc.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    while True:
        if stopping:
            return max((s.proc.wait() for s in slots if s.proc is not None), default=0)
        # Wake on a worker's "ready" at once; otherwise look at exits every POLL_S.
        waiting = [s.ready_pipe for s in slots if s.ready_pipe >= 0]
        try:
            select.select(waiting, [], [], POLL_S)
        except InterruptedError:  # a signal: the loop looks at `stopping` first
            continue
        for slot in slots:
            slot.read_ready()
            assert slot.proc is not None
            code = slot.proc.poll()
            if code is None or stopping:
                continue
            slot.read_ready()  # "ready" written just before the exit still counts
            if not slot.ready:
                print(f"mcp-gateway: worker {slot.pid} exited with {code} before it was serving (its error is "
                      "above); not restarting it: stopping the other workers", file=sys.stderr, flush=True)
                _stop(slots, stop_grace_s)
                return code if code > 0 else 1
            if time.monotonic() - slot.started >= RESTART_MIN_S:
                gone = slot.pid
                slot.start(command)
                print(f"mcp-gateway: worker {gone} exited with {code}; started {slot.pid} in its place",
                      file=sys.stderr, flush=True)
