"""The I/O shell of the SQL connector: the backend contract and pooled driver connections.

SQLAlchemy owns URLs, pooling, connect arguments and dialect set-up; statements run on the pooled
*driver* connection (asyncpg / aiosqlite) because that is where the guarantees live — see
:mod:`connectors.sql.pg_backend` (read-only transactions, extended protocol, row-limited portals)
and :mod:`connectors.sql.sqlite_backend` (``mode=ro``, ``PRAGMA query_only``, an authorizer, a
deadline progress handler).

Backends raise the drivers' exceptions; :mod:`connectors.sql.errors` classifies them. A connection
that failed with a connectivity error or was cancelled mid-statement is invalidated, never reused.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from . import schema as sch
from .errors import classify

__all__ = ["Page", "WriteResult", "Backend", "StaleConnection", "checkout", "CLIENT_GRACE_S"]

CLIENT_GRACE_S = 5.0  # client-side safety net beyond the server's statement_timeout


@dataclass(frozen=True, slots=True)
class Page:
    columns: list[str]
    rows: list[Sequence[Any]]  # at most limit rows
    more: bool
    reason: str | None = None  # why the page ended early or was cut: "max_rows" | "max_bytes"
    cut: bool = False  # its only row was larger than max_bytes: large values were shortened
    width: int | None = None  # rows carry columns past this one (the budget's flag): ignore them


@dataclass(frozen=True, slots=True)
class WriteResult:
    columns: list[str]
    rows: list[Sequence[Any]]
    rowcount: int | None
    status: str


class Backend(abc.ABC):
    dialect: str
    default_schemas: tuple[str, ...]

    def __init__(self, url: str, pool_size: int, connect_timeout_s: float, allow_writes: bool,
                 app_name: str, max_bytes: int = 0) -> None:
        self.url = url
        self.pool_size = pool_size
        self.connect_timeout_s = connect_timeout_s
        self.allow_writes = allow_writes
        self.app_name = app_name
        self.max_bytes = max_bytes  # byte budget of one page; 0: none

    @abc.abstractmethod
    async def dispose(self) -> None: ...

    @abc.abstractmethod
    async def reset_pool(self) -> None:
        """Drop every pooled connection (after the database went away)."""

    @abc.abstractmethod
    async def read_page(self, sql: str, args: Sequence[Any], offset: int, limit: int, timeout_s: float) -> Page:
        """At most ``limit`` rows from row ``offset`` on, and at most ``max_bytes`` of values."""

    @abc.abstractmethod
    async def explain(self, sql: str, args: Sequence[Any], analyze: bool, timeout_s: float) -> str: ...

    @abc.abstractmethod
    async def write(self, sql: str, args: Sequence[Any], limit: int, timeout_s: float) -> WriteResult: ...

    @abc.abstractmethod
    async def introspect(self, schemas: Sequence[str], timeout_s: float) -> tuple[sch.Snapshot, dict[str, Any]]:
        """The schema, and facts about the connection: ``privileged`` lists why the role is too
        powerful for this connector (empty or absent: it is not)."""

    @abc.abstractmethod
    def row_sql(self, table: sch.Table, key_columns: Sequence[str]) -> str:
        """SELECT of one row by key, one positional text parameter per key column."""


@asynccontextmanager
async def checkout(engine: AsyncEngine) -> AsyncIterator[Any]:
    """A pooled driver connection; invalidated (closed, not returned) after a connectivity
    failure or a cancellation, because its protocol state is then unknown."""
    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        driver = raw.driver_connection
        try:
            yield driver
        except BaseException as exc:
            closed = getattr(driver, "is_closed", None)
            if (isinstance(exc, (asyncio.CancelledError, StaleConnection)) or classify(exc).kind == "unavailable"
                    or (closed is not None and closed())):
                await asyncio.shield(conn.invalidate())
            raise


class StaleConnection(Exception):
    """BEGIN failed on a pooled connection for connectivity reasons (nothing ran yet)."""

