"""Which :class:`~connectors.sql.engine.Backend` serves a dialect.

Apart from :mod:`connectors.sql.engine` so that the backends can import the engine's types while
the engine imports no backend; each backend is imported only when its dialect is configured, so a
SQLite-only gateway never imports asyncpg.
"""

from __future__ import annotations

from pathlib import Path

from .engine import Backend

__all__ = ["make_backend"]


def make_backend(dialect: str, url: str, pool_size: int, connect_timeout_s: float, allow_writes: bool,
                 app_name: str, base_dir: Path, max_bytes: int = 0) -> Backend:
    if dialect == "postgresql":
        from .pg_backend import PostgresBackend

        return PostgresBackend(url, pool_size, connect_timeout_s, allow_writes, app_name, max_bytes)
    from .sqlite_backend import SQLiteBackend

    return SQLiteBackend(url, pool_size, connect_timeout_s, allow_writes, app_name, base_dir, max_bytes)
