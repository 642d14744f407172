"""SQLite backend (aiosqlite through a SQLAlchemy async engine).

Reads use their own engine opened with ``mode=ro``; each of its connections gets
``PRAGMA query_only = 1`` and an authorizer that refuses ``ATTACH``/``DETACH``, pragma writes and
extension loading. sqlite3 executes one statement per call. A progress handler aborts a statement
past its deadline, and a watchdog on the event loop interrupts it (``sqlite3_interrupt``) shortly
after, should one step run long. Writes (``allow_writes``) go through a second, read-write engine
with one connection.

Byte budget. SQLite runs inside the gateway's process, so what must not happen is *building* a
large value: before each read, ``SQLITE_LIMIT_LENGTH`` is set to ``max_bytes`` divided by the
statement's result columns (counted with ``EXPLAIN``, cached per connection), so no value, and no
row sorted or grouped, can exceed it: ``zeroblob(1000000000)`` fails at once ("string or blob too
big", reported as over the budget), and one row never exceeds ``max_bytes``. Rows are stepped one
by one in the connection's worker thread, which stops before the row that would exceed the budget
(``truncatedBy: max_bytes``) or after ``limit + 1`` rows; rows past the page are never read.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from gateway.protocol.errors import ConfigError

from . import schema as sch
from .engine import CLIENT_GRACE_S, Backend, Page, WriteResult, checkout
from .errors import ResultTooLarge
from .guard import first_word
from .statements import qualified, quote_ident

__all__ = ["SQLiteBackend"]

# Pragmas that only report on the schema; any other pragma may only be read, never set.
_READ_PRAGMAS = frozenset({
    "table_info", "table_xinfo", "index_list", "index_info", "index_xinfo", "foreign_key_list",
    "database_list", "table_list", "collation_list", "function_list", "compile_options",
})
_DENIED_FUNCTIONS = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"})


def _read_authorizer(action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None) -> int:
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA:
        name = (arg1 or "").lower()
        return sqlite3.SQLITE_OK if name in _READ_PRAGMAS or arg2 is None else sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


class _Deadline:
    __slots__ = ("at", "columns")

    def __init__(self) -> None:
        self.at: float | None = None
        self.columns: OrderedDict[str, int] = OrderedDict()  # result columns per statement (EXPLAIN)

    def __call__(self) -> int:
        # Runs in aiosqlite's worker thread every N VM steps; non-zero aborts ("interrupted").
        return 1 if self.at is not None and time.monotonic() > self.at else 0


def _result_columns(raw: sqlite3.Connection, sql: str, args: Sequence[Any], cache: OrderedDict[str, int]) -> int:
    """How many columns ``sql`` returns, from its bytecode (compiled, not run)."""
    if first_word(sql) == "explain":
        return 8  # EXPLAIN's own columns (EXPLAIN QUERY PLAN has 4); it cannot be explained again
    n = cache.get(sql)
    if n is not None:
        cache.move_to_end(sql)
        return n
    cur = raw.execute(f"EXPLAIN {sql}", list(args))
    try:
        # Rows: addr, opcode, p1, p2, ...; ResultRow's p2 is the number of columns.
        n = max((row[3] for row in cur if row[1] == "ResultRow"), default=0)
    finally:
        cur.close()
    cache[sql] = n
    if len(cache) > 64:
        cache.popitem(last=False)
    return n


def _row_bytes(row: Sequence[Any]) -> int:
    n = 0
    for value in row:
        if value.__class__ is str or value.__class__ is bytes:
            n += len(value)
        elif value is not None:
            n += 8
    return n


def _read_in_thread(raw: sqlite3.Connection, sql: str, args: Sequence[Any], offset: int, limit: int,
                    budget: int, deadline: _Deadline) -> Page:
    """One page, stepped in the connection's worker thread (``aiosqlite``'s queue)."""
    if budget:
        per_value = max(1, budget // max(1, _result_columns(raw, sql, args, deadline.columns)))
        raw.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, per_value)
    try:
        cur = raw.execute(sql, list(args))
        try:
            columns = [d[0] for d in cur.description or ()]
            for _ in range(offset):  # stepped and dropped one by one: memory stays at one row
                if cur.fetchone() is None:
                    break
            if not budget:
                rows = cur.fetchmany(limit + 1)
                more = len(rows) > limit
                return Page(columns, [tuple(r) for r in rows[:limit]], more, "max_rows" if more else None)
            out: list[Sequence[Any]] = []
            used, reason = 0, None
            for row in cur:
                if len(out) == limit:
                    reason = "max_rows"
                    break
                size = _row_bytes(row)
                if out and used + size > budget:
                    reason = "max_bytes"
                    break
                out.append(tuple(row))
                used += size
            return Page(columns, out, reason is not None, reason)
        finally:
            cur.close()
    except sqlite3.Error as exc:
        if budget and "too big" in str(exc).lower():
            raise ResultTooLarge(
                f"Refused: a value (or a row being sorted or grouped) is larger than this connector's byte budget "
                f"allows: max_bytes = {budget} shared by the result's columns. Select fewer columns, cut large "
                "values with substr(), or raise max_bytes.") from exc
        raise
    finally:
        if budget:
            raw.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, budget)


class SQLiteBackend(Backend):
    dialect = "sqlite"
    default_schemas = ("main",)

    def __init__(self, url: str, pool_size: int, connect_timeout_s: float, allow_writes: bool,
                 app_name: str, base_dir: Path, max_bytes: int = 0) -> None:
        super().__init__(url, pool_size, connect_timeout_s, allow_writes, app_name, max_bytes)
        parsed = make_url(url)
        database = parsed.database or ""
        if database in ("", ":memory:") or database.startswith("file:"):
            raise ConfigError("sqlite url must name a database file (sqlite+aiosqlite:///path/to/file.db)",
                              f"connectors[{app_name}].url")
        path = Path(database)
        if not path.is_absolute():
            path = (Path(base_dir) / path).resolve()
        if not path.is_file():
            raise ConfigError(f"sqlite database file not found: {path}", f"connectors[{app_name}].url")
        self.path = path
        ro = parsed.set(database=f"file:{quote(str(path))}", query={**parsed.query, "mode": "ro", "uri": "true"})
        args = {"timeout": connect_timeout_s}
        self.engine = create_async_engine(ro, pool_size=pool_size, max_overflow=0, connect_args=args)
        self.write_engine = (create_async_engine(parsed.set(database=str(path)), pool_size=1, max_overflow=0,
                                                 connect_args=args) if allow_writes else None)
        self._deadlines: weakref.WeakKeyDictionary[Any, _Deadline] = weakref.WeakKeyDictionary()

    async def dispose(self) -> None:
        await self.engine.dispose()
        if self.write_engine is not None:
            await self.write_engine.dispose()

    async def reset_pool(self) -> None:
        await self.dispose()

    async def _setup(self, conn: Any, read_only: bool) -> _Deadline:
        deadline = self._deadlines.get(conn)
        if deadline is None:
            deadline = _Deadline()
            if read_only:
                await conn.execute("PRAGMA query_only = 1")
                await conn.set_authorizer(_read_authorizer)
                if self.max_bytes:
                    # aiosqlite has no setlimit(): run it on the connection's own thread.
                    await conn._execute(conn._conn.setlimit, sqlite3.SQLITE_LIMIT_LENGTH, self.max_bytes)
            await conn.set_progress_handler(deadline, 1000)
            self._deadlines[conn] = deadline
        return deadline

    @asynccontextmanager
    async def _conn(self, read_only: bool, timeout_s: float) -> AsyncIterator[Any]:
        engine = self.engine if read_only else self.write_engine
        assert engine is not None
        async with checkout(engine) as conn:
            deadline = await self._setup(conn, read_only)
            deadline.at = time.monotonic() + timeout_s
            # The progress handler runs between VM steps; sqlite3_interrupt also stops a long one
            # (a sort, a large allocation) if the deadline passes by more than the grace.
            watchdog = asyncio.get_running_loop().call_later(timeout_s + min(1.0, CLIENT_GRACE_S),
                                                             conn._conn.interrupt)
            try:
                yield conn
            finally:
                watchdog.cancel()
                deadline.at = None

    async def read_page(self, sql: str, args: Sequence[Any], offset: int, limit: int, timeout_s: float) -> Page:
        async with self._conn(True, timeout_s) as conn:
            page: Page = await conn._execute(_read_in_thread, conn._conn, sql, args, offset, limit, self.max_bytes,
                                             self._deadlines[conn])
        return page

    async def explain(self, sql: str, args: Sequence[Any], analyze: bool, timeout_s: float) -> str:
        async with self._conn(True, timeout_s) as conn:
            cur = await conn.execute(f"EXPLAIN QUERY PLAN {sql}", list(args))
            rows = await cur.fetchall()
            await cur.close()
        depth: dict[int, int] = {0: -1}
        lines = []
        for node_id, parent, _unused, detail in rows:
            depth[node_id] = depth.get(parent, -1) + 1
            lines.append("  " * depth[node_id] + "-> " + str(detail))
        return "\n".join(lines) or "(no plan)"

    async def write(self, sql: str, args: Sequence[Any], limit: int, timeout_s: float) -> WriteResult:
        async with self._conn(False, timeout_s) as conn:
            try:
                cur = await conn.execute(sql, list(args))
                columns = [d[0] for d in cur.description or ()]
                rows = await cur.fetchmany(limit) if columns else []
                count = cur.rowcount
                await cur.close()
                await conn.commit()
            except BaseException:
                await asyncio.shield(conn.rollback())
                raise
        return WriteResult(columns, [tuple(r) for r in rows], count if count >= 0 else None,
                           f"OK {count}" if count >= 0 else "OK")

    async def introspect(self, schemas: Sequence[str], timeout_s: float) -> tuple[sch.Snapshot, dict[str, Any]]:
        tables = []
        async with self._conn(True, timeout_s) as conn:
            version = (await (await conn.execute("SELECT sqlite_version()")).fetchone())[0]
            for schema_name in schemas:
                q = quote_ident(schema_name)
                cur = await conn.execute(
                    f"SELECT name, type FROM {q}.sqlite_master WHERE type IN ('table', 'view') "
                    "AND name NOT LIKE 'sqlite_%' ORDER BY name")
                objects = await cur.fetchall()
                for name, kind in objects:
                    t = quote_ident(name)

                    async def rows(sql: str, conn: Any = conn) -> list[dict[str, Any]]:
                        c = await conn.execute(sql)
                        names = [d[0] for d in c.description or ()]
                        return [dict(zip(names, r, strict=True)) for r in await c.fetchall()]

                    info = await rows(f"PRAGMA {q}.table_info({t})")
                    fks = await rows(f"PRAGMA {q}.foreign_key_list({t})") if kind == "table" else []
                    idx = await rows(f"PRAGMA {q}.index_list({t})") if kind == "table" else []
                    idx_cols = {i["name"]: [c["name"] for c in await rows(f"PRAGMA {q}.index_info({quote_ident(i['name'])})")]
                                for i in idx}
                    estimate = None
                    if kind == "table":
                        # Exact up to a cap (cheap), then the rowid high-water mark as an estimate.
                        c = await conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM {q}.{t} LIMIT 100001)")
                        estimate = (await c.fetchone())[0]
                        if estimate > 100000:
                            try:
                                c = await conn.execute(f"SELECT max(rowid) FROM {q}.{t}")
                                estimate = (await c.fetchone())[0] or estimate
                            except sqlite3.Error:
                                pass
                    tables.append(sch.build_sqlite_table(schema_name, name, kind, info, fks, idx, idx_cols, estimate))
        snap = sch.Snapshot.of("sqlite", tables, self.path.name, version)
        return snap, {}

    def row_sql(self, table: sch.Table, key_columns: Sequence[str]) -> str:
        conds = " AND ".join(f"{quote_ident(name)} = ?{i}" for i, name in enumerate(key_columns, 1))
        return f"SELECT {sch.select_list(table)} FROM {qualified(table.schema, table.name)} WHERE {conds}"
