"""The PostgreSQL byte budget's I/O paths that the attack suite does not reach: a statement the
server will not wrap, and the socket meter on its own."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

import connectors.sql.pg_backend as pg_backend
from gateway.protocol.errors import ToolExecutionError

from .helpers import asyncpg_url, make_ctx, pg_database, start_connector


async def test_a_statement_the_server_will_not_wrap_runs_as_sent(pg_url: str, monkeypatch: pytest.MonkeyPatch,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    real = pg_backend.plan_wrappers

    def broken(*args: object, **kwargs: object) -> pg_backend.WrapPlan:
        return replace(real(*args, **kwargs), fast_sql="SELECT FROM WHERE")

    monkeypatch.setattr(pg_backend, "plan_wrappers", broken)
    caplog.set_level(logging.INFO)
    async with pg_database(pg_url) as db, start_connector({"url": asyncpg_url(pg_url, db), "max_bytes": 4096}) as (c, _):
        for _ in range(2):  # the second time from the list of statements not to wrap
            page = (await c.call_tool("query", {"sql": "SELECT i, 'x' FROM generate_series(1, 3) i"},
                                      make_ctx()))["structuredContent"]
            assert page["rows"] == [[1, "x"], [2, "x"], [3, "x"]]
        assert caplog.text.count("could not be wrapped") == 1
        # Unwrapped, the meter still bounds the reply (2 x 4 KiB + framing + 1 MiB).
        with pytest.raises(ToolExecutionError, match="max_bytes = 4096") as info:
            await c.call_tool("query", {"sql": "SELECT repeat('x', 3000000)"}, make_ctx())
        assert info.value.status == "max_bytes"
        assert (await c.call_tool("query", {"sql": "SELECT 1"}, make_ctx()))["structuredContent"]["rows"] == [[1]]


async def test_writes_over_the_meter_are_rolled_back(pg_url: str) -> None:
    async with pg_database(pg_url, "CREATE TABLE t (id int, body text)") as db, \
            start_connector({"url": asyncpg_url(pg_url, db), "allow_writes": True, "max_bytes": 4096}) as (c, _):
        with pytest.raises(ToolExecutionError, match="max_bytes"):
            await c.call_tool("execute", {"sql": "INSERT INTO t SELECT i, repeat('x', 100000) FROM "
                                                 "generate_series(1, 30) i RETURNING *"}, make_ctx())
        count = await c.call_tool("query", {"sql": "SELECT count(*) FROM t"}, make_ctx())
        assert count["structuredContent"]["rows"] == [[0]]
        done = await c.call_tool("execute", {"sql": "INSERT INTO t VALUES (1, 'a') RETURNING id"}, make_ctx())
        assert done["structuredContent"]["rowcount"] == 1
