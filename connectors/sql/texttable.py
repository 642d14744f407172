"""Pure result shaping: database values → JSON values, and rows → a compact text table.

Values: ``Decimal`` becomes a JSON number only when the float round-trips exactly (money stays
exact as a string otherwise); dates and times are ISO 8601; bytes are ``\\x``-prefixed hex like
PostgreSQL prints them; anything else unknown (ranges, network addresses, geometric types) is its
``str()``. Text tables truncate wide cells so a model sees the shape of the data, not a wall of text.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

__all__ = ["json_value", "json_row", "render_table"]

_MAX_CELL = 40


def json_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        if value.is_finite():
            as_float = float(value)
            if value == value.to_integral_value() and abs(value) < 2**53:
                return int(value)
            if Decimal(repr(as_float)) == value:
                return as_float
        return str(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return str(value)


def json_row(row: Sequence[Any]) -> list[Any]:
    return [json_value(v) for v in row]


def _cell(value: Any) -> str:
    if value is None:
        text = "NULL"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (dict, list)):
        import json

        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    else:
        text = str(value)
    if len(text) > _MAX_CELL:  # cut first: a cell may hold megabytes
        text = text[: _MAX_CELL - 1] + "…"
    return text.replace("\r", " ").replace("\n", " ").replace("\t", " ")


def render_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, truncated: bool = False,
                 offset: int = 0, why: str = "") -> str:
    """An aligned text table with a one-line footer (row range, why the page ended, whether more
    rows exist)."""
    if not columns:
        return f"Statement executed; it returned no result set ({len(rows)} rows)."
    header = [_cell(c) for c in columns]
    body = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in header]
    for line in body:
        for i, cell in enumerate(line):
            widths[i] = max(widths[i], len(cell))

    def fmt(cells: Sequence[str]) -> str:
        return " | ".join(c.ljust(widths[i]) for i, c in enumerate(cells)).rstrip()

    out = [fmt(header), "-+-".join("-" * w for w in widths)]
    out.extend(fmt(line) for line in body)
    if not rows:
        footer = "(no rows)" if offset == 0 else f"(no more rows after row {offset})"
    else:
        first, last = offset + 1, offset + len(rows)
        footer = f"({len(rows)} row{'s' if len(rows) != 1 else ''}"
        if offset:
            footer += f", rows {first}-{last}"
        if why:
            footer += f"; {why}"
        footer += "; more rows exist: call again with nextCursor)" if truncated else ")"
    out.append(footer)
    return "\n".join(out)
