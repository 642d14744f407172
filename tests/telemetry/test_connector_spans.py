"""Child spans of the other backends: one CLIENT span per SQL statement (SQLite through the SQL
connector) and per upstream MCP request (a real SDK server over stdio), which receives the trace
context in ``params._meta.traceparent``."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import aiohttp
from opentelemetry.trace import SpanKind

from connectors.sql.traced import operation_of
from gateway.telemetry import tracing
from tests.filters.mcp_http import McpHttp
from tests.support import running_gateway
from tests.telemetry.metrics_client import scrape

HEAD = "gateway:\n  http: {json_response: true}\naudit: {enabled: false}\n"
UPSTREAM = Path(__file__).with_name("upstream_meta.py")


def test_operation_of_statements():
    assert operation_of("  select * from t") == "SELECT"
    assert operation_of("(SELECT 1) UNION (SELECT 2)") == "SELECT"
    assert operation_of("WITH x AS (SELECT 1) SELECT * FROM x") == "WITH"
    assert operation_of("") == "SQL"


async def test_sql_statements_are_child_spans(tmp_path):
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
        conn.executemany("INSERT INTO items (name) VALUES (?)", [("a",), ("b",), ("c",)])
    cfg = HEAD + f"""connectors:
  - name: shop
    type: sql
    url: sqlite+aiosqlite:///{db}
    refresh_s: 0
    queries:
      - {{name: count_items, sql: "SELECT count(*) AS n FROM items"}}
"""
    with tracing.capture_spans() as exporter:
        async with running_gateway(cfg) as gw, aiohttp.ClientSession() as http:
            client = await McpHttp(http, gw.mcp_url).initialize()
            before = await scrape(http, gw.url + "/metrics")
            exporter.clear()
            reply = await client.call("tools/call", {"name": "shop_count_items", "arguments": {}})
            assert "3" in reply["result"]["content"][0]["text"], reply
            after = await scrape(http, gw.url + "/metrics")
        spans = exporter.get_finished_spans()
    (server,) = [s for s in spans if s.kind == SpanKind.SERVER]
    (statement,) = [s for s in spans if s.kind == SpanKind.CLIENT]
    assert statement.parent is not None and statement.parent.span_id == server.context.span_id
    assert statement.name == "SELECT"
    assert statement.attributes["db.system.name"] == "sqlite"
    assert statement.attributes["db.query.text"].startswith("SELECT count(*) AS n FROM items")
    assert after.delta(before, "mcp_gateway_backend_call_duration_seconds_count",
                       connector="shop", kind="sql", outcome="ok") == 1


async def test_upstream_mcp_requests_are_child_spans_and_get_the_traceparent():
    cfg = HEAD + f"""connectors:
  - name: up
    type: mcp
    transport: stdio
    command: {sys.executable}
    args: ["{UPSTREAM}"]
    ping_interval_s: 0
"""
    with tracing.capture_spans() as exporter:
        async with running_gateway(cfg) as gw, aiohttp.ClientSession() as http:
            client = await McpHttp(http, gw.mcp_url).initialize()
            exporter.clear()
            reply = await client.call("tools/call", {"name": "up_meta", "arguments": {}})
        spans = exporter.get_finished_spans()
    (server,) = [s for s in spans if s.kind == SpanKind.SERVER]
    (upstream,) = [s for s in spans if s.kind == SpanKind.CLIENT]
    assert upstream.parent is not None and upstream.parent.span_id == server.context.span_id
    assert upstream.name == "tools/call meta"
    assert upstream.attributes["mcp.method.name"] == "tools/call"
    received = reply["result"]["content"][0]["text"]
    _, trace_id, parent_id, _ = received.split("-")
    assert trace_id == format(server.context.trace_id, "032x")
    assert parent_id == format(upstream.context.span_id, "016x")
