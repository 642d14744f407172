"""The pure byte-budget planning: which wrapper a statement gets, and what it measures."""

from __future__ import annotations

from decimal import Decimal

from connectors.sql.budget import FIXED_COST, column_kind, plan_wrappers, row_size, wire_limit

SQL = "SELECT id, name, price, data FROM t WHERE id = $1"


def test_column_kinds() -> None:
    assert [column_kind(oid) for oid in (23, 1184, 25, 1043, 1042, 17, 1700, 3802, 1007)] == [
        "fixed", "fixed", "text", "varchar", "bpchar", "bytea", "numeric", "other", "other"]


def test_fast_wrapper_caps_each_value_so_a_full_page_fits() -> None:
    plan = plan_wrappers(SQL, ["fixed", "text", "numeric", "other"], 1, 500, 4 << 20)
    cell = (4 << 20) - 501 * FIXED_COST
    cell //= 501 * 3
    assert plan.fast_flag and plan.width == 4 and plan.cuttable == 1
    assert plan.fast_sql is not None
    assert f"CASE WHEN octet_length(c2) <= {cell} THEN c2 END" in plan.fast_sql
    assert f"2 * pg_column_size(c3) <= {cell}" in plan.fast_sql
    assert f"octet_length(c4::text) <= {cell}" in plan.fast_sql
    assert plan.fast_sql.endswith(f"AS _gw_big FROM ({SQL}) AS _gw(c1, c2, c3, c4)")
    # The slow wrapper: the statement's $1, then $2 offset, $3 budget, $4 prefix length.
    assert "OFFSET $2" in plan.slow_sql and "OVER _gw_w <= $3" in plan.slow_sql and "left(c2, $4)" in plan.slow_sql
    assert "WINDOW _gw_w AS (ROWS UNBOUNDED PRECEDING)" in plan.slow_sql


def test_fixed_columns_run_unwrapped_and_tiny_budgets_use_the_slow_wrapper() -> None:
    plain = plan_wrappers("SELECT 1, now()", ["fixed", "fixed"], 0, 500, 4 << 20)
    assert plain.fast_sql == "SELECT 1, now()" and not plain.fast_flag
    tiny = plan_wrappers("SELECT 'x'", ["text"], 0, 100_000, 1024)
    assert tiny.fast_sql is None and "$1" in tiny.slow_sql and "$3" in tiny.slow_sql
    no_text = plan_wrappers("SELECT '{}'::jsonb", ["other"], 0, 10, 4096)
    assert no_text.cuttable == 0 and "$3" not in no_text.slow_sql


def test_row_size_mirrors_the_sql() -> None:
    kinds = ["fixed", "text", "bytea", "numeric", "other"]
    assert row_size([1, "héllo", b"\x00\x01", Decimal("1.50"), None], kinds) == FIXED_COST + 6 + 2 + 4
    assert wire_limit(4 << 20, 500, 3) > 2 * (4 << 20)
