"""Throw-away PostgreSQL databases for audit tests, and a switch that takes one "down".

"Down" is ``ALLOW_CONNECTIONS false`` plus terminating its sessions: new connections are refused
exactly as if the server were gone, while the shared server keeps serving everyone else.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from sqlalchemy.engine import make_url

__all__ = ["ScratchDatabase", "scratch_database"]


class ScratchDatabase:
    def __init__(self, admin_url: str, name: str) -> None:
        self.admin_url = admin_url
        self.name = name
        self.url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)

    async def _admin(self, *statements: str) -> None:
        conn = await asyncpg.connect(self.admin_url)
        try:
            for sql in statements:
                await conn.execute(sql)
        finally:
            await conn.close()

    async def go_down(self) -> None:
        await self._admin(
            f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false',
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{self.name}'")

    async def come_back(self) -> None:
        await self._admin(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true')

    async def fetch(self, sql: str) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.url)
        try:
            return list(await conn.fetch(sql))
        finally:
            await conn.close()


@asynccontextmanager
async def scratch_database(pg_url: str) -> AsyncIterator[ScratchDatabase]:
    db = ScratchDatabase(pg_url, f"gw_audit_test_{uuid.uuid4().hex[:12]}")
    await db._admin(f'CREATE DATABASE "{db.name}"')
    try:
        yield db
    finally:
        await db._admin(f'DROP DATABASE IF EXISTS "{db.name}" WITH (FORCE)')
