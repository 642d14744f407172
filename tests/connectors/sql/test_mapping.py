"""Pure parts of the SQL connector: argument coercion, text tables, cursors, schema shaping,
error classification and password redaction."""

from __future__ import annotations

import datetime as dt
import sqlite3
from decimal import Decimal

import pytest
from pydantic import ValidationError

from connectors.sql import mapping
from connectors.sql import schema as sch
from connectors.sql.config import NamedQuery, SQLConfig
from connectors.sql.errors import Redactor, classify
from connectors.sql.paging import PageCursor, decode_cursor, encode_cursor
from connectors.sql.texttable import json_value, render_table
from gateway.protocol.cursors import CursorCodec
from gateway.protocol.errors import InvalidParams

TOP = NamedQuery.model_validate({
    "name": "top_customers",
    "sql": "SELECT name, total FROM customer_totals WHERE region = :region ORDER BY total DESC LIMIT :n",
    "params": {"region": {"type": "string", "enum": ["emea", "amer", "apac"]},
               "n": {"type": "integer", "default": 10, "minimum": 1, "maximum": 100}},
})


def test_named_query_schema_and_coercion() -> None:
    config = SQLConfig.model_validate({"name": "shop", "type": "sql", "url": "sqlite+aiosqlite:///x.db",
                                       "queries": [TOP.model_dump()]})
    tool = mapping.named_query_tool(config.queries[0], config)
    props = tool["inputSchema"]["properties"]
    assert props["region"] == {"type": "string", "enum": ["emea", "amer", "apac"]}
    assert props["n"] == {"type": "integer", "default": 10, "minimum": 1, "maximum": 100}
    assert tool["inputSchema"]["required"] == ["region"]
    assert tool["annotations"]["readOnlyHint"] is True
    assert mapping.coerce_arguments(TOP, {"region": "emea"}) == {"region": "emea", "n": 10}
    assert mapping.coerce_arguments(TOP, {"region": "apac", "n": "5"}) == {"region": "apac", "n": 5}


@pytest.mark.parametrize("args, message", [
    ({}, "Missing required argument 'region'"),
    ({"region": "mars"}, "must be one of"),
    ({"region": "emea", "n": 0}, ">= 1"),
    ({"region": "emea", "n": 101}, "<= 100"),
    ({"region": "emea", "n": "ten"}, "must be an integer"),
    ({"region": "emea", "n": True}, "must be an integer"),
    ({"region": "emea", "limit": 3}, "Unknown argument"),
    ({"region": "emea'; DROP TABLE customers; --"}, "must be one of"),
])
def test_named_query_bad_arguments(args: dict, message: str) -> None:
    with pytest.raises(mapping.ArgumentError, match=message):
        mapping.coerce_arguments(TOP, args)


def test_date_parameters() -> None:
    q = NamedQuery.model_validate({"name": "since", "sql": "SELECT 1 WHERE :d > :t",
                                   "params": {"d": {"type": "date"}, "t": {"type": "datetime"}}})
    out = mapping.coerce_arguments(q, {"d": "2025-01-02", "t": "2025-01-02T03:04:05Z"})
    assert out["d"] == dt.date(2025, 1, 2) and out["t"].tzinfo is not None
    with pytest.raises(mapping.ArgumentError, match="ISO 8601"):
        mapping.coerce_arguments(q, {"d": "yesterday", "t": "2025-01-02T03:04:05"})


def test_config_validation() -> None:
    base = {"name": "db", "type": "sql", "url": "sqlite+aiosqlite:///x.db"}
    with pytest.raises(ValidationError, match="undeclared parameter"):
        SQLConfig.model_validate({**base, "queries": [{"name": "q", "sql": "SELECT :a"}]})
    with pytest.raises(ValidationError, match="not used"):
        SQLConfig.model_validate({**base, "queries": [{"name": "q", "sql": "SELECT 1", "params": {"a": {}}}]})
    with pytest.raises(ValidationError, match="built-in"):
        SQLConfig.model_validate({**base, "queries": [{"name": "query", "sql": "SELECT 1"}]})
    with pytest.raises(ValidationError, match="one SQL statement"):
        SQLConfig.model_validate({**base, "queries": [{"name": "q", "sql": "SELECT 1; SELECT 2"}]})
    with pytest.raises(ValidationError) as info:
        SQLConfig.model_validate({**base, "url": "mysql://u:topsecret@h/db"})
    assert "topsecret" not in str(info.value.errors()[0]["msg"])
    with pytest.raises(ValidationError) as info:
        SQLConfig.model_validate({**base, "url": "postgresql+asyncpg://u:topsecret@h:notaport/db"})
    assert "valid database URL" in info.value.errors()[0]["msg"]
    assert "topsecret" not in str(info.value.errors()[0]["msg"])
    # A named query's pattern is published in inputSchema: JavaScript and Python must read it alike.
    def query(pattern: str) -> dict[str, object]:
        return {**base, "queries": [{"name": "q", "sql": "SELECT :a", "params": {"a": {"pattern": pattern}}}]}

    assert SQLConfig.model_validate(query(r"^[a-z]{2}-\d+$")).queries[0].params["a"].pattern == r"^[a-z]{2}-\d+$"
    with pytest.raises(ValidationError, match=r"write '\^\[a-z_\]\+\$'"):
        SQLConfig.model_validate(query(r"^[a-z\_]+$"))
    with pytest.raises(ValidationError, match="Unicode property"):
        SQLConfig.model_validate(query(r"^\p{L}+$"))


def test_json_values() -> None:
    assert json_value(Decimal("12.50")) == 12.5
    assert json_value(Decimal("10")) == 10
    assert json_value(Decimal("0.1000000000000000055511151231257827")) == "0.1000000000000000055511151231257827"
    assert json_value(dt.date(2025, 1, 2)) == "2025-01-02"
    assert json_value(b"\x01\xff") == "\\x01ff"
    assert json_value(float("nan")) == "nan"
    assert json_value({"a": [Decimal("1.5")]}) == {"a": [1.5]}


def test_render_table() -> None:
    text = render_table(["id", "name"], [[1, "a" * 60], [2, None]], truncated=True)
    lines = text.splitlines()
    assert lines[0].startswith("id | name")
    assert "NULL" in lines[3] and lines[2].endswith("…")
    assert "more rows exist" in lines[-1]
    assert render_table(["x"], [], offset=5) .endswith("(no more rows after row 5)")
    assert "no result set" in render_table([], [])


def test_page_cursor_roundtrip_and_tampering() -> None:
    codec = CursorCodec("k")
    token = encode_cursor(codec, PageCursor("query", "SELECT 1", [1], 500))
    assert decode_cursor(codec, token, "query") == PageCursor("query", "SELECT 1", [1], 500)
    with pytest.raises(InvalidParams, match="issued by tool"):
        decode_cursor(codec, token, "top_customers")
    with pytest.raises(InvalidParams):
        decode_cursor(CursorCodec("other"), token, "query")
    with pytest.raises(InvalidParams):
        decode_cursor(codec, token[:-3] + "AAA", "query")


def test_sqlite_table_builder_and_renderings() -> None:
    info = [{"cid": 0, "name": "order_id", "type": "INTEGER", "notnull": 1, "dflt_value": None, "pk": 1},
            {"cid": 1, "name": "product_id", "type": "INTEGER", "notnull": 1, "dflt_value": None, "pk": 2},
            {"cid": 2, "name": "note", "type": "", "notnull": 0, "dflt_value": "'x'", "pk": 0}]
    fks = [{"id": 0, "seq": 0, "table": "orders", "from": "order_id", "to": "id"}]
    idx = [{"name": "oi_note", "unique": 0}]
    table = sch.build_sqlite_table("main", "order_items", "table", info, fks, idx, {"oi_note": ["note"]}, 42)
    assert table.primary_key == ("order_id", "product_id")
    assert table.columns[2].type == "ANY" and table.columns[2].nullable
    snap = sch.Snapshot.of("sqlite", [table])
    assert snap.find("order_items") is table and snap.find("main.order_items") is table
    data = sch.table_json(table, "shop")
    assert data["uri"] == "sql://shop/main/order_items"
    assert data["foreignKeys"][0]["references"] == {"schema": "main", "table": "orders", "columns": ["id"]}
    assert "FK → main.orders(id)" in sch.table_text(table)
    # Row estimates do not count as a structural change.
    moved = sch.build_sqlite_table("main", "order_items", "table", info, fks, idx, {"oi_note": ["note"]}, 99)
    assert moved.fingerprint() == table.fingerprint()


def test_uris() -> None:
    assert sch.parse_uri("shop", "sql://shop/overview") == ("overview",)
    assert sch.parse_uri("shop", sch.table_uri("shop", "my schema", "a/b")) == ("table", "my schema", "a/b")
    assert sch.parse_uri("shop", "sql://shop/main/t/row/1,2") == ("row", "main", "t", "1,2")
    assert sch.parse_uri("shop", "sql://other/main/t") is None
    assert sch.row_uri_template("shop") == "sql://shop/{schema}/{table}/row/{key}"


def test_redactor_and_classify() -> None:
    redact = Redactor("p@ss/w:rd")
    assert redact("url postgresql://u:p%40ss%2Fw%3Ard@h/db failed for p@ss/w:rd") == \
        "url postgresql://u:***@h/db failed for ***"
    assert Redactor(None)("nothing") == "nothing"
    assert classify(ConnectionRefusedError(111, "Connection refused")).kind == "unavailable"
    assert classify(sqlite3.OperationalError("attempt to write a readonly database")).kind == "read_only"
    assert classify(sqlite3.OperationalError("interrupted"), 2).kind == "timeout"
    assert classify(sqlite3.OperationalError("no such table: x")).kind == "sql"


def test_completion_values() -> None:
    out = mapping.complete_values([f"t{i}" for i in range(150)] + ["orders"], "T")
    assert len(out["completion"]["values"]) == 100 and out["completion"]["hasMore"] is True
    assert mapping.complete_values(["orders", "order_items", "customers"], "ord")["completion"]["values"] == [
        "order_items", "orders"]
