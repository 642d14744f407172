"""The supervisor's metrics listener (``serve --workers N``): one scrape for the whole pod.

Each worker serves its own registry on a private loopback socket the supervisor made for it (and
keeps across that worker's restarts). :class:`WorkerMetrics` listens where Prometheus scrapes
(``telemetry.metrics_port``; without one, a loopback port the workers' ``/metrics`` on the main
port fetch from) and answers:

* ``/metrics``: every worker's exposition, fetched concurrently, merged by
  :func:`gateway.telemetry.aggregate.merge`. A worker that does not answer within
  :data:`FETCH_TIMEOUT_S` fails the scrape with 503 naming it: a partial sum would look like a
  counter reset to Prometheus, a failed scrape is honest (``up`` is 0 for it).
* ``/readyz``: 200 when every worker listens on the main port and is ready (the kernel hands
  connections to all of them), the body each worker's detail under ``workers``; ``/healthz``:
  the supervisor answers.
* ``/status``: the first worker's page (each worker sees the same connectors and config).

It runs in threads of the supervisor (``http.server``): the supervisor has no event loop, and a
scrape waits on sockets only.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST

from gateway.telemetry.aggregate import AggregateError, merge

__all__ = ["FETCH_TIMEOUT_S", "WorkerMetrics", "Fetched"]

FETCH_TIMEOUT_S = 5.0


class Fetched:
    """One worker's answer: status, content type and body, or ``error`` when none came."""

    __slots__ = ("status", "content_type", "body", "error")

    def __init__(self, status: int = 0, content_type: str = "", body: bytes = b"", error: str = "") -> None:
        self.status, self.content_type, self.body, self.error = status, content_type, body, error


def fetch(url: str, timeout: float = FETCH_TIMEOUT_S) -> Fetched:
    """GET ``url``; an HTTP error status is an answer, a connection failure or timeout is ``error``."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (loopback URLs we made)
            return Fetched(response.status, response.headers.get("Content-Type", ""), response.read())
    except urllib.error.HTTPError as exc:
        return Fetched(exc.code, exc.headers.get("Content-Type", ""), exc.read())
    except (OSError, urllib.error.URLError) as exc:
        reason = getattr(exc, "reason", exc)
        return Fetched(error=f"{type(reason).__name__}: {reason}" if str(reason) else type(reason).__name__)


class WorkerMetrics:
    """Serve the merged view of the workers at ``host:port`` (0: a free port, see :attr:`port`).

    ``workers()`` returns, per worker slot, ``(pid, base URL of its private listener, serving)``,
    ``serving`` true once the worker listens on the main port; it is read on every request, so a
    restarted worker is scraped under its new pid. Binding happens in the constructor: an
    ``OSError`` there (port taken) is the caller's to report.
    """

    def __init__(self, host: str, port: int, workers: Callable[[], Sequence[tuple[int, str, bool]]]) -> None:
        self._workers = workers
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="worker-metrics")
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                status, content_type, body = owner.answer(self.path)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass  # a scrape every 15 s is not news

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="worker-metrics", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _gather(self, path: str) -> list[tuple[int, bool, Fetched]]:
        workers = list(self._workers())
        answers = self._pool.map(lambda w: fetch(w[1] + path), workers)
        return [(pid, serving, answer) for (pid, _, serving), answer in zip(workers, answers, strict=True)]

    def answer(self, path: str) -> tuple[int, str, bytes]:
        """Status, content type and body for a GET of ``path`` (the request line's target)."""
        route, _, query = path.partition("?")
        if route == "/metrics":
            return self._metrics()
        if route == "/healthz":
            return 200, "text/plain; charset=utf-8", b"ok"
        if route == "/readyz":
            return self._readyz("?" + query if query else "")
        if route == "/status":
            for _, _, got in self._gather(path)[:1]:
                if not got.error:
                    return got.status, got.content_type, got.body
                return 503, "text/plain; charset=utf-8", f"worker did not answer /status: {got.error}".encode()
        return 404, "text/plain; charset=utf-8", b"not found"

    def _metrics(self) -> tuple[int, str, bytes]:
        texts = []
        for pid, _, got in self._gather("/metrics"):
            if got.error or got.status != 200:
                why = got.error or f"HTTP {got.status}"
                return 503, "text/plain; charset=utf-8", f"worker {pid} did not answer /metrics: {why}".encode()
            texts.append(got.body.decode("utf-8"))
        try:
            return 200, CONTENT_TYPE_LATEST, merge(texts)
        except AggregateError as exc:
            return 500, "text/plain; charset=utf-8", str(exc).encode()

    def _readyz(self, query: str) -> tuple[int, str, bytes]:
        details: dict[str, object] = {}
        ready = True
        for pid, serving, got in self._gather("/readyz" + query):
            # A worker's gateway may be ready before it listens on the main port: not yet ours.
            ready = ready and serving and got.status == 200
            try:
                detail = json.loads(got.body) if not got.error else {"status": "unreachable", "error": got.error}
            except ValueError:
                detail = {"status": f"HTTP {got.status}"}
            if not serving and isinstance(detail, dict):
                detail["status"] = "starting"
            details[str(pid)] = detail
        body = {"status": "ready" if ready else "not ready", "workers": details}
        return 200 if ready else 503, "application/json", json.dumps(body).encode()
