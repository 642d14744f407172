"""Pure cursor encoding for ``query`` paging (``nextCursor``).

A page cursor carries the statement, its parameters and the number of rows already returned,
signed with the connector's key (:class:`gateway.protocol.cursors.CursorCodec`), so a client can
fetch the next page by sending only ``cursor``. The next page re-runs the statement and skips the
rows already seen *on the server* (``MOVE FORWARD`` on a PostgreSQL portal), so the gateway never
holds more than one page. Results are stable across pages only when the statement has an
``ORDER BY``; the tool description says so.

The tool (``query`` or a named query) is part of the signed payload: a cursor from one tool is
refused by another.
"""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import dataclass
from typing import Any

from gateway.protocol.cursors import CursorCodec
from gateway.protocol.errors import InvalidParams

__all__ = ["PageCursor", "encode_cursor", "decode_cursor"]


@dataclass(frozen=True, slots=True)
class PageCursor:
    tool: str
    sql: str
    params: Any  # list | dict | None, exactly as the caller sent them
    offset: int


def encode_cursor(codec: CursorCodec, cursor: PageCursor) -> str:
    raw = json.dumps([cursor.tool, cursor.sql, cursor.params, cursor.offset], separators=(",", ":"),
                     default=str).encode()
    packed = base64.urlsafe_b64encode(zlib.compress(raw, 6)).decode().rstrip("=")
    return codec.encode("sql-page", packed)


def decode_cursor(codec: CursorCodec, token: object, tool: str) -> PageCursor:
    """The page cursor, or InvalidParams when it is forged, foreign or from another tool."""
    packed = codec.decode("sql-page", token)
    try:
        raw = zlib.decompress(base64.urlsafe_b64decode(packed + "=" * (-len(packed) % 4)))
        owner, sql, params, offset = json.loads(raw)
    except (ValueError, TypeError, zlib.error):
        raise InvalidParams("Invalid cursor") from None
    if owner != tool:
        raise InvalidParams(f"Invalid cursor: it was issued by tool {owner!r}, not {tool!r}")
    if not isinstance(sql, str) or not isinstance(offset, int) or offset < 0:
        raise InvalidParams("Invalid cursor")
    return PageCursor(owner, sql, params, offset)
