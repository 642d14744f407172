"""PostgreSQL backend (asyncpg through a SQLAlchemy async engine).

Every read runs as ``BEGIN TRANSACTION READ ONLY; SET LOCAL statement_timeout = …`` (our own text,
one round trip), then the caller's SQL through asyncpg's *extended* protocol, which accepts exactly
one statement — so ``COMMIT; DROP …`` cannot even be parsed — and always ends in ``ROLLBACK``,
which also undoes any ``SET`` a statement made. Writes, ``FOR UPDATE``, writable CTEs, ``nextval()``
and side-effecting functions all fail inside the server with SQLSTATE 25006; without
``allow_writes`` the session default is read-only too. Every connection returned to the pool is
reset (:mod:`connectors.sql.pg_session`); the ``ROLLBACK`` of a read travels with that reset.

Pages and bytes: a page is one Bind/Execute with a row limit of ``max_rows + 1`` (the server sends
no more); later pages open a portal and ``MOVE FORWARD`` past the rows already returned. Under a
byte budget the statement is wrapped so that the *server* withholds values that do not fit
(:mod:`connectors.sql.budget`: a fast wrapper, and a slow one with a running byte count from the
first large row on); statements that cannot be wrapped (``SHOW``, ``EXPLAIN``) and the other
replies are bounded by a byte meter on the socket. The gateway holds one page at most.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import create_async_engine

from . import schema as sch
from .budget import WrapPlan, column_kind, plan_wrappers, row_size, wire_limit
from .engine import CLIENT_GRACE_S, Backend, Page, StaleConnection, WriteResult, checkout
from .errors import ResultTooLarge
from .guard import wrappable
from .pg_session import (
    PRIVILEGES_SQL,
    RESET_SQL,
    WireMeter,
    install_reset,
    meter_of,
    privilege_findings,
)
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


@dataclass(slots=True)
class _Plan:
    """How one statement is read on one connection (prepared statements are per connection)."""

    columns: list[str]
    kinds: list[str]
    wrap: WrapPlan | None  # None: the statement runs as sent (no budget, or it cannot be wrapped)
    plain: Any  # the statement itself, when it runs as sent
    fast: Any  # the fast wrapper (or the statement itself when no value needs a cap), or None
    slow: Any = None  # the slow wrapper, prepared when first needed

    def valid(self) -> bool:
        return not any(s is not None and s._state.closed for s in (self.plain, self.fast, self.slow))


class _WrapFailed(Exception):
    """The server refused a wrapper of a statement it accepted alone (the transaction is aborted)."""


class PostgresBackend(Backend):
    dialect = "postgresql"
    default_schemas = ("public",)

    def __init__(self, url: str, pool_size: int, connect_timeout_s: float, allow_writes: bool,
                 app_name: str, max_bytes: int = 0) -> None:
        super().__init__(url, pool_size, connect_timeout_s, allow_writes, app_name, max_bytes)
        settings = {"application_name": app_name[:63]}
        if not allow_writes:
            # Defence in depth: even a transaction we forgot to open explicitly is read-only.
            settings["default_transaction_read_only"] = "on"
        self.engine = create_async_engine(
            url, pool_size=pool_size, max_overflow=0, pool_timeout=connect_timeout_s + 30,
            pool_recycle=1800, pool_reset_on_return=None,  # install_reset's event is the reset
            connect_args={"timeout": connect_timeout_s, "command_timeout": None, "server_settings": settings},
        )
        install_reset(self.engine, RESET_SQL)
        self._plans: weakref.WeakKeyDictionary[Any, OrderedDict[tuple[str, int], _Plan]] = weakref.WeakKeyDictionary()
        self._meters: weakref.WeakKeyDictionary[Any, WireMeter] = weakref.WeakKeyDictionary()
        self._unwrappable: OrderedDict[str, None] = OrderedDict()
        self._releases: set[asyncio.Task[None]] = set()

    async def dispose(self) -> None:
        if self._releases:
            await asyncio.gather(*self._releases, return_exceptions=True)
        await self.engine.dispose()

    async def reset_pool(self) -> None:
        await self.engine.dispose()

    @asynccontextmanager
    async def _transaction(self, read_only: bool, timeout_s: float) -> AsyncIterator[Any]:
        """A connection inside BEGIN … ROLLBACK (read-only: the pool's reset rolls back) or … COMMIT."""
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
                        self._plans.pop(conn, None)  # a failed statement may have changed the schema
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
                    if not read_only and conn.is_in_transaction():  # a statement's own COMMIT may have ended it
                        await conn.execute("COMMIT")
                    return
            except StaleConnection:
                # A pooled connection the server closed meanwhile (restart, pg_terminate_backend):
                # drop the whole pool and retry once on a fresh connection.
                await self.reset_pool()

    # -- reads under the byte budget -----------------------------------------------------------
    async def read_page(self, sql: str, args: Sequence[Any], offset: int, limit: int, timeout_s: float) -> Page:
        wrap = self.max_bytes > 0 and sql not in self._unwrappable and wrappable(sql)
        try:
            return await self._read_page(sql, args, offset, limit, timeout_s, wrap)
        except _WrapFailed as exc:
            log.info("sql %s: a statement could not be wrapped for the byte budget (%s); it runs as sent, "
                     "bounded by the byte meter", self.app_name, exc.__cause__)
            self._unwrappable[sql] = None
            if len(self._unwrappable) > 256:
                self._unwrappable.popitem(last=False)
            return await self._read_page(sql, args, offset, limit, timeout_s, False)

    async def _read_page(self, sql: str, args: Sequence[Any], offset: int, limit: int, timeout_s: float,
                         wrap: bool) -> Page:
        tx = self._transaction(True, timeout_s)
        conn = await tx.__aenter__()
        meter: WireMeter | None = None
        try:
            try:
                plan = await self._plan(conn, sql, limit, wrap)
                meter = self._arm(conn, wire_limit(self.max_bytes, limit, len(plan.columns) + 1))
                page = await self._run(conn, plan, list(args), offset, limit, timeout_s + CLIENT_GRACE_S)
            finally:
                if meter is not None and not meter.tripped:
                    meter.arm(None)
        except BaseException as exc:
            err = self._too_large(meter, exc)
            await tx.__aexit__(type(err), err, err.__traceback__)  # rolls back (or discards the connection)
            if err is exc:
                raise
            raise err from exc
        # The caller has its rows: the ROLLBACK (with the pool's reset) runs in the background,
        # saving a round trip on every read (dispose() waits for it).
        self._release_later(tx.__aexit__(None, None, None))
        return page

    def _arm(self, conn: Any, limit: int) -> WireMeter | None:
        if self.max_bytes <= 0:
            return None
        meter = meter_of(conn, self._meters)
        if meter is not None:
            meter.arm(limit)
        return meter

    def _too_large(self, meter: WireMeter | None, exc: BaseException) -> BaseException:
        if meter is None or not meter.tripped:
            return exc
        return ResultTooLarge(
            f"Refused: the reply exceeded this connector's byte budget (max_bytes = {self.max_bytes}; more than "
            f"{meter.limit} bytes arrived), so the statement was stopped. Select fewer or narrower columns, "
            "add a LIMIT, or cut large values with left()/substring().")

    async def _plan(self, conn: Any, sql: str, limit: int, wrap: bool) -> _Plan:
        cache = self._plans.get(conn)
        if cache is None:
            cache = self._plans[conn] = OrderedDict()
        key = (sql, limit if wrap else -1)
        plan = cache.get(key)
        if plan is not None and plan.valid():
            cache.move_to_end(key)
            return plan
        plain = await conn.prepare(sql)
        attrs = plain.get_attributes()
        columns = [a.name for a in attrs]
        if not wrap or not attrs:
            plan = _Plan(columns, [], None, plain, None)
        else:
            kinds = [column_kind(a.type.oid) for a in attrs]
            w = plan_wrappers(sql, kinds, len(plain.get_parameters()), limit, self.max_bytes)
            fast = None
            if w.fast_sql == sql:
                fast = plain
            elif w.fast_sql is not None:
                fast = await self._prepare_wrapper(conn, w.fast_sql)
            plan = _Plan(columns, kinds, w, None, fast)
        cache[key] = plan
        if len(cache) > _STMT_CACHE:
            cache.popitem(last=False)
        return plan

    @staticmethod
    async def _prepare_wrapper(conn: Any, sql: str) -> Any:
        try:
            return await conn.prepare(sql)
        except asyncpg.PostgresError as exc:
            raise _WrapFailed() from exc

    @staticmethod
    async def _fetch(stmt: Any, args: list[Any], offset: int, count: int, timeout: float) -> list[Any]:
        if offset == 0:
            # One Bind/Execute with a row limit: the server stops after ``count`` rows.
            return list(await stmt._PreparedStatement__bind_execute(args, count, timeout))
        cur = await stmt.cursor(*args, timeout=timeout)
        await cur.forward(offset, timeout=timeout)
        return list(await cur.fetch(count, timeout=timeout))

    async def _run(self, conn: Any, plan: _Plan, args: list[Any], offset: int, limit: int, timeout: float) -> Page:
        w = plan.wrap
        if w is None or (plan.fast is not None and not w.fast_flag):
            rows = await self._fetch(plan.plain if w is None else plan.fast, args, offset, limit + 1, timeout)
            more = len(rows) > limit
            return Page(plan.columns, rows[:limit], more, "max_rows" if more else None)
        n = w.width
        kept: list[Any] = []
        if plan.fast is not None:
            rows = await self._fetch(plan.fast, args, offset, limit + 1, timeout)
            if not any(map(itemgetter(n), rows[:limit])):
                # Every value fitted (by construction, so did the page); the flag column stays on the
                # rows (width=n): slicing 500 records costs more than ignoring it.
                more = len(rows) > limit
                return Page(plan.columns, rows[:limit], more, "max_rows" if more else None, width=n)
            big = next(j for j, r in enumerate(rows) if r[n])
            kept = [r[:n] for r in rows[:big]]
        # From the first row with a large value on, the server counts bytes as it goes.
        if plan.slow is None:
            plan.slow = await self._prepare_wrapper(conn, w.slow_sql)
        remaining = self.max_bytes - sum(row_size(r, plan.kinds) for r in kept)
        room = limit - len(kept)
        params = [*args, offset + len(kept), remaining]
        if w.cuttable:
            params.append(0 if kept else max(1, remaining // w.cuttable))
        rows = await plan.slow._PreparedStatement__bind_execute(params, room + 1, timeout)
        out, more, reason, cut = kept, False, None, False
        for i, r in enumerate(rows):
            if i == room:
                more, reason = True, "max_rows"
                break
            if r[n]:  # past the budget: stop before it, unless it is alone larger than the budget
                reason, more = "max_bytes", True
                if not out:
                    out, cut, more = [r[:n]], True, len(rows) > i + 1
                break
            out.append(r[:n])
        return Page(plan.columns, out, more, reason, cut)

    def _release_later(self, release: Awaitable[Any]) -> None:
        async def run() -> None:
            try:
                await release
            except Exception as exc:  # the connection was invalidated by _checkout
                log.debug("background release failed: %s", type(exc).__name__)

        task = asyncio.get_running_loop().create_task(run())
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    # -- other statements (bounded by the meter only) ------------------------------------------
    @asynccontextmanager
    async def _metered(self, read_only: bool, timeout_s: float, limit: int) -> AsyncIterator[Any]:
        meter: WireMeter | None = None
        try:
            async with self._transaction(read_only, timeout_s) as conn:
                meter = self._arm(conn, wire_limit(self.max_bytes, limit, 1))
                try:
                    yield conn
                finally:
                    if meter is not None and not meter.tripped:
                        meter.arm(None)
        except Exception as exc:
            err = self._too_large(meter, exc)
            if err is exc:
                raise
            raise err from exc

    async def explain(self, sql: str, args: Sequence[Any], analyze: bool, timeout_s: float) -> str:
        text = f"EXPLAIN (ANALYZE {'true' if analyze else 'false'}, FORMAT TEXT) {sql}"
        async with self._metered(True, timeout_s, 0) as conn:
            stmt = await conn.prepare(text)
            rows = await stmt.fetch(*args, timeout=timeout_s + CLIENT_GRACE_S)
        return "\n".join(r[0] for r in rows)

    async def write(self, sql: str, args: Sequence[Any], limit: int, timeout_s: float) -> WriteResult:
        # A reply past the meter aborts the connection before COMMIT: the write is rolled back.
        async with self._metered(False, timeout_s, limit) as conn:
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
            privileges = await conn.fetchrow(PRIVILEGES_SQL)
            rel = await conn.fetch(_PG_RELATIONS, list(schemas))
            cols = await conn.fetch(_PG_COLUMNS, list(schemas))
            cons = await conn.fetch(_PG_CONSTRAINTS, list(schemas))
            idx = await conn.fetch(_PG_INDEXES, list(schemas))
        snap = sch.build_pg_snapshot([dict(r) for r in rel], [dict(r) for r in cols], [dict(r) for r in cons],
                                     [dict(r) for r in idx], info["database"], info["version"])
        return snap, {"user": info["user"], "superuser": bool(info["superuser"]),
                      "privileged": privilege_findings(privileges, self.allow_writes)}

    def row_sql(self, table: sch.Table, key_columns: Sequence[str]) -> str:
        conds = []
        for i, name in enumerate(key_columns, 1):
            col = table.column(name)
            # Bind text and cast on the server: the URI carries text, the column has its own type.
            cast = f"::text::{col.type}" if col is not None else ""
            conds.append(f"{quote_ident(name)} = ${i}{cast}")
        return f"SELECT {sch.select_list(table)} FROM {qualified(table.schema, table.name)} WHERE {' AND '.join(conds)}"
