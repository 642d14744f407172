"""The SQL connector's one exception edge, against a backend that raises what the drivers raise.

Each surface keeps its contract: a tool's statement fails as ToolExecutionError (isError) with the
SQLSTATE or tag as status, a row read as a JSON-RPC error, completion offers nothing; messages are
redacted and raised ``from None``; a connectivity failure marks the connector down everywhere.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from typing import Any

import pytest

from connectors.sql import connector as sql_connector
from connectors.sql import schema as sch
from connectors.sql.config import SQLConfig
from connectors.sql.connector import SQLConnector
from connectors.sql.engine import Page
from gateway.protocol.errors import (
    BackendUnavailable,
    InternalError,
    InvalidParams,
    ToolExecutionError,
)

from .helpers import RecordingEvents, make_ctx

PASSWORD = "s3cr3t-pw"
URL = f"postgresql+asyncpg://app:{PASSWORD}@db.invalid:5432/shop"
TABLE = sch.Table("public", "customers", "table", (sch.Column("id", "integer"),), primary_key=("id",))


class PgError(Exception):
    """Shaped like asyncpg's errors: a SQLSTATE and a message."""

    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message


class FakeBackend:
    """Raises ``self.error`` from every statement (when set), like a driver would."""

    dialect = "postgresql"
    default_schemas = ("public",)

    def __init__(self) -> None:
        self.error: BaseException | None = None
        self.disposed = False

    def _check(self) -> None:
        if self.error is not None:
            raise self.error

    async def read_page(self, sql: str, args: Sequence[Any], offset: int, limit: int, timeout_s: float) -> Page:
        self._check()
        return Page(["id"], [(1,)], False)

    async def explain(self, sql: str, args: Sequence[Any], analyze: bool, timeout_s: float) -> str:
        self._check()
        return "Seq Scan"

    async def write(self, sql: str, args: Sequence[Any], limit: int, timeout_s: float) -> Any:
        self._check()
        raise AssertionError("not reached in these tests")

    async def introspect(self, schemas: Sequence[str], timeout_s: float) -> tuple[sch.Snapshot, dict[str, Any]]:
        self._check()
        return sch.Snapshot.of("postgresql", [TABLE]), {}

    def row_sql(self, table: sch.Table, key_columns: Sequence[str]) -> str:
        return "SELECT * FROM customers WHERE id = $1"

    async def dispose(self) -> None:
        self.disposed = True


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> FakeBackend:
    fake = FakeBackend()
    monkeypatch.setattr(sql_connector, "make_backend", lambda *args: fake)
    return fake


def make() -> SQLConnector:
    return SQLConnector(SQLConfig.model_validate({"name": "db", "type": "sql", "url": URL,
                                                  "statement_timeout_s": 7}))


async def test_a_tool_statement_fails_as_a_redacted_tool_error(backend: FakeBackend) -> None:
    c = make()
    await c.start(RecordingEvents())
    try:
        backend.error = PgError("42P01", f'relation "nope" does not exist (password={PASSWORD})')
        ctx = make_ctx()
        with pytest.raises(ToolExecutionError) as err:
            await c.call_tool("query", {"sql": "SELECT * FROM nope"}, ctx)
        assert err.value.message == 'SQL error [42P01]: relation "nope" does not exist (password=***)'
        assert err.value.status == "42P01" and ctx.record.backend_status == "42P01"
        assert err.value.__cause__ is None and err.value.__suppress_context__
        assert c.health().up  # a bad statement is not an outage

        backend.error = PgError("57014", "canceling statement due to statement timeout")
        with pytest.raises(ToolExecutionError, match="exceeded the statement timeout of 7s") as err:
            await c.call_tool("explain", {"sql": "SELECT 1"}, make_ctx())
        assert err.value.status == "57014"
    finally:
        await c.stop()


async def test_a_lost_database_marks_the_connector_down_and_wakes_the_monitor(backend: FakeBackend) -> None:
    c = make()
    events = RecordingEvents()
    await c.start(events)
    try:
        backend.error = ConnectionRefusedError(f"connect to app:{PASSWORD}@db.invalid refused")
        ctx = make_ctx()
        with pytest.raises(ToolExecutionError) as err:
            await c.call_tool("list_tables", {"refresh": True}, ctx)
        assert err.value.status == "unavailable" and ctx.record.backend_status == "unavailable"
        assert err.value.message.startswith("Database unavailable: ") and PASSWORD not in err.value.message
        assert not c.health().up and PASSWORD not in c.health().detail
        backend.error = None
        # The monitor reconnects without a restart.
        await events.wait_for(lambda kind, h: kind == "health_changed" and h.up, timeout=5)
        assert c.health().up
    finally:
        await c.stop()


async def test_a_row_read_fails_as_a_protocol_error(backend: FakeBackend) -> None:
    c = make()
    await c.start(RecordingEvents())
    uri = "sql://db/public/customers/row/abc"
    try:
        backend.error = PgError("22P02", 'invalid input syntax for type integer: "abc"')
        with pytest.raises(InvalidParams, match=r"SQL error \[22P02\]"):
            await c.read_resource(uri, make_ctx("resources/read"))
        backend.error = PgError("57014", "canceling statement due to statement timeout")
        with pytest.raises(InternalError, match="statement timeout"):
            await c.read_resource(uri, make_ctx("resources/read"))
        backend.error = OSError(f"network unreachable ({PASSWORD})")
        with pytest.raises(BackendUnavailable) as err:
            await c.read_resource(uri, make_ctx("resources/read"))
        assert "***" in err.value.message and PASSWORD not in err.value.message
        assert err.value.__suppress_context__
        assert not c.health().up
    finally:
        await c.stop()


async def test_completion_is_best_effort(backend: FakeBackend) -> None:
    c = make()
    await c.start(RecordingEvents())
    try:
        backend.error = sqlite3.OperationalError("disk I/O error")
        ref = {"type": "ref/resource", "uri": sch.row_uri_template("db")}
        argument = {"name": "key", "value": "1"}
        ctx = make_ctx("completion/complete", {"context": {"arguments": {"schema": "public", "table": "customers"}}})
        assert await c.complete(ref, argument, ctx) == {"completion": {"values": [], "hasMore": False}}
        assert not c.health().up  # still counts as an outage
    finally:
        await c.stop()


async def test_cancellation_is_never_classified(backend: FakeBackend) -> None:
    c = make()
    await c.start(RecordingEvents())
    try:
        backend.error = asyncio.CancelledError()
        with pytest.raises(asyncio.CancelledError):
            await c.call_tool("query", {"sql": "SELECT 1"}, make_ctx())
        assert c.health().up
    finally:
        await c.stop()


async def test_start_comes_up_down_when_unreachable_and_fails_on_anything_else(backend: FakeBackend) -> None:
    backend.error = ConnectionRefusedError(f"refused ({PASSWORD})")
    c = make()
    await c.start(RecordingEvents())
    try:
        assert not c.health().up and PASSWORD not in c.health().detail
        assert not backend.disposed
    finally:
        await c.stop()

    backend.disposed = False
    backend.error = PgError("42501", f"permission denied for schema public ({PASSWORD})")
    with pytest.raises(InternalError) as err:
        await make().start(RecordingEvents())
    assert err.value.message == "SQL error [42501]: permission denied for schema public (***)"
    assert err.value.__suppress_context__ and backend.disposed
