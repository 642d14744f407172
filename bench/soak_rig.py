"""The rig of ``bench/soak.py --faults``: the gateway and its backends in one controllable set-up,
the mixed load, and the per-phase accounting. The faults themselves are in ``bench/soak_faults.py``.

What :func:`rig` starts (all on loopback, ephemeral ports; PostgreSQL is the shared server of
``--pg-url``, in two scratch databases dropped at the end):

* ``up``: the official-SDK echo upstream (``bench/proxy.py``'s ``UPSTREAM``) behind
  :class:`ResettingProxy` (resets requests arriving on used keep-alive connections, on demand);
  the bench may SIGKILL and restart the upstream process on the same port;
* ``other``: a second SDK upstream, reached directly;
* ``notes``: a static resource whose text the hot-reload phase rewrites;
* ``rest``: an OpenAPI connector whose backend (:class:`RestBackend`) runs in this process and
  answers ok, 500 or hangs (30 s, past the connector's 3 s timeout) on demand;
* ``db``: the SQL connector on a PostgreSQL scratch database, as a LOGIN role of its own
  (not a superuser: the bench kills its backends by role name);
* the audit store: PostgreSQL (another scratch database) reached through :class:`CuttableProxy`,
  a TCP relay the bench cuts (listener closed, every connection reset) and restores;
* the gateway (``mcp-gateway serve``, its own process, log level info to a file the bench reads,
  config file watched every 0.25 s).

Every caller has its own MCP session (Streamable HTTP) and cycles :data:`MIX`. Request ids are
``<phase>.<caller>.<n>``: the audit rows of a phase are counted by that prefix, so each phase's
audit rows can be set against the requests it had answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parent))

from proxy import REPO, UPSTREAM, Caller, free_port, process, wait_http  # noqa: E402

sys.path.insert(0, str(REPO))
from tests.audit.pgdb import scratch_database  # noqa: E402
from tests.connectors.mcp.resetting_proxy import ResettingProxy  # noqa: E402
from tests.connectors.sql.helpers import libpq_url  # noqa: E402
from tests.security.support import pg_role, role_url  # noqa: E402

__all__ = ["CONNECTORS", "MIX", "Phase", "Rig", "rig", "rss_kib", "open_fds"]

# (connector, method, params): what each caller cycles through ("gateway": a catalog listing).
MIX: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("up", "tools/call", {"name": "up_echo", "arguments": {"text": "hi"}}),
    ("other", "tools/call", {"name": "other_echo", "arguments": {"text": "hi"}}),
    ("notes", "resources/read", {"uri": "notes://runbook"}),
    ("rest", "tools/call", {"name": "rest_ok", "arguments": {}}),
    ("db", "tools/call", {"name": "db_count", "arguments": {}}),
    ("gateway", "tools/list", {}),
)
CONNECTORS = ("up", "other", "notes", "rest", "db", "gateway")

REST_SPEC = {"openapi": "3.0.3", "info": {"title": "soak", "version": "1"},
             "paths": {"/ok": {"get": {"operationId": "ok", "responses": {"200": {"description": "ok"}}}}}}
SQL_SETUP = "CREATE TABLE notes (id int PRIMARY KEY, body text NOT NULL); " \
            "INSERT INTO notes SELECT i, 'note ' || i FROM generate_series(1, 20) i"


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@dataclass
class Phase:
    """One phase's load and what happened to it. ``faulted``: the connector the fault hits
    (errors there are the fault's; anywhere else they are failures of the gateway)."""

    name: str
    faulted: str | None = None
    requests: int = 0
    answered: int = 0  # requests that got a JSON-RPC answer (a result or an error)
    errors: dict[tuple[str, str], int] = field(default_factory=dict)  # (connector, kind) -> count
    seen: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)  # first, last (s into the phase)
    started: float = field(default_factory=time.perf_counter)
    slowest: tuple[float, str, float] = (0.0, "", 0.0)  # latency (s), connector, when (s into the phase)
    recovered_s: float | None = None
    samples: list[tuple[int, int]] = field(default_factory=list)  # (RSS KiB, open fds), ~1/s
    audit_rows: int = 0
    notes: list[str] = field(default_factory=list)  # what the fault did, for the report
    checks: list[tuple[str, bool]] = field(default_factory=list)  # the phase's own targets

    def at(self) -> float:
        """Seconds since the phase started."""
        return time.perf_counter() - self.started

    def failed(self, connector: str, kind: str) -> None:
        key = (connector, kind)
        self.errors[key] = self.errors.get(key, 0) + 1
        self.seen[key] = (self.seen.get(key, (self.at(), 0.0))[0], self.at())

    def errors_of(self, connector: str) -> int:
        return sum(n for (c, _k), n in self.errors.items() if c == connector)

    def check(self, label: str, ok: bool) -> None:
        self.checks.append((label, ok))


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


class CuttableProxy:
    """A TCP relay to ``target`` that :meth:`cut` makes unreachable (listener closed, every open
    connection reset: clients see refused connections, as when the server is gone) and
    :meth:`restore` brings back on the same port."""

    def __init__(self, target_port: int, host: str = "127.0.0.1") -> None:
        self.target_port, self.host = target_port, host
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def restore(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()  # either side gone: both go (a cut resets both)

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers.difference_update((writer, up_writer))


class Rig:
    """Everything :func:`rig` started, and the load and probes run against it."""

    def __init__(self, folder: Path, concurrency: int) -> None:
        self.folder = folder
        self.concurrency = concurrency
        self.config_path = folder / "gateway.yaml"
        self.log_path = folder / "gateway.log"
        self.up_port = free_port()
        self.up_argv = (sys.executable, "-c", UPSTREAM, str(self.up_port))
        self.up_proc: asyncio.subprocess.Process | None = None
        self.gateway: asyncio.subprocess.Process | None = None
        self.base_url = ""
        self.callers: list[Caller] = []
        self.probe: Caller | None = None
        self.http: aiohttp.ClientSession | None = None
        self.rest = RestBackend()
        self.resetter: ResettingProxy | None = None
        self.audit_proxy: CuttableProxy | None = None
        self.pg_admin_url = ""
        self.audit_db_url = ""  # direct, for counting rows
        self.sql_role = ""
        self.notes_version = 0
        self._config: dict[str, Any] = {}
        self._ids = 0
        self._names: set[str] = set()

    def name_for(self, phase: str) -> str:
        """A phase's name, numbered from its second run on (``audit``, ``audit2``...): request ids
        carry it, so each run's audit rows are counted apart."""
        name, n = phase, 1
        while name in self._names:
            n += 1
            name = f"{phase}{n}"
        self._names.add(name)
        return name

    @property
    def pid(self) -> int:
        assert self.gateway is not None
        return self.gateway.pid

    # -- processes ------------------------------------------------------------------------------

    async def start_up(self) -> None:
        self.up_proc = await asyncio.create_subprocess_exec(*self.up_argv, stdout=asyncio.subprocess.DEVNULL,
                                                            stderr=asyncio.subprocess.DEVNULL)
        await wait_http(f"http://127.0.0.1:{self.up_port}/mcp")

    async def kill_up(self) -> None:
        assert self.up_proc is not None
        self.up_proc.kill()
        await self.up_proc.wait()

    async def start_gateway(self) -> None:
        port = free_port()
        log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)  # the child keeps its copy
        try:
            self.gateway = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gateway.cli", "serve", "--config", str(self.config_path), "--port", str(port),
                "--reload-poll", "0.25", stdout=asyncio.subprocess.DEVNULL, stderr=log,
                env={**os.environ, "PYTHONPATH": str(REPO)})
        finally:
            os.close(log)
        self.base_url = f"http://127.0.0.1:{port}"
        await wait_http(f"{self.base_url}/readyz")

    async def stop_gateway(self) -> None:
        """SIGTERM: the gateway drains and flushes its audit log before exiting."""
        if self.gateway is not None and self.gateway.returncode is None:
            self.gateway.terminate()
            try:
                await asyncio.wait_for(self.gateway.wait(), 60)
            except TimeoutError:
                self.gateway.kill()
                await self.gateway.wait()

    # -- config -----------------------------------------------------------------------------------

    def write_config(self, notes_text: str | None = None) -> None:
        """(Re)write the watched config file in one step (as a ConfigMap swap does): the same
        bytes every time but the ``notes`` resource's text when ``notes_text`` is given."""
        if notes_text is not None:
            notes = next(c for c in self._config["connectors"] if c["name"] == "notes")
            notes["resources"][0]["text"] = notes_text
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._config, indent=1))
        os.replace(tmp, self.config_path)

    def _build_config(self, sql_url: str, audit_url: str, other_port: int) -> None:
        mcp = {"type": "mcp", "transport": "streamable_http", "protocol": "legacy", "reconnect_initial_s": 0.1,
               "reconnect_max_s": 1.0, "ping_interval_s": 2}
        assert self.resetter is not None
        (self.folder / "soak.json").write_text(json.dumps(REST_SPEC))
        self._config = {
            "gateway": {"log_level": "info", "page_size": 1},
            "audit": {"store": audit_url, "spill_path": str(self.folder / "audit.spill")},
            "connectors": [
                {"name": "up", "url": f"http://127.0.0.1:{self.resetter.port}/mcp", **mcp},
                {"name": "other", "url": f"http://127.0.0.1:{other_port}/mcp", **mcp},
                {"name": "notes", "type": "static",
                 "resources": [{"uri": "notes://runbook", "name": "runbook", "text": "# Runbook v0"}]},
                # 3 s: above the stalls of a loaded shared machine (requests of 1.1 s seen in the
                # steady phase at load 12 on 2 cores; with 1 s such a stall failed REST calls in
                # phases that do not fault it), below the backend's 30 s hang.
                {"name": "rest", "type": "openapi", "spec": str(self.folder / "soak.json"), "base_url": self.rest.url,
                 "timeout_s": 3, "retries": 0},
                {"name": "db", "type": "sql", "url": sql_url, "connect_timeout_s": 2,
                 "queries": [{"name": "count", "description": "how many notes", "sql": "SELECT count(*) AS n FROM notes"}]},
            ]}

    # -- load ---------------------------------------------------------------------------------------

    async def request(self, caller: Caller, phase: Phase, connector: str, method: str, params: dict[str, Any],
                      count_errors: bool = True, expect: str | None = None) -> bool:
        """One request, accounted to ``phase``; True when it succeeded (and its answer contains
        ``expect``, if given)."""
        self._ids += 1
        message = {"jsonrpc": "2.0", "id": f"{phase.name}.{self._ids}", "method": method, "params": params}
        phase.requests += 1
        kind: str | None = None
        sent = time.perf_counter()
        try:
            msg = await caller._post(message)
        except (TimeoutError, RuntimeError, aiohttp.ClientError) as exc:
            kind = f"http: {str(exc)[:50]}"
        else:
            phase.answered += 1
            if msg is None:
                kind = "no answer"
            elif "error" in msg:
                kind = f"{msg['error'].get('code')} {str(msg['error'].get('message'))[:50]}"
            elif msg["result"].get("isError"):
                content = msg["result"].get("content") or [{}]
                kind = f"isError {str(content[0].get('text', ''))[:50]}"
            elif expect is not None and expect not in json.dumps(msg):
                kind = f"not yet {expect}"
        took = time.perf_counter() - sent
        if took > phase.slowest[0]:
            phase.slowest = (took, connector, phase.at() - took)
        if kind is not None and count_errors:
            phase.failed(connector, kind)
        return kind is None

    async def load(self, phase: Phase, seconds: float) -> None:
        """Every caller cycles :data:`MIX` for ``seconds``; RSS and open fds sampled every second."""
        phase.started = time.perf_counter()  # error times are reported from here
        until = phase.started + seconds

        async def loop(i: int, caller: Caller) -> None:
            step = i
            while time.perf_counter() < until:
                connector, method, params = MIX[step % len(MIX)]
                step += 1
                if not await self.request(caller, phase, connector, method, params):
                    await asyncio.sleep(0.01)  # a fast failure must not spin

        async def sample() -> None:
            while time.perf_counter() < until:
                phase.samples.append((rss_kib(self.pid), open_fds(self.pid)))
                await asyncio.sleep(min(1.0, max(0.0, until - time.perf_counter())))
            phase.samples.append((rss_kib(self.pid), open_fds(self.pid)))

        await asyncio.gather(sample(), *(loop(i, c) for i, c in enumerate(self.callers)))

    async def until_serves(self, connector: str, phase: Phase, timeout: float = 120.0,
                           expect: str | None = None) -> float:
        """Seconds until a request on ``connector`` succeeds (its answer containing ``expect`` if
        given); the probe's failures are the fault's, not counted as the phase's errors."""
        assert self.probe is not None
        _, method, params = next(m for m in MIX if m[0] == connector)
        started = time.perf_counter()
        async with asyncio.timeout(timeout):
            while True:
                if await self.request(self.probe, phase, connector, method, params, False, expect):
                    break
                await asyncio.sleep(0.05)
        return time.perf_counter() - started

    # -- observation -------------------------------------------------------------------------------

    async def metric(self, name: str, **labels: str) -> float:
        """The value of one sample of the gateway's /metrics (0 when absent)."""
        assert self.http is not None
        async with self.http.get(f"{self.base_url}/metrics") as resp:
            text = await resp.text()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    return float(sample.value)
        return 0.0

    async def audit_up(self) -> bool:
        assert self.http is not None
        async with self.http.get(f"{self.base_url}/readyz?verbose=1") as resp:
            body = await resp.json(content_type=None)
        return bool(body.get("audit", {}).get("up"))

    def log_lines(self, text: str) -> list[str]:
        """The gateway's log messages containing ``text``."""
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                line = str(json.loads(line).get("message", line))
            if text in line:
                out.append(line)
        return out

    async def audit_rows(self) -> dict[str, int]:
        """Audit rows per phase (the request id's prefix), ``initialize`` excluded."""
        conn = await asyncpg.connect(self.audit_db_url)
        try:
            rows = await conn.fetch("SELECT split_part(request_id, '.', 1) AS phase, count(*) AS n "
                                    "FROM gw_audit_events WHERE method <> 'initialize' GROUP BY 1")
        finally:
            await conn.close()
        return {r["phase"]: int(r["n"]) for r in rows}

    async def kill_sql_backends(self) -> int:
        """Terminate every PostgreSQL backend of the SQL connector's role; how many there were."""
        conn = await asyncpg.connect(self.pg_admin_url)
        try:
            return int(await conn.fetchval("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) "
                                           "FROM pg_stat_activity WHERE usename = $1", self.sql_role))
        finally:
            await conn.close()


async def _stop(proc: asyncio.subprocess.Process | None) -> None:
    if proc is not None and proc.returncode is None:
        proc.kill()
        await proc.wait()


@contextlib.asynccontextmanager
async def rig(concurrency: int, pg_url: str, log_path: Path | None = None) -> AsyncIterator[Rig]:
    """Start everything (module docstring); stop and drop it all when the block ends. The
    gateway's log goes to ``log_path`` when given (an absolute path; kept), else into the run's temporary folder."""
    async with contextlib.AsyncExitStack() as stack:
        r = Rig(Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="soak-"))), concurrency)
        if log_path is not None:
            r.log_path = log_path
        r.pg_admin_url = libpq_url(pg_url)
        audit_db = await stack.enter_async_context(scratch_database(pg_url))
        sql_db = await stack.enter_async_context(scratch_database(pg_url))
        await _setup(sql_db.url, SQL_SETUP)
        r.sql_role = await stack.enter_async_context(pg_role(pg_url, sql_db.name))
        r.audit_db_url = audit_db.url
        r.audit_proxy = CuttableProxy(make_url(audit_db.url).port or 5432)
        await r.audit_proxy.restore()
        stack.push_async_callback(r.audit_proxy.cut)
        audit_url = make_url(audit_db.url).set(host="127.0.0.1", port=r.audit_proxy.port)

        stack.push_async_callback(lambda: _stop(r.up_proc))
        await r.start_up()
        other_port = free_port()
        await stack.enter_async_context(process(sys.executable, "-c", UPSTREAM, str(other_port),
                                                ready_url=f"http://127.0.0.1:{other_port}/mcp"))
        r.resetter = await stack.enter_async_context(ResettingProxy(r.up_port))
        await r.rest.start()
        stack.push_async_callback(r.rest.stop)
        r._build_config(role_url(pg_url, sql_db.name, r.sql_role),
                        audit_url.render_as_string(hide_password=False), other_port)
        r.write_config()
        stack.push_async_callback(lambda: _stop(r.gateway))
        await r.start_gateway()
        r.http = await stack.enter_async_context(aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)))
        gw_url = f"{r.base_url}/mcp"
        r.callers = [Caller(r.http, gw_url, "") for _ in range(concurrency)]
        r.probe = Caller(r.http, gw_url, "")
        await asyncio.gather(*(c.open() for c in (*r.callers, r.probe)))
        yield r


async def _setup(url: str, sql: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()
