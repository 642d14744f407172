"""The SQL connector against the real PostgreSQL (TEST_PG_URL), each test in its own database."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time

import asyncpg
import pytest

import connectors.sql.connector as connector_module
from connectors.sql.statements import check_single_statement
from gateway.protocol.errors import InvalidParams, ResourceNotFound, ToolExecutionError

from .helpers import (
    admin_execute,
    admin_script,
    asyncpg_url,
    libpq_url,
    make_ctx,
    pg_database,
    server_poll,
    start_connector,
)

SETUP = """
CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL, region text NOT NULL,
                        total numeric(10, 2) NOT NULL DEFAULT 0);
COMMENT ON TABLE customers IS 'People who buy';
INSERT INTO customers (name, region, total)
SELECT 'customer ' || i, (ARRAY['emea', 'amer', 'apac'])[1 + i % 3], i * 1.25 FROM generate_series(1, 300) i;
CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id int NOT NULL REFERENCES customers (id),
                     placed_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX orders_customer ON orders (customer_id);
INSERT INTO orders (customer_id) SELECT 1 + i % 300 FROM generate_series(1, 600) i;
CREATE VIEW customer_totals AS SELECT name, region, total FROM customers;
CREATE SEQUENCE counter;
CREATE FUNCTION sneaky() RETURNS int LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO customers (name, region) VALUES ('sneaky', 'emea'); RETURN 1; END $$;
ANALYZE;
"""

TOP = {
    "name": "top_customers",
    "sql": "SELECT name, total FROM customer_totals WHERE region = :region ORDER BY total DESC LIMIT :n",
    "params": {"region": {"type": "string", "enum": ["emea", "amer", "apac"]},
               "n": {"type": "integer", "default": 10, "minimum": 1, "maximum": 100}},
}
BY_NAME = {"name": "customer_by_name", "sql": "SELECT id, name FROM customers WHERE name = :name",
           "params": {"name": {"type": "string"}}}

ATTACKS = [
    "DROP TABLE customers",
    "UPDATE customers SET total = 0",
    "DELETE FROM orders",
    "INSERT INTO customers (name, region) VALUES ('x', 'emea')",
    "TRUNCATE orders",
    "CREATE TABLE evil (x int)",
    "ALTER TABLE customers DROP COLUMN total",
    "COMMIT; DROP TABLE customers",
    "COMMIT; UPDATE customers SET total = 0",
    "ROLLBACK; BEGIN READ WRITE; DELETE FROM orders",
    "SELECT 1; DELETE FROM orders",
    "WITH gone AS (DELETE FROM orders RETURNING *) SELECT count(*) FROM gone",
    "WITH up AS (UPDATE customers SET total = 0 RETURNING id) SELECT * FROM up",
    "SELECT * FROM customers FOR UPDATE",
    "SELECT * FROM customers WHERE id = 1 FOR SHARE",
    "SELECT sneaky()",
    "SELECT nextval('counter')",
    "SELECT setval('counter', 100)",
    "DO $$ BEGIN DELETE FROM orders; END $$",
    "SELECT * INTO evil FROM customers",
    "CREATE TEMP TABLE scratch AS SELECT 1",
]


async def _state(pg_url: str, db: str) -> list:
    rows = await admin_execute(pg_url, db, """
        SELECT (SELECT count(*) FROM customers), (SELECT sum(total) FROM customers),
               (SELECT count(*) FROM orders), (SELECT last_value FROM counter),
               (SELECT count(*) FROM pg_class WHERE relname IN ('evil', 'scratch'))""")
    return list(rows[0])


async def test_every_write_attempt_fails_and_data_is_unchanged(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with pg_database(pg_url, SETUP) as db:
        before = await _state(pg_url, db)
        async with start_connector({"url": asyncpg_url(pg_url, db), "pool_size": 2}) as (c, _):
            for sql in ATTACKS:
                with pytest.raises(ToolExecutionError, match="Refused") as info:
                    await c.call_tool("query", {"sql": sql}, make_ctx())
                assert info.value.status in ("25006", "statement_check", "refused_statement"), (sql, info.value.message)
            # Without the read-only guard (statement classes), the database still refuses each one.
            monkeypatch.setattr(connector_module, "check_read_statement", lambda sql, dialect: None)
            for sql in ATTACKS:
                with pytest.raises(ToolExecutionError, match="Refused") as info:
                    await c.call_tool("query", {"sql": sql}, make_ctx())
                assert info.value.status in ("25006", "statement_check"), (sql, info.value.message)
            # Without the lexer's check, the database still refuses: the extended protocol takes one
            # statement, and the transaction is read-only.
            monkeypatch.setattr(connector_module, "check_single_statement", lambda sql: sql)
            for sql in ("COMMIT; DROP TABLE customers", "SELECT 1; DELETE FROM orders", "END; DROP TABLE orders"):
                with pytest.raises(ToolExecutionError, match="multiple commands|read-only"):
                    await c.call_tool("query", {"sql": sql}, make_ctx())
            monkeypatch.setattr(connector_module, "check_single_statement", check_single_statement)
            # Statements that end or reconfigure the transaction cannot carry a write with them, and
            # what they change is rolled back: the next call is read-only again.
            for sql in ("COMMIT", "SET default_transaction_read_only = off", "SET transaction_read_only = off",
                        "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE", "RESET ALL"):
                try:
                    await c.call_tool("query", {"sql": sql}, make_ctx())
                except ToolExecutionError:
                    pass
                for _ in range(2):  # both pooled connections
                    with pytest.raises(ToolExecutionError, match="read-only"):
                        await c.call_tool("query", {"sql": "DELETE FROM orders"}, make_ctx())
            shown = await c.call_tool("query", {"sql": "SHOW transaction_read_only"}, make_ctx())
            assert shown["structuredContent"]["rows"] == [["on"]]
        assert await _state(pg_url, db) == before


async def test_named_queries_bind_parameters(pg_url: str) -> None:
    async with pg_database(pg_url, SETUP) as db:
        before = await _state(pg_url, db)
        config = {"url": asyncpg_url(pg_url, db), "queries": [TOP, BY_NAME], "max_rows": 20}
        async with start_connector(config) as (c, _):
            top = await c.call_tool("top_customers", {"region": "emea", "n": 3}, make_ctx())
            rows = top["structuredContent"]["rows"]
            assert len(rows) == 3 and rows[0][1] >= rows[1][1] >= rows[2][1]
            assert isinstance(rows[0][1], (int, float))  # numeric(10,2) → an exact JSON number
            assert len((await c.call_tool("top_customers", {"region": "apac"}, make_ctx()))["structuredContent"]["rows"]) == 10
            for evil in ["x'; DROP TABLE customers; --", "' OR '1'='1", "customer 1' OR 1=1 --", "$$; DELETE FROM orders; $$"]:
                result = await c.call_tool("customer_by_name", {"name": evil}, make_ctx())
                assert result["structuredContent"]["rows"] == []
            hit = await c.call_tool("customer_by_name", {"name": "customer 7"}, make_ctx())
            assert hit["structuredContent"]["rows"] == [[7, "customer 7"]]
            for bad in ({"region": "emea'; DROP TABLE customers; --"}, {"region": "emea", "n": 1000},
                        {"region": "emea", "n": "1; DROP TABLE customers"}):
                with pytest.raises(ToolExecutionError):
                    await c.call_tool("top_customers", bad, make_ctx())
            named = await c.call_tool("query", {"sql": "SELECT count(*) FROM orders WHERE customer_id = :c",
                                                "params": {"c": 5}}, make_ctx())
            assert named["structuredContent"]["rows"] == [[2]]
            positional = await c.call_tool("query", {"sql": "SELECT name FROM customers WHERE id = $1",
                                                     "params": [42]}, make_ctx())
            assert positional["structuredContent"]["rows"] == [["customer 42"]]
            with pytest.raises(ToolExecutionError, match="invalid input for query argument"):
                await c.call_tool("query", {"sql": "SELECT name FROM customers WHERE id = $1", "params": ["x"]},
                                  make_ctx())
        assert await _state(pg_url, db) == before


async def test_statement_timeout_cancels_on_the_server(pg_url: str) -> None:
    async with pg_database(pg_url, SETUP) as db:
        async with start_connector({"url": asyncpg_url(pg_url, db), "statement_timeout_s": 0.3}) as (c, _):
            started = time.perf_counter()
            with pytest.raises(ToolExecutionError, match="statement timeout of 0.3s") as info:
                await c.call_tool("query", {"sql": "SELECT pg_sleep(30)"}, make_ctx())
            assert info.value.status == "57014"
            assert time.perf_counter() - started < 3
            running = await admin_execute(pg_url, db, "SELECT count(*) FROM pg_stat_activity "
                                                      "WHERE query LIKE '%pg_sleep(30)%' AND state = 'active' "
                                                      "AND pid <> pg_backend_pid()")
            assert running[0][0] == 0
            assert (await c.call_tool("query", {"sql": "SELECT 1"}, make_ctx()))["structuredContent"]["rows"] == [[1]]


async def test_pages_stream_from_the_server(pg_url: str) -> None:
    async with pg_database(pg_url, SETUP) as db:
        async with start_connector({"url": asyncpg_url(pg_url, db), "max_rows": 100,
                                    "statement_timeout_s": 5}) as (c, _):
            # An infinite result returns at once: the server stops after max_rows + 1 rows.
            forever = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT i FROM r"
            first = (await c.call_tool("query", {"sql": forever}, make_ctx()))["structuredContent"]
            assert first["rows"][-1] == [100] and first["truncated"]
            second = await c.call_tool("query", {"sql": forever, "cursor": first["nextCursor"]}, make_ctx())
            assert second["structuredContent"]["rows"][0] == [101]
            assert "rows 101-200" in second["content"][0]["text"]
            seen, args = [], {"sql": "SELECT id FROM customers ORDER BY id"}
            while True:
                page = (await c.call_tool("query", args, make_ctx()))["structuredContent"]
                seen += [r[0] for r in page["rows"]]
                if not page["nextCursor"]:
                    break
                args["cursor"] = page["nextCursor"]
            assert seen == list(range(1, 301))


async def test_introspection_resources_and_change_notifications(pg_url: str) -> None:
    async with pg_database(pg_url, SETUP) as db:
        async with start_connector({"url": asyncpg_url(pg_url, db), "refresh_s": 0}) as (c, events):
            ctx = make_ctx("resources/read")
            assert {r.uri for r in c.resources()} == {"sql://db/overview", "sql://db/public/customers",
                                                      "sql://db/public/orders", "sql://db/public/customer_totals"}
            data = json.loads((await c.read_resource("sql://db/public/orders", ctx))["contents"][1]["text"])
            assert data["primaryKey"] == ["id"]
            assert data["foreignKeys"] == [{"columns": ["customer_id"], "references": {
                "schema": "public", "table": "customers", "columns": ["id"]}}]
            assert {i["name"] for i in data["indexes"]} == {"orders_pkey", "orders_customer"}
            assert data["rowEstimate"] == 600
            cols = {col["name"]: col for col in data["columns"]}
            assert cols["placed_at"] == {"name": "placed_at", "type": "timestamp with time zone",
                                         "nullable": False, "default": "now()"}
            customers = json.loads((await c.read_resource("sql://db/public/customers", ctx))["contents"][1]["text"])
            assert customers["comment"] == "People who buy"
            row = json.loads((await c.read_resource("sql://db/public/customers/row/42", ctx))["contents"][0]["text"])
            assert row == {"id": 42, "name": "customer 42", "region": "emea", "total": 52.5}
            with pytest.raises(ResourceNotFound):
                await c.read_resource("sql://db/public/customers/row/4242", ctx)
            with pytest.raises(InvalidParams):
                await c.read_resource("sql://db/public/customers/row/abc", ctx)
            plan = await c.call_tool("explain", {"sql": "SELECT * FROM orders WHERE customer_id = $1",
                                                 "params": [3]}, make_ctx())
            assert "orders" in plan["content"][0]["text"]

            await c.subscribe("sql://db/public/orders", ctx)
            await admin_script(pg_url, db, "ALTER TABLE orders ADD COLUMN note text; CREATE TABLE audit (id int)")
            await c.call_tool("list_tables", {"refresh": True}, make_ctx())
            await events.wait_for(lambda kind, value: kind == "resource_updated" and value == "sql://db/public/orders")
            assert ("components_changed", None) in events.calls
            assert "sql://db/public/audit" in {r.uri for r in c.resources()}
            assert ("resource_updated", "sql://db/public/customers") not in events.calls


async def test_database_going_away_and_coming_back(pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    secret = "Sup3r-s3cret!pw"
    async with pg_database(pg_url, SETUP) as db:
        url = asyncpg_url(pg_url, db, password=secret)  # trust auth ignores it; it must never show
        async with start_connector({"url": url, "connect_timeout_s": 2}) as (c, events):
            ok = await c.call_tool("query", {"sql": "SELECT count(*) FROM customers"}, make_ctx())
            assert ok["structuredContent"]["rows"] == [[300]]

            # Backends killed under the pool: the next call reconnects transparently.
            await admin_execute(pg_url, "postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                                    "WHERE datname = $1 AND pid <> pg_backend_pid()", db)
            again = await c.call_tool("query", {"sql": "SELECT count(*) FROM orders"}, make_ctx())
            assert again["structuredContent"]["rows"] == [[600]]
            assert c.health().up

            # The database disappears: tools fail clearly and readiness says down.
            mark = events.mark()
            await admin_execute(pg_url, "postgres", f'DROP DATABASE "{db}" WITH (FORCE)')
            with pytest.raises(ToolExecutionError, match="Database unavailable") as info:
                await c.call_tool("query", {"sql": "SELECT 1"}, make_ctx())
            assert secret not in info.value.message
            assert not c.health().up and secret not in c.health().detail
            await events.wait_for(lambda kind, h: kind == "health_changed" and not h.up, since=mark)

            # It comes back (built aside, then renamed: it appears complete): the monitor notices
            # without a restart and re-reads the schema.
            mark = events.mark()
            await admin_execute(pg_url, "postgres", f'CREATE DATABASE "{db}_next"')
            await admin_script(pg_url, f"{db}_next", SETUP)
            await admin_execute(pg_url, "postgres", f'ALTER DATABASE "{db}_next" RENAME TO "{db}"')
            await events.wait_for(lambda kind, h: kind == "health_changed" and h.up, timeout=15, since=mark)
            assert c.health().up
            back = await c.call_tool("query", {"sql": "SELECT count(*) FROM customers"}, make_ctx())
            assert back["structuredContent"]["rows"] == [[300]]
            assert "sql://db/public/customers" in {r.uri for r in c.resources()}

            # A connection killed mid-statement: that call fails, the connector recovers.
            mark = events.mark()
            task = asyncio.create_task(c.call_tool("query", {"sql": "SELECT pg_sleep(5)"}, make_ctx()))
            await server_poll(pg_url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 "
                                      "AND query = 'SELECT pg_sleep(5)' AND pid <> pg_backend_pid()", db,
                              until=bool)
            with pytest.raises(ToolExecutionError, match="unavailable|terminat"):
                await task
            await events.wait_for(lambda kind, h: kind == "health_changed" and h.up, timeout=15, since=mark)
            assert (await c.call_tool("query", {"sql": "SELECT 1"}, make_ctx()))["structuredContent"]["rows"] == [[1]]
            for uri in ("sql://db/overview", "sql://db/public/customers"):
                text = json.dumps(await c.read_resource(uri, make_ctx()))
                assert secret not in text
            assert secret not in json.dumps(c.health().extra)
    assert secret not in caplog.text
    assert secret not in json.dumps([str(v) for _, v in events.calls])


async def test_unreachable_at_start_comes_up_later(pg_url: str) -> None:
    name = f"gw_sql_test_{secrets.token_hex(4)}"
    url = asyncpg_url(pg_url, name, password="Never-Show-Me")
    async with start_connector({"url": url, "connect_timeout_s": 2}) as (c, events):
        assert not c.health().up and "Never-Show-Me" not in c.health().detail
        with pytest.raises(ToolExecutionError, match="Database unavailable") as info:
            await c.call_tool("query", {"sql": "SELECT 1"}, make_ctx())
        assert "Never-Show-Me" not in info.value.message
        admin = await asyncpg.connect(libpq_url(pg_url))
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
            await events.wait_for(lambda kind, h: kind == "health_changed" and h.up, timeout=15)
            assert c.resources()[0].uri == "sql://db/overview"
        finally:
            await c.stop()
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            await admin.close()


async def test_writes_only_through_execute(pg_url: str) -> None:
    async with pg_database(pg_url, SETUP) as db:
        async with start_connector({"url": asyncpg_url(pg_url, db), "allow_writes": True}) as (c, _):
            assert "execute" in {t.name for t in c.tools()}
            with pytest.raises(ToolExecutionError, match="read-only"):
                await c.call_tool("query", {"sql": "DELETE FROM orders"}, make_ctx())
            result = await c.call_tool("execute", {"sql": "UPDATE customers SET total = total + 1 WHERE region = $1 "
                                                          "RETURNING id", "params": ["emea"]}, make_ctx())
            assert result["structuredContent"]["rowcount"] == 100
            with pytest.raises(ToolExecutionError, match="one SQL statement"):
                await c.call_tool("execute", {"sql": "DELETE FROM orders; DROP TABLE customers"}, make_ctx())
        rows = await admin_execute(pg_url, db, "SELECT count(*) FROM orders")
        assert rows[0][0] == 600


async def test_cancelled_call_stops_the_statement_on_the_server(pg_url: str) -> None:
    async with pg_database(pg_url, SETUP) as db:
        async with start_connector({"url": asyncpg_url(pg_url, db), "pool_size": 1}) as (c, _):
            task = asyncio.create_task(c.call_tool("query", {"sql": "SELECT pg_sleep(20)"}, make_ctx()))
            active = "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND state = 'active' " \
                     "AND query = 'SELECT pg_sleep(20)'"
            await server_poll(pg_url, active, db, until=lambda rows: rows[0][0] == 1)
            task.cancel()  # what a downstream notifications/cancelled does
            with pytest.raises(asyncio.CancelledError):
                await task
            await server_poll(pg_url, active, db, until=lambda rows: rows[0][0] == 0)
            # The only pooled connection was replaced: the next call works.
            assert (await c.call_tool("query", {"sql": "SELECT 1"}, make_ctx()))["structuredContent"]["rows"] == [[1]]
