"""The audit store: one SQLAlchemy table, on SQLite (aiosqlite) or PostgreSQL (asyncpg).

``audit.store`` URLs: ``sqlite:///./audit.db`` (relative paths resolve against the config file's
folder), ``postgresql://...`` or ``postgresql+asyncpg://...``. The gateway owns the schema:
:meth:`AuditStore.open` creates the table and indexes, then migrates an older table by adding the
columns it lacks (every schema change so far is additive) and records the version in
``gw_audit_meta``.

Inserts are idempotent: ``event_id`` is unique and rows are inserted with ``ON CONFLICT DO
NOTHING``, so replaying a spill file after a partially failed batch never creates duplicates.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    inspect,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from .escape import TARGET_LIMIT

__all__ = ["SCHEMA_VERSION", "events_table", "AuditStore", "normalize_url", "COLUMN_LIMITS"]

SCHEMA_VERSION = 2
metadata = MetaData()

events_table = Table(
    "gw_audit_events", metadata,
    Column("id", Integer().with_variant(postgresql.BIGINT(), "postgresql"), primary_key=True, autoincrement=True),
    Column("event_id", String(32), nullable=False, unique=True),
    Column("time", DateTime(timezone=True), nullable=False),
    Column("instance", String(200)),
    Column("request_id", String(200)),
    Column("session_id", String(200)),
    Column("principal", String(200)),
    Column("transport", String(40)),
    Column("client_name", String(200)),
    Column("client_version", String(100)),
    Column("method", String(100), nullable=False),
    Column("target", Text),
    Column("connector", String(100)),
    Column("backend_target", Text),
    Column("arguments", JSON().with_variant(postgresql.JSONB(), "postgresql")),
    Column("outcome", String(40), nullable=False),
    Column("error_code", Integer),
    Column("error_message", Text),
    Column("latency_ms", Float),
    Column("backend_status", String(100)),
    Column("trace_id", String(64)),
    Column("endpoint", String(100)),  # added by issue 18 (migrated by _add_missing_columns)
    # Issue 26: true when the event's strings are escaped (gateway/audit/escape.py), and the keyed
    # digest of the unredacted arguments.
    Column("escaped", Boolean),
    Column("arguments_digest", String(64)),
)
Index("ix_gw_audit_time", events_table.c.time)
Index("ix_gw_audit_principal_time", events_table.c.principal, events_table.c.time)
Index("ix_gw_audit_target", events_table.c.target)

# What a value of each bounded column may hold, in characters (PostgreSQL refuses longer ones,
# and with them the whole batch); the indexed target is bounded too (a btree entry's size).
COLUMN_LIMITS: dict[str, int] = {
    c.name: c.type.length for c in events_table.columns
    if isinstance(c.type, String) and c.type.length and c.name != "event_id"} | {"target": TARGET_LIMIT}

_COLUMNS = tuple(c.name for c in events_table.columns if c.name != "id")

meta_table = Table(
    "gw_audit_meta", metadata,
    Column("key", String(100), primary_key=True),
    Column("value", String(200), nullable=False),
)


def normalize_url(url: str, base_dir: str | Path = ".") -> str:
    """Pick the async driver and resolve a relative SQLite path against ``base_dir``."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        return parsed.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)
    if backend == "sqlite":
        db = parsed.database or ""
        if db and db != ":memory:" and not Path(db).is_absolute():
            db = str((Path(base_dir) / db).resolve())
        return parsed.set(drivername="sqlite+aiosqlite", database=db).render_as_string(hide_password=False)
    raise ValueError(f"unsupported audit store {parsed.drivername!r} (use sqlite:/// or postgresql://)")


class AuditStore:
    def __init__(self, url: str, base_dir: str | Path = ".") -> None:
        self.url = normalize_url(url, base_dir)
        self.dialect = make_url(self.url).get_backend_name()
        # hide_parameters: a driver error's message never carries the rows (event contents).
        kwargs: dict[str, Any] = {"pool_pre_ping": True, "hide_parameters": True}
        if self.dialect == "postgresql":
            # A short connect timeout lets the writer notice a dead store quickly and spill.
            kwargs["connect_args"] = {"timeout": 5, "command_timeout": 30}
            kwargs["pool_size"] = 2
        self.engine: AsyncEngine = create_async_engine(self.url, **kwargs)
        self._schema_ready = False

    async def open(self) -> None:
        """Create or migrate the schema (idempotent; safe with several replicas starting)."""
        async with self.engine.begin() as conn:
            if self.dialect == "postgresql":
                # Serialise concurrent migrations from replicas starting together.
                await conn.execute(text("SELECT pg_advisory_xact_lock(7218041)"))
            await conn.run_sync(metadata.create_all, checkfirst=True)
            await conn.run_sync(_add_missing_columns)
            await conn.execute(_upsert(self.dialect, meta_table, update="value"),
                               [{"key": "schema_version", "value": str(SCHEMA_VERSION)}])
        self._schema_ready = True

    async def write(self, events: Sequence[dict[str, Any]]) -> None:
        """Insert a batch in one transaction; events already stored are skipped."""
        if not events:
            return
        if not self._schema_ready:
            await self.open()
        # Every row names every column: executemany compiles the INSERT for the first row's keys
        # and would silently drop a column only later rows set.
        rows = [{name: event.get(name) for name in _COLUMNS} for event in events]
        async with self.engine.begin() as conn:
            # executemany: SQLAlchemy batches it into multi-row INSERTs ("insertmanyvalues").
            await conn.execute(_upsert(self.dialect, events_table), rows)

    async def query(self, *, since: datetime | None = None, until: datetime | None = None,
                    principal: str | None = None, target: str | None = None,
                    outcome: str | None = None, method: str | None = None,
                    limit: int = 1000, newest_first: bool = False,
                    after_id: int | None = None) -> list[dict[str, Any]]:
        """Events matching every filter given, at most ``limit``: the oldest ones in time order,
        or with ``newest_first`` the newest ones, newest first. ``after_id`` keeps only rows
        inserted after the row with that ``id`` and orders them by ``id`` (how ``--follow`` tails)."""
        t = events_table.c
        if after_id is not None:
            stmt = select(events_table).where(t.id > after_id).order_by(t.id).limit(limit)
        elif newest_first:
            stmt = select(events_table).order_by(t.time.desc(), t.id.desc()).limit(limit)
        else:
            stmt = select(events_table).order_by(t.time, t.id).limit(limit)
        if since is not None:
            stmt = stmt.where(t.time >= since)
        if until is not None:
            stmt = stmt.where(t.time < until)
        if principal:
            stmt = stmt.where(t.principal == principal)
        if target:
            stmt = stmt.where(t.target.like(target.replace("*", "%"))) if "*" in target else \
                stmt.where(t.target == target)
        if outcome:
            stmt = stmt.where(t.outcome == outcome)
        if method:
            stmt = stmt.where(t.method == method)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        out = []
        for row in rows:
            item = dict(row)
            if isinstance(item.get("arguments"), str):
                item["arguments"] = json.loads(item["arguments"])
            tm = item.get("time")
            if isinstance(tm, datetime) and tm.tzinfo is None:
                item["time"] = tm.replace(tzinfo=UTC)
            out.append(item)
        return out

    async def prune(self, retention_days: int) -> int:
        """Delete events older than the retention period; returns how many."""
        cutoff = datetime.now(UTC) - timedelta(days=retention_days)
        async with self.engine.begin() as conn:
            result = await conn.execute(delete(events_table).where(events_table.c.time < cutoff))
        return int(result.rowcount or 0)

    async def close(self) -> None:
        await self.engine.dispose()


def _upsert(dialect: str, table: Table, update: str | None = None) -> Any:
    mod = postgresql if dialect == "postgresql" else sqlite
    stmt = mod.insert(table)
    key = [c.name for c in table.primary_key] if update else ["event_id"]
    if update:
        return stmt.on_conflict_do_update(index_elements=key, set_={update: getattr(stmt.excluded, update)})
    return stmt.on_conflict_do_nothing(index_elements=key)


def _add_missing_columns(sync_conn: Any) -> None:
    """Additive migration: columns added to :data:`events_table` since a table was created."""
    existing = {c["name"] for c in inspect(sync_conn).get_columns(events_table.name)}
    for column in events_table.columns:
        if column.name not in existing:
            ddl = column.type.compile(dialect=sync_conn.dialect)
            sync_conn.execute(text(f'ALTER TABLE {events_table.name} ADD COLUMN "{column.name}" {ddl}'))
