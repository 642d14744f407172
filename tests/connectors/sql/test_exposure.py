"""``expose:``: hidden tables and columns stay out of every surface of the SQL connector — schema
resources, list/describe tools, the row template, completions, prompts — and free SQL naming them
is refused; against real SQLite and PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from connectors.sql.config import Exposure
from connectors.sql.connector import SQLConnector
from connectors.sql.exposure import apply
from connectors.sql.schema import Column, ForeignKey, Index, Snapshot, Table
from gateway.protocol.errors import InvalidParams, ResourceNotFound, ToolExecutionError

from .helpers import asyncpg_url, make_ctx, pg_database, start_connector

SECRET = "the CEO's home address"
SETUP = [
    "CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL, email text, secret_notes text)",
    "CREATE TABLE audit_log (id integer PRIMARY KEY, what text)",
    "CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer REFERENCES customers (id), note text)",
    f"INSERT INTO customers VALUES (1, 'Ada', 'ada@example.com', '{SECRET.replace(chr(39), chr(39) * 2)}')",
    "INSERT INTO audit_log VALUES (1, 'login')",
    "INSERT INTO orders VALUES (7, 1, 'first order')",
]
EXPOSE = {"hide_tables": ["audit_*"], "hide_columns": {"customers": ["secret_*"]}}


@asynccontextmanager
async def database(dialect: str, tmp_path: Path, pg_url: str) -> AsyncIterator[tuple[SQLConnector, str]]:
    """A connector (``expose`` as :data:`EXPOSE`) on a fresh database; yields it and its schema."""
    if dialect == "sqlite":
        path = tmp_path / "shop.db"
        with sqlite3.connect(path) as conn:
            for statement in SETUP:
                conn.execute(statement)
        async with start_connector({"url": f"sqlite+aiosqlite:///{path}", "expose": EXPOSE}) as (c, _):
            yield c, "main"
        return
    async with pg_database(pg_url, ";\n".join(SETUP)) as name, \
            start_connector({"url": asyncpg_url(pg_url, name), "expose": EXPOSE}) as (c, _):
        yield c, "public"


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
async def test_hidden_tables_and_columns_are_on_no_surface(dialect: str, tmp_path: Path, pg_url: str) -> None:
    async with database(dialect, tmp_path, pg_url) as (c, schema):
        ctx = make_ctx()
        # Schema resources and the overview.
        assert {r.uri for r in c.resources()} == {"sql://db/overview", f"sql://db/{schema}/customers",
                                                  f"sql://db/{schema}/orders"}
        overview = await c.read_resource("sql://db/overview", ctx)
        table = await c.read_resource(f"sql://db/{schema}/customers", ctx)
        for text in [x["text"] for x in overview["contents"] + table["contents"]]:
            assert "secret_notes" not in text and "audit_log" not in text
        with pytest.raises(ResourceNotFound):
            await c.read_resource(f"sql://db/{schema}/audit_log", ctx)
        # list_tables and describe_table.
        listed = await c.call_tool("list_tables", {}, ctx)
        assert {t["name"]: t["columns"] for t in listed["structuredContent"]["tables"]} == {"customers": 3, "orders": 3}
        described = (await c.call_tool("describe_table", {"table": "customers"}, ctx))["structuredContent"]
        assert [col["name"] for col in described["columns"]] == ["id", "name", "email"]
        with pytest.raises(ToolExecutionError, match="Unknown table 'audit_log'"):
            await c.call_tool("describe_table", {"table": "audit_log"}, ctx)
        # The row template: the visible columns only (not SELECT *), nothing of a hidden table.
        row = await c.read_resource(f"sql://db/{schema}/customers/row/1", ctx)
        assert json.loads(row["contents"][0]["text"]) == {"id": 1, "name": "Ada", "email": "ada@example.com"}
        assert SECRET not in json.dumps(row)
        with pytest.raises(ResourceNotFound):
            await c.read_resource(f"sql://db/{schema}/audit_log/row/1", ctx)
        # Completions and prompts.
        complete_ctx = make_ctx("completion/complete", {"context": {"arguments": {"table": "customers"}}})
        columns = await c.complete({"type": "ref/prompt", "name": "explore_table"}, {"name": "column", "value": ""},
                                   complete_ctx)
        assert columns["completion"]["values"] == ["email", "id", "name"]
        tables = await c.complete({"type": "ref/prompt", "name": "explore_table"}, {"name": "table", "value": ""}, ctx)
        assert tables["completion"]["values"] == ["customers", "orders"]
        with pytest.raises(InvalidParams, match="no column 'secret_notes'"):
            await c.get_prompt("explore_table", {"table": "customers", "column": "secret_notes"}, ctx)
        # Free SQL: naming a hidden table or column, or a table that has hidden columns, is refused.
        for sql in ("SELECT secret_notes FROM customers", 'SELECT "SECRET_NOTES" FROM orders', "SELECT * FROM customers",
                    "SELECT o.note FROM orders o JOIN customers c ON c.id = o.customer_id", "SELECT * FROM audit_log",
                    "SELECT 'x' FROM orders WHERE note = 'audit_log'"):
            with pytest.raises(ToolExecutionError, match="Refused") as refused:
                await c.call_tool("query", {"sql": sql}, ctx)
            assert SECRET not in str(refused.value)
        with pytest.raises(ToolExecutionError, match="Refused"):
            await c.call_tool("explain", {"sql": "SELECT * FROM customers"}, ctx)
        fine = await c.call_tool("query", {"sql": "SELECT * FROM orders"}, ctx)
        assert fine["structuredContent"]["rows"] == [[7, 1, "first order"]]


def test_apply_allow_lists_keys_foreign_keys_and_indexes() -> None:
    customers = Table("public", "customers", "table",
                      (Column("id", "int"), Column("name", "text"), Column("email", "text"), Column("ssn", "text")),
                      primary_key=("id",), indexes=(Index("by_ssn", ("ssn",)), Index("by_name", ("name",)),
                                                    Index("expr", (), definition="lower(ssn)")))
    people = Table("hr", "people", "table", (Column("ssn", "text"), Column("name", "text")), primary_key=("ssn",))
    orders = Table("public", "orders", "table", (Column("id", "int"), Column("customer_id", "int")), primary_key=("id",),
                   foreign_keys=(ForeignKey(("customer_id",), "public", "customers", ("id",)),
                                 ForeignKey(("customer_id",), "hr", "secret", ("id",))))
    secret = Table("hr", "secret", "table", (Column("id", "int"),), primary_key=("id",))
    snapshot = Snapshot.of("postgresql", [customers, people, orders, secret])
    out, hidden = apply(snapshot, Exposure(tables=["public.*", "hr.people"],
                                           columns={"customers": ("id", "name", "email")},
                                           hide_columns={"*": ("ssn",)}))
    assert [t.qualified_name for t in out.tables] == ["hr.people", "public.customers", "public.orders"]
    shown = out.by_key[("public", "customers")]
    assert [c.name for c in shown.columns] == ["id", "name", "email"] and shown.primary_key == ("id",)
    assert [ix.name for ix in shown.indexes] == ["by_name"]  # the ssn and expression indexes are gone
    # A key with a hidden column: no row reads (its values would probe the hidden column).
    assert out.by_key[("hr", "people")].primary_key == ()
    # A foreign key into a hidden table would name it.
    assert [fk.ref_table for fk in out.by_key[("public", "orders")].foreign_keys] == ["customers"]
    assert hidden.tables == {"customers", "people", "secret"} and hidden.columns == {"ssn"}
    same, none = apply(snapshot, Exposure())
    assert same is snapshot and not none
