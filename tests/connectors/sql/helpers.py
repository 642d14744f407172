"""Test helpers for the SQL connector: a recording events sink, a dummy session, a CallContext
factory, and throwaway PostgreSQL databases (``gw_sql_test_*``) created and dropped per test."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg

from connectors.base import Health
from connectors.sql.config import SQLConfig
from connectors.sql.connector import SQLConnector
from gateway.context import CallContext

__all__ = ["RecordingEvents", "DummySession", "make_ctx", "pg_database", "start_connector", "asyncpg_url",
           "admin_execute", "admin_script", "libpq_url", "server_poll"]


class RecordingEvents:
    """ConnectorEvents that records every call and lets a test wait for one."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self._changed = asyncio.Condition()

    def _record(self, kind: str, value: Any) -> None:
        self.calls.append((kind, value))

        async def notify() -> None:
            async with self._changed:
                self._changed.notify_all()

        asyncio.get_running_loop().create_task(notify())

    def components_changed(self) -> None:
        self._record("components_changed", None)

    def resource_updated(self, uri: str) -> None:
        self._record("resource_updated", uri)

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        self._record("log", (level, data, logger))

    def health_changed(self, health: Health) -> None:
        self._record("health_changed", health)

    def mark(self) -> int:
        """An index to pass as ``since``: only later calls will satisfy a wait."""
        return len(self.calls)

    async def wait_for(self, predicate: Any, timeout: float = 10.0, since: int = 0) -> None:
        async def check() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: any(predicate(k, v) for k, v in self.calls[since:]))

        await asyncio.wait_for(check(), timeout)


class DummySession:
    id = "test-session"
    transport = "test"
    protocol_version = "2025-11-25"
    client_info: dict[str, Any] = {"name": "test"}
    client_capabilities: dict[str, Any] = {}

    async def notify(self, method: str, params: dict[str, Any] | None = None,
                     related_request_id: str | int | None = None) -> None:
        return None

    async def request(self, method: str, params: dict[str, Any] | None = None,
                      related_request_id: str | int | None = None, timeout: float | None = None) -> dict[str, Any]:
        return {}


def make_ctx(method: str = "tools/call", params: dict[str, Any] | None = None) -> CallContext:
    return CallContext(session=DummySession(), method=method, request_id=1, params=params or {})


def asyncpg_url(pg_url: str, database: str, password: str | None = None) -> str:
    """The SQLAlchemy URL of ``database`` on the test server (optionally with a password)."""
    from sqlalchemy.engine import make_url

    url = make_url(pg_url).set(drivername="postgresql+asyncpg", database=database)
    if password is not None:
        url = url.set(password=password)
    return url.render_as_string(hide_password=False)


def libpq_url(pg_url: str, database: str | None = None) -> str:
    from sqlalchemy.engine import make_url

    url = make_url(pg_url).set(drivername="postgresql")
    if database:
        url = url.set(database=database)
    return url.render_as_string(hide_password=False)


@asynccontextmanager
async def pg_database(pg_url: str, setup_sql: str = "") -> AsyncIterator[str]:
    """A fresh database ``gw_sql_test_<hex>``; yields its name, drops it (FORCE) afterwards."""
    name = f"gw_sql_test_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(libpq_url(pg_url))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        if setup_sql:
            conn = await asyncpg.connect(libpq_url(pg_url, name))
            try:
                await conn.execute(setup_sql)
            finally:
                await conn.close()
        yield name
    finally:
        for leftover in (name, f"{name}_next"):  # _next: a test's stand-in being built
            await admin.execute(f'DROP DATABASE IF EXISTS "{leftover}" WITH (FORCE)')
        await admin.close()


async def admin_execute(pg_url: str, database: str, sql: str, *args: Any) -> Any:
    conn = await asyncpg.connect(libpq_url(pg_url, database))
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


@asynccontextmanager
async def start_connector(raw: dict[str, Any], base_dir: Path = Path(".")) -> AsyncIterator[tuple[SQLConnector, RecordingEvents]]:
    """Start a connector (``name: db``). On PostgreSQL the tests connect as the server's superuser,
    so ``allow_privileged`` defaults to true here; tests/security checks the refusal itself."""
    if str(raw.get("url", "")).startswith("postgresql"):
        raw = {"allow_privileged": True, **raw}
    config = SQLConfig.model_validate({"name": "db", "type": "sql", **raw})
    connector = SQLConnector(config, base_dir)
    events = RecordingEvents()
    await connector.start(events)
    try:
        yield connector, events
    finally:
        await connector.stop()


async def admin_script(pg_url: str, database: str, sql: str) -> None:
    """Run several statements (simple protocol) as the admin user."""
    conn = await asyncpg.connect(libpq_url(pg_url, database))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def server_poll(pg_url: str, sql: str, *args: Any, until: Any, timeout: float = 10.0) -> Any:
    """Re-run an admin query until ``until(rows)`` holds: server state (pg_stat_activity) has no
    event a test could wait on, so this polls it, bounded by ``timeout``."""
    async with asyncio.timeout(timeout):
        while not until(rows := await admin_execute(pg_url, "postgres", sql, *args)):  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    return rows
