"""The pure single-statement check and named-placeholder binding."""

from __future__ import annotations

import pytest

from connectors.sql.statements import (
    StatementError,
    bind_named,
    check_single_statement,
    named_placeholders,
    qualified,
    quote_ident,
)


@pytest.mark.parametrize("sql", [
    "SELECT 1",
    "SELECT 1;",
    "SELECT 1 ;  -- trailing comment",
    "SELECT ';' AS semi",
    'SELECT 1 AS "a;b"',
    "SELECT $$; DROP TABLE t$$",
    "SELECT $fn$ ; $fn$",
    "SELECT 1 /* ; nested /* ; */ still comment ; */",
    "SELECT E'it\\'s ; fine'",
    "SELECT 'it''s ; fine'",
    "-- just a comment ; here\nSELECT 2",
])
def test_single_statements_pass(sql: str) -> None:
    assert check_single_statement(sql).startswith(("SELECT", "-- just"))


@pytest.mark.parametrize("sql", [
    "SELECT 1; SELECT 2",
    "COMMIT; DROP TABLE customers",
    "SELECT 1;;DELETE FROM t",
    "SELECT 'x'; UPDATE t SET a = 1",
    "SELECT 1; -- comment\n DROP TABLE t",
])
def test_multiple_statements_refused(sql: str) -> None:
    with pytest.raises(StatementError, match="one SQL statement"):
        check_single_statement(sql)


@pytest.mark.parametrize("sql", ["", "   ", "-- nothing", ";", "SELECT 'unterminated", "SELECT $a$ x", "/* open"])
def test_empty_or_broken(sql: str) -> None:
    with pytest.raises(StatementError):
        check_single_statement(sql)


def test_trailing_semicolon_removed() -> None:
    assert check_single_statement("SELECT 1;  ") == "SELECT 1"


def test_named_placeholders_skip_literals_comments_and_casts() -> None:
    sql = "SELECT ':no', x::int, \"col:no\" FROM t -- :no\nWHERE a = :a AND b = :b_2 OR a = :a /* :no */"
    assert named_placeholders(sql) == ["a", "b_2", "a"]


def test_bind_named_positional_per_dialect() -> None:
    sql = "SELECT * FROM t WHERE a = :a AND b = :b OR c = :a"
    assert bind_named(sql, {"a": 1, "b": "x"}, "postgresql") == (
        "SELECT * FROM t WHERE a = $1 AND b = $2 OR c = $1", [1, "x"])
    assert bind_named(sql, {"a": 1, "b": "x"}, "sqlite") == (
        "SELECT * FROM t WHERE a = ?1 AND b = ?2 OR c = ?1", [1, "x"])
    with pytest.raises(KeyError):
        bind_named(sql, {"a": 1}, "postgresql")


def test_injection_values_stay_values() -> None:
    evil = "x'; DROP TABLE t; --"
    sql, args = bind_named("SELECT * FROM t WHERE name = :name", {"name": evil}, "postgresql")
    assert sql == "SELECT * FROM t WHERE name = $1" and args == [evil]


def test_quote_ident() -> None:
    assert quote_ident('we"ird') == '"we""ird"'
    assert qualified("public", "t") == '"public"."t"'
    with pytest.raises(ValueError):
        quote_ident("a\x00b")
