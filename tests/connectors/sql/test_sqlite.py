"""The SQL connector against SQLite (a copy of the shipped demo database)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from gateway.protocol.errors import ConfigError, InvalidParams, ResourceNotFound, ToolExecutionError

from .helpers import make_ctx, start_connector

DEMO = Path(__file__).resolve().parents[3] / "examples" / "data" / "shop.db"

TOP = {
    "name": "top_customers",
    "description": "Customers with the highest total spend in a region",
    "sql": "SELECT name, total FROM customer_totals WHERE region = :region ORDER BY total DESC LIMIT :n",
    "params": {"region": {"type": "string", "enum": ["emea", "amer", "apac"]},
               "n": {"type": "integer", "default": 10, "minimum": 1, "maximum": 100}},
}
BY_NAME = {"name": "customer_by_name", "sql": "SELECT id, name FROM customers WHERE name = :name",
           "params": {"name": {"type": "string"}}}


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    target = tmp_path / "shop.db"
    shutil.copy(DEMO, target)
    return target


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_components_and_introspection(shop: Path) -> None:
    # A relative sqlite path resolves against the connector's base_dir (the config file's folder).
    async with start_connector({"url": "sqlite+aiosqlite:///shop.db", "queries": [TOP]}, shop.parent) as (c, _):
        assert c.health().up
        assert {t.name for t in c.tools()} == {"query", "list_tables", "describe_table", "explain", "top_customers"}
        assert {r.uri for r in c.resources()} == {
            "sql://db/overview", "sql://db/main/customers", "sql://db/main/orders", "sql://db/main/order_items",
            "sql://db/main/products", "sql://db/main/customer_totals"}
        assert c.capabilities() >= {"tools", "resources", "prompts", "completions", "subscribe"}
        ctx = make_ctx()
        listed = await c.call_tool("list_tables", {}, ctx)
        kinds = {t["name"]: t["kind"] for t in listed["structuredContent"]["tables"]}
        assert kinds["customer_totals"] == "view" and kinds["orders"] == "table"
        described = (await c.call_tool("describe_table", {"table": "order_items"}, ctx))["structuredContent"]
        assert described["primaryKey"] == ["order_id", "product_id"]
        assert {f["references"]["table"] for f in described["foreignKeys"]} == {"orders", "products"}
        with pytest.raises(ToolExecutionError, match="Unknown table 'nope'"):
            await c.call_tool("describe_table", {"table": "nope"}, ctx)
        overview = await c.read_resource("sql://db/overview", ctx)
        assert "main.orders" in overview["contents"][0]["text"]
        assert json.loads(overview["contents"][1]["text"])["readOnly"] is True
        table = await c.read_resource("sql://db/main/orders", ctx)
        assert table["contents"][0]["mimeType"] == "text/markdown"
        assert json.loads(table["contents"][1]["text"])["foreignKeys"][0]["references"]["table"] == "customers"


async def test_query_paging_and_named_query(shop: Path) -> None:
    async with start_connector({"url": f"sqlite+aiosqlite:///{shop}", "max_rows": 50,
                                "queries": [TOP, BY_NAME]}) as (c, _):
        ctx = make_ctx()
        seen, args = [], {"sql": "SELECT id FROM customers ORDER BY id"}
        while True:
            result = await c.call_tool("query", args, ctx)
            page = result["structuredContent"]
            assert len(page["rows"]) <= 50 and page["columns"] == ["id"]
            seen += [r[0] for r in page["rows"]]
            if not page["truncated"]:
                assert page["nextCursor"] is None
                break
            args = {"sql": args["sql"], "cursor": page["nextCursor"]}
        assert seen == list(range(1, 121))
        named = await c.call_tool("query", {"sql": "SELECT count(*) AS n FROM orders WHERE customer_id = :c",
                                            "params": {"c": 7}}, ctx)
        assert named["structuredContent"]["rows"][0][0] > 0
        top = (await c.call_tool("top_customers", {"region": "amer", "n": 3}, ctx))["structuredContent"]
        assert top["columns"] == ["name", "total"] and len(top["rows"]) == 3
        assert top["rows"][0][1] >= top["rows"][1][1] >= top["rows"][2][1]
        with pytest.raises(ToolExecutionError, match="must be one of"):
            await c.call_tool("top_customers", {"region": "mars"}, ctx)
        with pytest.raises(ToolExecutionError, match="another statement"):
            await c.call_tool("query", {"sql": "SELECT 2", "cursor": result_cursor(c)}, ctx)
        plan = await c.call_tool("explain", {"sql": "SELECT * FROM orders WHERE customer_id = ?", "params": [3]}, ctx)
        assert "orders_customer" in plan["content"][0]["text"]


def result_cursor(c: object) -> str:
    from connectors.sql.paging import PageCursor, encode_cursor

    return encode_cursor(c._codec, PageCursor("query", "SELECT 1", None, 1))  # type: ignore[attr-defined]


@pytest.mark.parametrize("sql", [
    "DELETE FROM customers",
    "DROP TABLE orders",
    "UPDATE products SET price = 0",
    "INSERT INTO products (sku, name, category, price) VALUES ('x', 'x', 'x', 1) RETURNING id",
    "CREATE TABLE t (x)",
    "CREATE TEMP TABLE t (x)",
    "PRAGMA query_only = 0",
    "PRAGMA writable_schema = 1",
    "ATTACH DATABASE ':memory:' AS other",
    "SELECT 1; DELETE FROM customers",
    "SELECT load_extension('/tmp/evil')",
    "REINDEX",
    "VACUUM",
])
async def test_writes_refused_and_file_unchanged(shop: Path, sql: str) -> None:
    before = _digest(shop)
    async with start_connector({"url": f"sqlite+aiosqlite:///{shop}"}) as (c, _):
        with pytest.raises(ToolExecutionError, match="Refused|read-only|one SQL statement|not allowed"):
            await c.call_tool("query", {"sql": sql}, make_ctx())
        # The connection that refused is still read-only for the next call.
        with pytest.raises(ToolExecutionError):
            await c.call_tool("query", {"sql": "DELETE FROM order_items"}, make_ctx())
        count = await c.call_tool("query", {"sql": "SELECT count(*) FROM customers"}, make_ctx())
        assert count["structuredContent"]["rows"] == [[120]]
    assert _digest(shop) == before
    assert sorted(p.name for p in shop.parent.iterdir()) == ["shop.db"]


async def test_injection_through_named_query_changes_nothing(shop: Path) -> None:
    before = _digest(shop)
    async with start_connector({"url": f"sqlite+aiosqlite:///{shop}", "queries": [BY_NAME]}) as (c, _):
        for evil in ["x'; DROP TABLE customers; --", "' OR '1'='1", "Ada Lovelace\"; DELETE FROM orders; --"]:
            result = await c.call_tool("customer_by_name", {"name": evil}, make_ctx())
            assert result["structuredContent"]["rows"] == []
        assert (await c.call_tool("customer_by_name", {"name": "Ada Lovelace"}, make_ctx()))["structuredContent"]["rows"]
    assert _digest(shop) == before


async def test_statement_timeout(shop: Path) -> None:
    async with start_connector({"url": f"sqlite+aiosqlite:///{shop}", "statement_timeout_s": 0.3}) as (c, _):
        forever = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"
        with pytest.raises(ToolExecutionError, match="statement timeout of 0.3s") as info:
            await c.call_tool("query", {"sql": forever}, make_ctx())
        assert info.value.status == "timeout"
        assert (await c.call_tool("query", {"sql": "SELECT 1"}, make_ctx()))["structuredContent"]["rows"] == [[1]]


async def test_unbounded_result_is_streamed(shop: Path) -> None:
    # An infinite result: only max_rows + 1 rows are ever stepped, so it returns at once.
    async with start_connector({"url": f"sqlite+aiosqlite:///{shop}", "max_rows": 10,
                                "statement_timeout_s": 5}) as (c, _):
        sql = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT i FROM r"
        first = (await c.call_tool("query", {"sql": sql}, make_ctx()))["structuredContent"]
        assert first["rows"] == [[i] for i in range(1, 11)] and first["truncated"]
        second = (await c.call_tool("query", {"sql": sql, "cursor": first["nextCursor"]}, make_ctx()))
        assert second["structuredContent"]["rows"][0] == [11]


async def test_rows_prompts_completion(shop: Path) -> None:
    async with start_connector({"url": f"sqlite+aiosqlite:///{shop}"}) as (c, _):
        ctx = make_ctx("resources/read")
        [template] = c.resource_templates()
        assert template.uri_template == "sql://db/{schema}/{table}/row/{key}"
        assert c.owns_uri("sql://db/main/customers/row/7")
        row = json.loads((await c.read_resource("sql://db/main/customers/row/7", ctx))["contents"][0]["text"])
        assert row["id"] == 7 and row["region"] in ("emea", "amer", "apac")
        item = json.loads((await c.read_resource("sql://db/main/order_items/row/1,2", ctx))["contents"][0]["text"])
        assert (item["order_id"], item["product_id"]) == (1, 2)
        with pytest.raises(ResourceNotFound):
            await c.read_resource("sql://db/main/customers/row/9999", ctx)
        with pytest.raises(InvalidParams, match="2-column key"):
            await c.read_resource("sql://db/main/order_items/row/1", ctx)
        with pytest.raises(ResourceNotFound):
            await c.read_resource("sql://db/main/nope", ctx)

        prompt = await c.get_prompt("explore_table", {"table": "orders", "column": "status"}, ctx)
        embedded = prompt["messages"][0]["content"]
        assert embedded["type"] == "resource" and embedded["resource"]["uri"] == "sql://db/main/orders"
        assert "db_query" in prompt["messages"][1]["content"]["text"]
        prompt = await c.get_prompt("write_query", {"question": "Who spends most?", "tables": "customers, orders"}, ctx)
        assert [m["content"]["resource"]["uri"] for m in prompt["messages"][:2]] == [
            "sql://db/main/customers", "sql://db/main/orders"]
        overview = await c.get_prompt("write_query", {"question": "Anything"}, ctx)
        assert overview["messages"][0]["content"]["resource"]["uri"] == "sql://db/overview"
        with pytest.raises(InvalidParams):
            await c.get_prompt("explore_table", {}, ctx)

        def done(result: dict) -> list[str]:
            return result["completion"]["values"]

        prompt_ref = {"type": "ref/prompt", "name": "explore_table"}
        assert done(await c.complete(prompt_ref, {"name": "table", "value": "ord"}, ctx)) == ["order_items", "orders"]
        ctx_cols = make_ctx("completion/complete", {"context": {"arguments": {"table": "orders"}}})
        assert done(await c.complete(prompt_ref, {"name": "column", "value": "c"}, ctx_cols)) == ["customer_id"]
        tables = await c.complete({"type": "ref/prompt", "name": "write_query"},
                                  {"name": "tables", "value": "customers, ord"}, ctx)
        assert done(tables) == ["customers, order_items", "customers, orders"]
        tpl_ref = {"type": "ref/resource", "uri": template.uri_template}
        assert done(await c.complete(tpl_ref, {"name": "schema", "value": ""}, ctx)) == ["main"]
        ctx_key = make_ctx("completion/complete", {"context": {"arguments": {"schema": "main", "table": "customers"}}})
        keys = done(await c.complete(tpl_ref, {"name": "key", "value": "11"}, ctx_key))
        assert keys == ["11", "110", "111", "112", "113", "114", "115", "116", "117", "118", "119"]


async def test_writes_allowed_only_through_execute(shop: Path) -> None:
    async with start_connector({"url": f"sqlite+aiosqlite:///{shop}", "allow_writes": True}) as (c, events):
        execute = next(t.definition for t in c.tools() if t.name == "execute")
        assert execute["annotations"]["destructiveHint"] is True and execute["annotations"]["readOnlyHint"] is False
        with pytest.raises(ToolExecutionError, match="read-only"):
            await c.call_tool("query", {"sql": "DELETE FROM order_items"}, make_ctx())
        result = await c.call_tool("execute", {"sql": "UPDATE products SET price = price + 1 WHERE category = ?",
                                               "params": ["mice"]}, make_ctx())
        assert result["structuredContent"]["rowcount"] == 3
        await c.call_tool("execute", {"sql": "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"}, make_ctx())
        await events.wait_for(lambda kind, _: kind == "components_changed")
        assert "sql://db/main/notes" in {r.uri for r in c.resources()}


async def test_periodic_refresh_reports_schema_changes(shop: Path) -> None:
    import sqlite3

    async with start_connector({"url": f"sqlite+aiosqlite:///{shop}", "refresh_s": 0.05}) as (c, events):
        await c.subscribe("sql://db/main/products", make_ctx("resources/subscribe"))
        mark = events.mark()
        writer = sqlite3.connect(shop)  # another process changing the schema under the gateway
        writer.executescript("ALTER TABLE products ADD COLUMN discontinued INTEGER; CREATE TABLE notes (id INTEGER);")
        writer.close()
        await events.wait_for(lambda kind, uri: kind == "resource_updated" and uri == "sql://db/main/products",
                              since=mark)
        assert ("components_changed", None) in events.calls[mark:]
        assert "sql://db/main/notes" in {r.uri for r in c.resources()}
        described = await c.call_tool("describe_table", {"table": "products"}, make_ctx())
        assert "discontinued" in [col["name"] for col in described["structuredContent"]["columns"]]


async def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        async with start_connector({"url": "sqlite+aiosqlite:///missing.db"}, tmp_path):
            pass
    assert not (tmp_path / "missing.db").exists()
