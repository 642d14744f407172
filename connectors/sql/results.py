"""Pure shaping of a page of rows into a tool result: JSON values, the text table, the cursor,
and why the page ended.

``structuredContent`` is ``{columns, rows, truncated, nextCursor, truncatedBy, valuesCut}``:
``truncated`` means more rows exist (``nextCursor`` fetches them); ``truncatedBy`` says which limit
ended the page — ``max_rows`` or ``max_bytes`` — and is also set when ``valuesCut`` is true, i.e.
the page's only row was by itself larger than ``max_bytes`` and its large values were shortened
(text and bytea to a prefix, other types to null). The text table's footer says the same in words.
"""

from __future__ import annotations

from typing import Any

from gateway.protocol.cursors import CursorCodec

from .engine import Page, WriteResult
from .paging import PageCursor, encode_cursor
from .texttable import json_row, render_table

__all__ = ["page_result", "write_result", "budget_text"]


def budget_text(max_bytes: int) -> str:
    """``4 MiB``, ``512 KiB`` or ``1000 bytes``."""
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if max_bytes >= size and max_bytes % size == 0:
            return f"{max_bytes // size} {unit}"
    return f"{max_bytes} bytes"


def page_result(codec: CursorCodec, tool: str, sql: str, params: Any, page: Page, offset: int,
                max_bytes: int) -> dict[str, Any]:
    rows = [json_row(r) for r in page.rows]
    if page.width is not None:
        for row in rows:
            del row[page.width:]
    next_cursor = None
    if page.more:
        next_cursor = encode_cursor(codec, PageCursor(tool, sql, params, offset + len(rows)))
    why = ""
    if page.cut:
        why = (f"this row alone is larger than the byte budget (max_bytes = {budget_text(max_bytes)}): its large "
               "values are cut (text and bytea to a prefix, other types to null); select them with "
               "substring() to read them in parts")
    elif page.reason == "max_bytes":
        why = f"stopped at the byte budget (max_bytes = {budget_text(max_bytes)})"
    text = render_table(page.columns, rows, truncated=page.more, offset=offset, why=why)
    if next_cursor:
        text += f"\nnextCursor: {next_cursor}"
    return {"content": [{"type": "text", "text": text}],
            "structuredContent": {"columns": page.columns, "rows": rows, "truncated": page.more,
                                  "nextCursor": next_cursor, "truncatedBy": page.reason, "valuesCut": page.cut}}


def write_result(result: WriteResult) -> dict[str, Any]:
    """The ``execute`` tool's result: status, affected rows and any RETURNING rows."""
    rows = [json_row(r) for r in result.rows]
    text = f"{result.status} ({result.rowcount if result.rowcount is not None else '?'} rows affected)"
    if result.columns:
        text += "\n" + render_table(result.columns, rows)
    return {"content": [{"type": "text", "text": text}],
            "structuredContent": {"status": result.status, "rowcount": result.rowcount,
                                  "columns": result.columns, "rows": rows}}
