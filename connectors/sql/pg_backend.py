"""PostgreSQL backend (asyncpg through a SQLAlchemy async engine).

Every read runs as ``BEGIN TRANSACTION READ ONLY; SET LOCAL statement_timeout = …`` (our own text,
one round trip), then the caller's SQL through asyncpg's *extended* protocol, which accepts exactly
one statement — so ``COMMIT; DROP …`` cannot even be parsed — and always ends in ``ROLLBACK``,
which also undoes any ``SET`` a statement made. Writes, ``FOR UPDATE``, writable CTEs, ``nextval()``
and side-effecting functions all fail inside the server with SQLSTATE 25006; without
``allow_writes`` the session default is read-only too. The first page is one Bind/Execute with a
row limit of ``max_rows + 1`` (the server sends no more); later pages open a portal and
``MOVE FORWARD`` past the rows already returned, so the gateway holds one page at most.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy.ext.asyncio import create_async_engine

from . import schema as sch
from .engine import CLIENT_GRACE_S, Backend, Page, StaleConnection, WriteResult, checkout
from .statements import qualified, quote_ident

__all__ = ["PostgresBackend"]

log = logging.getLogger(__name__)

_STMT_CACHE = 64

_PG_RELATIONS = """
SELECT c.oid, n.nspname AS schema, c.relname AS name, c.relkind::text AS kind,
       c.reltuples::float8 AS estimate, obj_description(c.oid, 'pg_class') AS comment
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = ANY($1::text[]) AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND NOT c.relispartition
ORDER BY 2, 3"""
_PG_COLUMNS = """
SELECT a.attrelid AS oid, a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type,
       NOT a.attnotnull AS nullable, pg_get_expr(d.adbin, d.adrelid) AS default,
       col_description(a.attrelid, a.attnum) AS comment
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = ANY($1::text[]) AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND a.attnum > 0
  AND NOT a.attisdropped
ORDER BY a.attrelid, a.attnum"""
_PG_CONSTRAINTS = """
SELECT con.conrelid AS oid, con.conname AS name, con.contype::text AS contype,
       ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(num, ord)
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.num ORDER BY k.ord) AS columns,
       fn.nspname AS ref_schema, fc.relname AS ref_table,
       ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY k(num, ord)
             JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.num ORDER BY k.ord) AS ref_columns
FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_class fc ON fc.oid = con.confrelid LEFT JOIN pg_namespace fn ON fn.oid = fc.relnamespace
WHERE n.nspname = ANY($1::text[]) AND con.contype IN ('p', 'f')"""
_PG_INDEXES = """
SELECT i.indrelid AS oid, ic.relname AS name, i.indisunique AS unique,
       pg_get_indexdef(i.indexrelid) AS definition,
       ARRAY(SELECT a.attname::text FROM unnest(i.indkey) WITH ORDINALITY k(num, ord)
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.num ORDER BY k.ord) AS columns
FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_class c ON c.oid = i.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = ANY($1::text[])"""
_PG_INFO = """
SELECT current_database() AS database, current_setting('server_version') AS version,
       current_user AS user, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser"""


class PostgresBackend(Backend):
    dialect = "postgresql"
    default_schemas = ("public",)

    def __init__(self, url: str, pool_size: int, connect_timeout_s: float, allow_writes: bool,
                 app_name: str) -> None:
        super().__init__(url, pool_size, connect_timeout_s, allow_writes, app_name)
        settings = {"application_name": app_name[:63]}
        if not allow_writes:
            # Defence in depth: even a transaction we forgot to open explicitly is read-only.
            settings["default_transaction_read_only"] = "on"
        self.engine = create_async_engine(
            url, pool_size=pool_size, max_overflow=0, pool_timeout=connect_timeout_s + 30,
            pool_recycle=1800,
            connect_args={"timeout": connect_timeout_s, "command_timeout": None, "server_settings": settings},
        )
        self._stmts: weakref.WeakKeyDictionary[Any, OrderedDict[str, Any]] = weakref.WeakKeyDictionary()
        self._releases: set[asyncio.Task[None]] = set()

    async def dispose(self) -> None:
        if self._releases:
            await asyncio.gather(*self._releases, return_exceptions=True)
        await self.engine.dispose()

    async def reset_pool(self) -> None:
        await self.engine.dispose()

    async def _prepare(self, conn: Any, sql: str) -> Any:
        cache = self._stmts.get(conn)
        if cache is None:
            cache = self._stmts[conn] = OrderedDict()
        stmt = cache.get(sql)
        if stmt is not None and not stmt._state.closed:
            cache.move_to_end(sql)
            return stmt
        stmt = await conn.prepare(sql)
        cache[sql] = stmt
        if len(cache) > _STMT_CACHE:
            cache.popitem(last=False)
        return stmt

    @asynccontextmanager
    async def _transaction(self, read_only: bool, timeout_s: float) -> AsyncIterator[Any]:
        """A connection inside BEGIN … ROLLBACK (read-only) or … COMMIT (writes)."""
        mode = "READ ONLY" if read_only else "READ WRITE"
        ms = max(1, int(timeout_s * 1000))
        for attempt in (0, 1):
            try:
                async with checkout(self.engine) as conn:
                    try:
                        # Our own text in one round trip: the simple protocol allows two statements here.
                        await conn.execute(f"BEGIN TRANSACTION {mode}; SET LOCAL statement_timeout = {ms}")
                    except Exception as exc:
                        # BEGIN fails only on a broken connection (or a broken server).
                        if attempt == 0:
                            raise StaleConnection() from exc  # invalidated by _checkout
                        raise
                    try:
                        yield conn
                    except BaseException as exc:
                        self._stmts.pop(conn, None)  # a failed statement may have changed the schema
                        # A cancelled statement's connection is invalidated by checkout() (asyncpg
                        # has already asked the server to cancel); others roll back and are reused.
                        if (not isinstance(exc, asyncio.CancelledError) and not conn.is_closed()
                                and conn.is_in_transaction()):
                            try:
                                await asyncio.shield(conn.execute("ROLLBACK"))
                            except Exception as rollback_exc:
                                # Keep the original error; the next BEGIN on this connection
                                # fails and is retried on a fresh one.
                                log.debug("rollback failed: %s", type(rollback_exc).__name__)
                        raise
                    if conn.is_in_transaction():  # a statement's own COMMIT already ended it
                        await conn.execute("ROLLBACK" if read_only else "COMMIT")
                    return
            except StaleConnection:
                # A pooled connection the server closed meanwhile (restart, pg_terminate_backend):
                # drop the whole pool and retry once on a fresh connection.
                await self.reset_pool()

    async def read_page(self, sql: str, args: Sequence[Any], offset: int, limit: int, timeout_s: float) -> Page:
        client_timeout = timeout_s + CLIENT_GRACE_S
        tx = self._transaction(True, timeout_s)
        conn = await tx.__aenter__()
        try:
            stmt = await self._prepare(conn, sql)
            columns = [a.name for a in stmt.get_attributes()]
            if offset == 0:
                # One Bind/Execute with a row limit: the server stops after limit + 1 rows.
                rows = await stmt._PreparedStatement__bind_execute(list(args), limit + 1, client_timeout)
            else:
                cur = await stmt.cursor(*args, timeout=client_timeout)
                await cur.forward(offset, timeout=client_timeout)
                rows = await cur.fetch(limit + 1, timeout=client_timeout)
        except BaseException as exc:
            await tx.__aexit__(type(exc), exc, exc.__traceback__)  # rolls back, then re-raises
            raise
        # The caller has its rows: ROLLBACK and the return to the pool run in the background,
        # saving a round trip on every read (dispose() waits for them).
        self._release_later(tx.__aexit__(None, None, None))
        return Page(columns, list(rows[:limit]), len(rows) > limit)

    def _release_later(self, release: Awaitable[Any]) -> None:
        async def run() -> None:
            try:
                await release
            except Exception as exc:  # the connection was invalidated by _checkout
                log.debug("background release failed: %s", type(exc).__name__)

        task = asyncio.get_running_loop().create_task(run())
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def explain(self, sql: str, args: Sequence[Any], analyze: bool, timeout_s: float) -> str:
        text = f"EXPLAIN (ANALYZE {'true' if analyze else 'false'}, FORMAT TEXT) {sql}"
        async with self._transaction(True, timeout_s) as conn:
            stmt = await conn.prepare(text)
            rows = await stmt.fetch(*args, timeout=timeout_s + CLIENT_GRACE_S)
        return "\n".join(r[0] for r in rows)

    async def write(self, sql: str, args: Sequence[Any], limit: int, timeout_s: float) -> WriteResult:
        async with self._transaction(False, timeout_s) as conn:
            stmt = await conn.prepare(sql)
            columns = [a.name for a in stmt.get_attributes()]
            rows = await stmt.fetch(*args, timeout=timeout_s + CLIENT_GRACE_S)
            status = stmt.get_statusmsg() or ""
        parts = status.split()
        count = int(parts[-1]) if parts and parts[-1].isdigit() else None
        return WriteResult(columns, list(rows[:limit]), count, status)

    async def introspect(self, schemas: Sequence[str], timeout_s: float) -> tuple[sch.Snapshot, dict[str, Any]]:
        async with self._transaction(True, timeout_s) as conn:
            info = await conn.fetchrow(_PG_INFO)
            rel = await conn.fetch(_PG_RELATIONS, list(schemas))
            cols = await conn.fetch(_PG_COLUMNS, list(schemas))
            cons = await conn.fetch(_PG_CONSTRAINTS, list(schemas))
            idx = await conn.fetch(_PG_INDEXES, list(schemas))
        snap = sch.build_pg_snapshot([dict(r) for r in rel], [dict(r) for r in cols], [dict(r) for r in cons],
                                     [dict(r) for r in idx], info["database"], info["version"])
        return snap, {"user": info["user"], "superuser": bool(info["superuser"])}

    def row_sql(self, table: sch.Table, key_columns: Sequence[str]) -> str:
        conds = []
        for i, name in enumerate(key_columns, 1):
            col = table.column(name)
            # Bind text and cast on the server: the URI carries text, the column has its own type.
            cast = f"::text::{col.type}" if col is not None else ""
            conds.append(f"{quote_ident(name)} = ${i}{cast}")
        return f"SELECT * FROM {qualified(table.schema, table.name)} WHERE {' AND '.join(conds)}"
