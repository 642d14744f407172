"""Issue 14, row 1: SQL results had no byte cap.

Attacks: a least-privilege PostgreSQL role returns 20 values of 20 MB (the gateway grew by 1.2 GB and
/healthz took 4 s), many medium rows, a plan with a folded giant constant; on SQLite a 1 GB
``zeroblob`` (ran 58 s with a 3 s timeout), a row of many 4 MiB blobs, and a runaway recursive CTE.
Each now fails in the intended way — a page cut at ``max_bytes`` with ``truncatedBy``, or a clear
refusal naming ``max_bytes``, or the statement timeout — and the gateway keeps serving meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path

import aiohttp
import pytest

from gateway.protocol.errors import ToolExecutionError
from tests.connectors.sql.helpers import make_ctx, pg_database, start_connector
from tests.e2e.rawhttp import initialize
from tests.support import gateway_process, running_gateway

from .support import SETUP, healthz, hwm_mib, loop_probe, pg_role, probing, role_url, rss_mib, tool_call

DEMO = Path(__file__).resolve().parents[2] / "examples" / "data" / "shop.db"
MIB = 1 << 20


def _config(url: str, extra: str = "") -> str:
    return f"""
        audit: {{enabled: false}}
        telemetry: {{metrics: false}}
        connectors:
          - name: db
            type: sql
            url: {json.dumps(url)}
            statement_timeout_s: 20
        {extra}"""


async def test_huge_values_from_a_least_privilege_role_are_cut_while_the_gateway_keeps_serving(pg_url: str) -> None:
    async with pg_database(pg_url, SETUP) as db, pg_role(pg_url, db) as role, \
            gateway_process(_config(role_url(pg_url, db, role))) as gw, aiohttp.ClientSession() as http:
        pid = gw.proc.pid
        session = await initialize(http, gw.mcp_url)
        warm = await tool_call(session, "db_query", {"sql": "SELECT count(*) FROM customers"})
        assert warm["structuredContent"]["rows"] == [[300]]
        before = rss_mib(pid)
        async with probing(healthz(http, gw.url)) as probe:
            result = await tool_call(session, "db_query",
                                     {"sql": "SELECT repeat('x', 20000000) FROM generate_series(1, 20)"})
        page = result["structuredContent"]
        # The first value alone is over the 4 MiB budget: the page is that one row, its value cut on
        # the server to the budget; more rows exist.
        assert page["valuesCut"] is True and page["truncatedBy"] == "max_bytes" and page["truncated"] is True
        assert len(page["rows"]) == 1 and 1 * MIB < len(page["rows"][0][0]) <= 4 * MIB
        assert "larger than the byte budget (max_bytes = 4 MiB)" in result["content"][0]["text"]
        grown = hwm_mib(pid) - before
        assert grown < 120, f"the gateway grew by {grown:.0f} MiB (400 MB of values were asked for)"
        assert len(probe.samples) >= 5 and probe.worst < 0.1, f"/healthz took up to {probe.worst * 1000:.0f} ms"

        # The next page is the next row: the cursor moves on, the budget holds page after page.
        following = await tool_call(session, "db_query", {"sql": "SELECT repeat('x', 20000000) FROM generate_series(1, 20)",
                                                          "cursor": page["nextCursor"]})
        assert following["structuredContent"]["valuesCut"] is True
        assert "rows 2-2" in following["content"][0]["text"]

        # A folded constant in a plan cannot be wrapped: the byte meter on the socket stops it.
        before = rss_mib(pid)
        async with probing(healthz(http, gw.url)) as probe:
            refused = await tool_call(session, "db_query", {"sql": "EXPLAIN VERBOSE SELECT repeat('x', 200000000)"})
        assert refused["isError"] is True and "max_bytes" in refused["content"][0]["text"]
        assert hwm_mib(pid) - before < 120
        assert probe.worst < 0.1, f"/healthz took up to {probe.worst * 1000:.0f} ms"
        # The connection it used was discarded; the connector is up and serves the next call.
        again = await tool_call(session, "db_query", {"sql": "SELECT count(*) FROM docs"})
        assert again["structuredContent"]["rows"] == [[120]]


async def test_a_page_stops_at_the_budget_and_paging_resumes_at_the_next_row(pg_url: str) -> None:
    async with pg_database(pg_url, SETUP) as db, pg_role(pg_url, db) as role, \
            start_connector({"url": role_url(pg_url, db, role), "max_bytes": MIB, "allow_privileged": False}) as (c, _):
        sql = "SELECT id, body, meta FROM docs ORDER BY id"  # 120 rows of ~100 kB
        seen: list[int] = []
        args: dict[str, object] = {"sql": sql}
        pages = 0
        while True:
            result = await c.call_tool("query", args, make_ctx())
            page = result["structuredContent"]
            pages += 1
            size = sum(len(r[1]) for r in page["rows"])
            assert size <= MIB and not page["valuesCut"]
            seen += [r[0] for r in page["rows"]]
            assert all(r[2] == {"k": 1} for r in page["rows"])
            if not page["truncated"]:
                assert page["truncatedBy"] is None
                break
            assert page["truncatedBy"] == "max_bytes" and len(page["rows"]) == 10
            assert "stopped at the byte budget (max_bytes = 1 MiB)" in result["content"][0]["text"]
            args = {"sql": sql, "cursor": page["nextCursor"]}
        assert seen == list(range(1, 121)) and pages == 12
        # Small rows are untouched: the row limit ends the page, as before.
        small = (await c.call_tool("query", {"sql": "SELECT id, name FROM customers ORDER BY id"},
                                   make_ctx()))["structuredContent"]
        assert len(small["rows"]) == 300 and not small["truncated"] and small["truncatedBy"] is None
        # A bytea value over the budget is cut to a prefix of at most the budget.
        blob = (await c.call_tool("query", {"sql": "SELECT decode(repeat('ff', 3000000), 'hex') AS b"},
                                  make_ctx()))["structuredContent"]
        assert blob["valuesCut"] and 1000 < len(blob["rows"][0][0]) <= 2 * MIB + 2  # "\\x" + hex


async def test_sqlite_giant_values_are_refused_and_runaway_statements_stop_at_the_timeout(tmp_path: Path) -> None:
    shutil.copy(DEMO, tmp_path / "shop.db")
    config = {"url": f"sqlite+aiosqlite:///{tmp_path / 'shop.db'}", "statement_timeout_s": 3, "max_bytes": 4 * MIB}
    async with start_connector(config) as (c, _):
        for sql in ("SELECT zeroblob(1000000000)",
                    "SELECT " + ", ".join(["zeroblob(4194304)"] * 100),  # each fits, together 400 MiB
                    "SELECT length(zeroblob(1000000000))"):
            started = time.perf_counter()
            async with probing(loop_probe) as probe:
                with pytest.raises(ToolExecutionError, match="max_bytes") as info:
                    await c.call_tool("query", {"sql": sql}, make_ctx())
            assert info.value.status == "max_bytes"
            assert time.perf_counter() - started < 1.0, sql[:40]
            assert probe.worst_cpu < 0.1, f"the event loop worked {probe.worst_cpu * 1000:.0f} ms in one span"

        forever = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"
        started = time.perf_counter()
        async with probing(loop_probe) as probe:
            with pytest.raises(ToolExecutionError, match="statement timeout of 3s") as info:
                await c.call_tool("query", {"sql": forever}, make_ctx())
        elapsed = time.perf_counter() - started
        assert info.value.status == "timeout" and 2.9 < elapsed < 4.5, elapsed
        assert probe.worst_cpu < 0.1, f"the event loop worked {probe.worst_cpu * 1000:.0f} ms in one span"

        # An endless stream of 100 kB rows: the page stops at the budget, at once.
        stream = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT i, randomblob(100000) FROM r"
        page = (await c.call_tool("query", {"sql": stream}, make_ctx()))["structuredContent"]
        assert page["truncatedBy"] == "max_bytes" and page["truncated"] and len(page["rows"]) == 41
        # The connector is still fine, EXPLAIN (not explainable itself) included.
        count = await c.call_tool("query", {"sql": "SELECT count(*) FROM customers"}, make_ctx())
        assert count["structuredContent"]["rows"] == [[120]]
        plan = await c.call_tool("query", {"sql": "EXPLAIN QUERY PLAN SELECT * FROM customers"}, make_ctx())
        assert "customers" in str(plan["structuredContent"]["rows"])


async def test_encoding_a_full_page_does_not_stall_the_event_loop(pg_url: str) -> None:
    """The gateway in this process: a coroutine timed on the same loop while pages of the full
    budget are shaped, encoded and sent."""
    async with pg_database(pg_url, SETUP) as db, pg_role(pg_url, db) as role, \
            running_gateway(_config(role_url(pg_url, db, role))) as gw, aiohttp.ClientSession() as http:
        session = await initialize(http, gw.mcp_url)
        async with probing(loop_probe, every_s=0.002) as probe:
            for sql in ("SELECT id, body FROM docs ORDER BY id",  # ~4 MiB in 41 rows
                        "SELECT i, md5(i::text) || repeat('y', 8000) FROM generate_series(1, 500) i",  # 500 rows
                        "SELECT repeat('é', 5000000)"):  # one cut value, multi-byte
                calls = [tool_call(session, "db_query", {"sql": sql}) for _ in range(3)]
                results = await asyncio.gather(*calls)
                assert all(not r.get("isError") for r in results), results[0]
        assert len(probe.samples) > 20
        # The loop thread's CPU time across each 1 ms timer: the gateway's own work between two turns
        # of the loop, which a busy machine does not inflate (wall time does: 360 ms seen under load).
        assert probe.worst_cpu < 0.1, f"the event loop worked {probe.worst_cpu * 1000:.0f} ms without a turn"
