"""Pure byte-budget planning for PostgreSQL reads: the SQL that wraps a caller's statement so that
a page of results never holds more than ``max_bytes`` of values, and no value larger than that is
ever sent by the server.

Why on the server: asyncpg reads one whole DataRow message before it can look at it, so a
``repeat('x', 900000000)`` would be in the gateway's memory before any client-side check. The
statement is therefore wrapped (``SELECT … FROM (<statement>) AS _gw(c1, …, cn)``) and the *server*
measures each value (``octet_length``) and withholds what does not fit. Two wrappers:

* **fast** — each variable-length value is sent only if it is at most ``cell`` bytes, where
  ``cell`` is chosen so that a whole page of ``limit + 1`` rows fits the budget; a last column
  flags a row that had a larger value (sent as NULL). Ordinary rows take this path: one
  Bind/Execute, a flattened subquery, two cheap checks per value (``bench/sql.py`` measures the
  cost: ~0.01 ms on a one-row lookup, a few percent on a 500-row page). When every column has a
  fixed-size type, the statement runs unwrapped.
* **slow** — used from the first flagged row on (or when no ``cell`` fits): a running
  ``sum(row size) OVER (ROWS UNBOUNDED PRECEDING)`` from the page's first row; rows past the budget
  come back as NULLs with a flag (the gateway stops before the first), except a first row that is
  alone larger than the budget, whose text and bytea values are cut to a prefix of at most ``$k``
  bytes (other large values are NULL).

Sizes: ``octet_length`` for text, varchar, bpchar and bytea (no detoasting); the text form
(``octet_length(c::text)``) for every other variable-length type (json, jsonb, numeric, arrays,
composites …) except numeric, counted as twice its stored size; :data:`FIXED_COST` bytes for types whose values are small and bounded (numbers,
dates, uuids …). So ``max_bytes`` measures the values as the database renders them, which is the
size of the JSON reply within a small factor (bytea doubles in hex).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["FIXED_COST", "ColumnKind", "column_kind", "WrapPlan", "plan_wrappers", "row_size", "wire_limit"]

FIXED_COST = 16  # bytes counted for a value of a small fixed-size type

# Type OIDs (pg_type.h). Prefix-cuttable: text-like values that keep their type when cut.
_PREFIXED = {25: "text", 1043: "varchar", 1042: "bpchar", 17: "bytea"}
# Small values of bounded size: bool, "char", name, int8, int2, int4, oid, tid, xid, cid, float4,
# float8, money, macaddr, inet, cidr, macaddr8, date, time, timestamp, timestamptz, interval, timetz,
# uuid, pg_lsn, point, lseg, box, line, circle, void.
_FIXED = frozenset({16, 18, 19, 20, 21, 23, 26, 27, 28, 29, 700, 701, 790, 829, 869, 650, 774, 1082, 1083,
                    1114, 1184, 1186, 1266, 2950, 3220, 600, 601, 603, 628, 718, 2278})

_NUMERIC = 1700

ColumnKind = str  # "fixed" | "text" | "varchar" | "bpchar" | "bytea" | "numeric" | "other"


def column_kind(type_oid: int) -> ColumnKind:
    if type_oid in _FIXED:
        return "fixed"
    if type_oid == _NUMERIC:
        return "numeric"
    return _PREFIXED.get(type_oid, "other")


def _size(kind: ColumnKind, col: str, null_is_zero: bool = True) -> str:
    if kind == "numeric":
        # Stored as base-10000 digits (2 bytes per 4 decimal digits): the text is at most about twice
        # as long. Cheaper than rendering it; a numeric is at most ~147 kB of text anyway.
        size = f"2 * pg_column_size({col})"
    else:
        size = f"octet_length({col if kind in _PREFIXED.values() else f'{col}::text'})"
    return f"coalesce({size}, 0)" if null_is_zero else size


def _prefix(kind: ColumnKind, col: str, k: str) -> str | None:
    """A prefix of at most ``k`` bytes keeping the column's type; None when the type has none."""
    if kind == "bytea":
        return f"substring({col} FROM 1 FOR {k})"
    if kind in ("text", "varchar", "bpchar"):
        # left() counts characters: take k of them when that is at most k bytes (ASCII), else k/4.
        cut = f"(CASE WHEN octet_length(left({col}, {k})) <= {k} THEN left({col}, {k}) ELSE left({col}, {k} / 4) END)"
        return cut if kind == "text" else f"{cut}::{kind}"
    return None


@dataclass(frozen=True, slots=True)
class WrapPlan:
    """How one statement is read under a budget. ``fast_sql`` is None when no per-value cap fits
    (the slow wrapper serves every page) and equals the statement when no column needs a cap;
    ``fast_flag`` says whether the fast statement has the extra flag column. The slow statement
    takes the statement's parameters, then ``$offset``, ``$budget`` and (when ``cuttable``) ``$k``."""

    width: int
    fast_sql: str | None
    fast_flag: bool
    slow_sql: str
    cuttable: int  # how many columns a first over-budget row is cut in (text-like columns)


def plan_wrappers(sql: str, kinds: Sequence[ColumnKind], n_params: int, limit: int, budget: int) -> WrapPlan:
    """The fast and slow wrappers of ``sql`` (which has ``n_params`` parameters and result columns
    of ``kinds``) for pages of ``limit`` rows under a ``budget`` of bytes."""
    n = len(kinds)
    cols = [f"c{i}" for i in range(1, n + 1)]
    alias = f"_gw({', '.join(cols)})"
    wide = [(k, c) for k, c in zip(kinds, cols, strict=True) if k != "fixed"]
    fixed = n - len(wide)
    rows = limit + 1
    room = budget - rows * fixed * FIXED_COST
    fast_sql: str | None = None
    fast_flag = False
    if not wide:
        fast_sql = sql if room >= 0 else None
    elif room // (rows * len(wide)) >= 1:
        cell = room // (rows * len(wide))
        # A NULL size (a NULL value) leaves the value NULL and the flag false or NULL: no coalesce.
        outs = [c if k == "fixed" else f"CASE WHEN {_size(k, c, False)} <= {cell} THEN {c} END"
                for k, c in zip(kinds, cols, strict=True)]
        flag = " OR ".join(f"{_size(k, c, False)} > {cell}" for k, c in wide)
        fast_sql = f"SELECT {', '.join(outs)}, ({flag}) AS _gw_big FROM ({sql}) AS {alias}"
        fast_flag = True

    o, b, k = f"${n_params + 1}", f"${n_params + 2}", f"${n_params + 3}"
    run = f"sum({FIXED_COST * fixed}::int8{''.join(' + ' + _size(kk, c) for kk, c in wide)}) OVER _gw_w"
    outs = []
    cuttable = 0
    for kind, col in zip(kinds, cols, strict=True):
        if kind == "fixed":
            outs.append(col)
            continue
        cut = _prefix(kind, col, k)
        if cut is None:
            outs.append(f"CASE WHEN {run} <= {b} THEN {col} END")
        else:
            cuttable += 1
            outs.append(f"CASE WHEN {run} <= {b} THEN {col} WHEN row_number() OVER _gw_w = 1 THEN {cut} END")
    slow_sql = (f"SELECT {', '.join(outs)}, {run} > {b} AS _gw_over "
                f"FROM (SELECT * FROM ({sql}) AS _gw_s OFFSET {o}) AS {alias} "
                "WINDOW _gw_w AS (ROWS UNBOUNDED PRECEDING)")
    return WrapPlan(n, fast_sql, fast_flag, slow_sql, cuttable)


def row_size(row: Sequence[object], kinds: Sequence[ColumnKind]) -> int:
    """What a row received on the fast path counts against the budget, as the slow wrapper would
    count it (the text form's length approximated by ``str()`` for decoded values)."""
    total = 0
    for kind, value in zip(kinds, row, strict=False):
        if kind == "fixed":
            total += FIXED_COST
        elif value is None:
            continue
        elif isinstance(value, (bytes, bytearray, memoryview)):
            total += len(value)
        else:
            total += len(str(value).encode("utf-8", "surrogatepass"))
    return total


def wire_limit(budget: int, limit: int, width: int) -> int:
    """Bytes the server may send for one page before the connection is cut (the backstop of
    :class:`connectors.sql.pg_session.WireMeter`): twice the budget, plus the protocol's per-row
    and per-value framing for a page of NULL rows, plus 1 MiB for descriptions and notices."""
    return 2 * budget + (limit + 1) * (width + 1) * 8 + (1 << 20)
