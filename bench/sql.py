"""SQL connector: ``query`` latency through the gateway next to asyncpg alone, and peak memory of a
query whose result is larger than ``max_rows``, measured in one run against the local PostgreSQL.

    .venv/bin/python bench/sql.py [--rows N] [--iterations I] [--pg-url URL]

Setup: a throwaway database ``gw_sql_bench_<hex>`` with ``items`` (N rows, default 1,000,000) and
two smaller copies (N/100 and N/10 rows); dropped at the end.

Latency (single-row primary-key lookup, random ids, sequential requests, p50/p99 in ms):

* ``asyncpg direct`` — ``conn.fetch(sql, id)`` on one connection (prepared, cached): the floor;
* ``connector.call_tool`` — the connector in this process (read-only transaction, timeout, row cap,
  JSON shaping and the text table);
* ``gateway tools/call`` — a gateway in a child process over Streamable HTTP on loopback, raw aiohttp
  client with an initialized session (core only: audit and metrics off);
* ``gateway ping`` — the same session's ``ping``: the transport's own floor.

The connector and gateway paths run twice, interleaved in the same run: with the default byte
budget (``max_bytes`` 4 MiB: the statement is wrapped so the server withholds values that do not
fit) and with ``max_bytes: 0`` (no budget, the statement as sent) — the "budget cost" column is the
p50 difference. A second table does the same for a 500-row page (``WHERE id BETWEEN $1 AND $1 + 499``).

"added" is the p50 difference to asyncpg direct. Memory: tracemalloc peak while running
``SELECT * FROM <table>`` through the connector (``max_rows`` = 500) next to asyncpg ``fetch`` of
the same statement; the connector's peak stays flat as the table grows. ``BENCH_ITERATIONS`` and
``BENCH_SQL_ROWS`` override the defaults (the smoke test runs tiny sizes).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import secrets
import socket
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import asyncpg

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

__all__ = ["main"]

PROTOCOL = "2025-11-25"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "MCP-Protocol-Version": PROTOCOL}
LOOKUP = "SELECT id, name, qty, price, created_at FROM items WHERE id = $1"
PAGE = "SELECT id, name, qty, price, created_at FROM items WHERE id BETWEEN $1 AND $1 + 499"
MAX_ROWS = 500
OFF = ", max_bytes off"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _sa_url(pg_url: str, database: str) -> str:
    from sqlalchemy.engine import make_url

    url = make_url(pg_url).set(drivername="postgresql+asyncpg", database=database)
    return url.render_as_string(hide_password=False)


def _libpq(pg_url: str, database: str | None = None) -> str:
    from sqlalchemy.engine import make_url

    url = make_url(pg_url).set(drivername="postgresql")
    return (url.set(database=database) if database else url).render_as_string(hide_password=False)


def _config(url: str) -> str:
    # Two connectors on the same database: db (default byte budget) and raw (max_bytes: 0).
    return f"""
audit: {{enabled: false}}
telemetry: {{metrics: false}}
gateway: {{name: bench, log_level: warning, http: {{json_response: true}}}}
connectors:
  - {{name: db, type: sql, url: {json.dumps(url)}, max_rows: {MAX_ROWS}, refresh_s: 0, allow_privileged: true}}
  - {{name: raw, type: sql, url: {json.dumps(url)}, max_rows: {MAX_ROWS}, refresh_s: 0, allow_privileged: true,
      max_bytes: 0}}
"""


async def _serve_gateway(port: int, url: str) -> None:
    from aiohttp import web

    from gateway.app import Gateway
    from gateway.config import parse_config
    from gateway.transports.http_app import build_app

    gateway = Gateway(parse_config(_config(url), base_dir=REPO))
    await gateway.start()
    runner = web.AppRunner(build_app(gateway), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


def _spawn(port: int, url: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve-gateway", str(port), url],
                            cwd=REPO, stdout=subprocess.DEVNULL)


# -- setup -------------------------------------------------------------------------------------

async def _create(pg_url: str, rows: int) -> str:
    name = f"gw_sql_bench_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(_libpq(pg_url))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    conn = await asyncpg.connect(_libpq(pg_url, name))
    try:
        await conn.execute(f"""
            CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL,
                                price numeric(10, 2) NOT NULL, created_at timestamptz NOT NULL);
            INSERT INTO items SELECT i, 'item ' || i, i % 97, (i % 1000) / 10.0,
                                     '2025-01-01'::timestamptz + i * interval '1 second'
            FROM generate_series(1, {rows}) i;
            CREATE TABLE items_small AS SELECT * FROM items WHERE id <= {max(1, rows // 100)};
            CREATE TABLE items_medium AS SELECT * FROM items WHERE id <= {max(1, rows // 10)};
            ANALYZE;""")
    finally:
        await conn.close()
    return name


async def _drop(pg_url: str, name: str) -> None:
    admin = await asyncpg.connect(_libpq(pg_url))
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


# -- measuring ---------------------------------------------------------------------------------

Call = Callable[[int], Awaitable[None]]


async def _latency(calls: dict[str, Call], n: int, rows: int) -> list[tuple[str, float, float]]:
    """p50/p99 per path; the paths are interleaved request by request so that background load on
    the machine hits all of them alike."""
    rng = random.Random(1)
    for call in calls.values():  # warm-up: pools, prepared statements, code paths
        for _ in range(max(5, n // 20)):
            await call(rng.randint(1, rows))
    samples: dict[str, list[float]] = {name: [] for name in calls}
    order = list(calls.items())
    for i in range(n):
        key = rng.randint(1, rows)
        for name, call in order[i % len(order):] + order[:i % len(order)]:
            started = time.perf_counter()
            await call(key)
            samples[name].append((time.perf_counter() - started) * 1000)
    out = []
    for name, values in samples.items():
        values.sort()
        out.append((name, statistics.median(values), values[min(len(values) - 1, int(len(values) * 0.99))]))
    return out


async def _peak_kib(run: Callable[[], Awaitable[object]]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        result = await run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del result
    return peak / 1024


async def _run(pg_url: str, rows: int, iterations: int) -> str:
    from connectors.sql.config import SQLConfig
    from connectors.sql.connector import SQLConnector
    from gateway.context import CallContext

    class _Events:
        def components_changed(self) -> None: ...
        def resource_updated(self, uri: str) -> None: ...
        def log(self, level: str, data: object, logger: str | None = None) -> None: ...
        def health_changed(self, health: object) -> None: ...

    class _Session:
        id, transport, protocol_version = "bench", "bench", PROTOCOL
        client_info: dict = {}
        client_capabilities: dict = {}

        async def notify(self, *a: object, **k: object) -> None: ...
        async def request(self, *a: object, **k: object) -> dict: return {}

    db = await _create(pg_url, rows)
    url = _sa_url(pg_url, db)
    port = _free_port()
    child = _spawn(port, url)
    connectors = {budget: SQLConnector(SQLConfig.model_validate(
        {"name": "db", "type": "sql", "url": url, "max_rows": MAX_ROWS, "refresh_s": 0, "allow_privileged": True,
         **({} if budget else {"max_bytes": 0})})) for budget in (True, False)}
    connector = connectors[True]
    for c in connectors.values():
        await c.start(_Events())
    direct = await asyncpg.connect(_libpq(pg_url, db))
    latency: list[tuple[str, float, float]] = []
    pages: list[tuple[str, float, float]] = []
    memory: list[tuple[str, int, float, float]] = []
    try:
        async def via_asyncpg(key: int) -> None:
            assert len(await direct.fetch(LOOKUP, key)) == 1

        def ctx() -> CallContext:
            return CallContext(session=_Session(), method="tools/call", request_id=1, params={})

        def via_connector(budget: bool, sql: str = LOOKUP, expect: int = 1) -> Call:
            async def call(key: int) -> None:
                result = await connectors[budget].call_tool("query", {"sql": sql, "params": [key]}, ctx())
                assert len(result["structuredContent"]["rows"]) == min(expect, rows - key + 1), result

            return call

        async with aiohttp.ClientSession() as http:
            gw = f"http://127.0.0.1:{port}/mcp"
            deadline = time.monotonic() + 30
            while True:
                if child.poll() is not None:
                    raise RuntimeError(f"gateway exited with {child.returncode}")
                try:
                    async with http.get(f"http://127.0.0.1:{port}/readyz") as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientConnectionError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("gateway did not become ready")
                await asyncio.sleep(0.05)
            init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
            async with http.post(gw, json=init, headers=HEADERS) as resp:
                headers = {**HEADERS, "Mcp-Session-Id": resp.headers["Mcp-Session-Id"]}
            async with http.post(gw, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                                 headers=headers) as resp:
                assert resp.status == 202

            def via_gateway(budget: bool) -> Call:
                tool = "db_query" if budget else "raw_query"

                async def call(key: int) -> None:
                    body = {"jsonrpc": "2.0", "id": key, "method": "tools/call",
                            "params": {"name": tool, "arguments": {"sql": LOOKUP, "params": [key]}}}
                    async with http.post(gw, data=json.dumps(body), headers=headers) as resp:
                        reply = await resp.json()
                    assert len(reply["result"]["structuredContent"]["rows"]) == 1, reply

                return call

            ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})

            async def gateway_ping(key: int) -> None:
                async with http.post(gw, data=ping, headers=headers) as resp:
                    assert "result" in await resp.json()

            # The rotation keeps this cyclic order, so each path always follows the same one: a
            # connector call finishes its release (ROLLBACK and pool reset) in the background, which
            # would slow whatever runs next. Each "on" path and its "off" twin follow alike.
            latency = await _latency({"asyncpg direct": via_asyncpg, "connector.call_tool": via_connector(True),
                                      "gateway tools/call": via_gateway(True), "gateway ping": gateway_ping,
                                      "connector.call_tool" + OFF: via_connector(False),
                                      "gateway tools/call" + OFF: via_gateway(False)}, iterations, rows)
            pages = await _latency({"connector.call_tool": via_connector(True, PAGE, 500),
                                    "connector.call_tool" + OFF: via_connector(False, PAGE, 500)},
                                   max(20, iterations // 10), max(1, rows - 500))

        for table, size in (("items_small", max(1, rows // 100)), ("items_medium", max(1, rows // 10)),
                            ("items", rows)):
            sql = f"SELECT * FROM {table}"

            async def through(sql: str = sql) -> object:
                return await connector.call_tool("query", {"sql": sql}, ctx())

            async def fetch_all(sql: str = sql) -> object:
                return await direct.fetch(sql)

            memory.append((table, size, await _peak_kib(through), await _peak_kib(fetch_all)))
    finally:
        await direct.close()
        for c in connectors.values():
            await c.stop()
        child.terminate()
        child.wait(timeout=10)
        await _drop(pg_url, db)
    return _tables(latency, pages, memory, rows, iterations)


_ORDER = ["asyncpg direct", "connector.call_tool", "connector.call_tool" + OFF, "gateway tools/call",
          "gateway tools/call" + OFF, "gateway ping"]


def _latency_table(title: str, results: list[tuple[str, float, float]], base: float | None) -> list[str]:
    head = f"{'path':<38} {'p50 ms':>8} {'p99 ms':>8} {'added p50 ms':>13} {'budget cost p50 ms':>19}"
    out = [title, head, "-" * len(head)]
    p50s = {name: p50 for name, p50, _ in results}
    for name, p50, p99 in sorted(results, key=lambda r: _ORDER.index(r[0]) if r[0] in _ORDER else len(_ORDER)):
        added = "" if base is None or name in ("asyncpg direct", "gateway ping") else f"{p50 - base:+.3f}"
        cost = f"{p50 - p50s[name + OFF]:+.3f}" if name + OFF in p50s else ""
        out.append(f"{name:<38} {p50:>8.3f} {p99:>8.3f} {added:>13} {cost:>19}")
    return out


def _tables(latency: list[tuple[str, float, float]], pages: list[tuple[str, float, float]],
            memory: list[tuple[str, int, float, float]], rows: int, iterations: int) -> str:
    out = _latency_table(f"query latency: single-row primary-key lookup in a {rows:,}-row table ({iterations} "
                         "sequential requests per path, interleaved; loopback PostgreSQL)", latency, latency[0][1])
    out.append("")
    out += _latency_table(f"a 500-row page (id BETWEEN $1 AND $1 + 499; {max(20, iterations // 10)} requests per "
                          "path, interleaved)", pages, None)
    out.append("")
    head = f"{'table':<14} {'rows':>10} {'connector peak KiB':>19} {'asyncpg fetch() peak KiB':>25}"
    out += [f"peak memory of SELECT * FROM <table> (max_rows = {MAX_ROWS}; tracemalloc)", head, "-" * len(head)]
    for table, size, ours, theirs in memory:
        out.append(f"{table:<14} {size:>10,} {ours:>19,.0f} {theirs:>25,.0f}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=int(os.environ.get("BENCH_SQL_ROWS", "1000000")))
    parser.add_argument("--iterations", type=int, default=int(os.environ.get("BENCH_ITERATIONS", "2000")))
    parser.add_argument("--pg-url", default=os.environ.get("TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"))
    parser.add_argument("--serve-gateway", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_gateway is not None:
        asyncio.run(_serve_gateway(int(args.serve_gateway[0]), args.serve_gateway[1]))
        return 0
    print(asyncio.run(_run(args.pg_url, args.rows, args.iterations)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
