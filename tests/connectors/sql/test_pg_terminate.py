"""Backends terminated under a busy pool (issue 26, finding 8): a pooled connection whose backend
``pg_terminate_backend`` ended is discarded quietly, never reset while its protocol is still busy
(asyncpg's ``cannot switch to state 15; another operation (2) is in progress``), and later calls
succeed. Real PostgreSQL."""

from __future__ import annotations

import asyncio
import logging

import pytest

from gateway.protocol.errors import ToolExecutionError

from .helpers import admin_execute, asyncpg_url, make_ctx, pg_database, start_connector

SETUP = """
CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO items SELECT i, 'item ' || i FROM generate_series(1, 500) i;
"""
KILL = "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()"


async def test_terminated_backends_are_discarded_without_a_reset_race(
        pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with pg_database(pg_url, SETUP) as db:
        async with start_connector({"url": asyncpg_url(pg_url, db), "pool_size": 4,
                                    "connect_timeout_s": 5}) as (c, _events):
            stop = asyncio.Event()
            progressed = asyncio.Event()
            answered = 0

            async def caller(n: int) -> None:
                nonlocal answered
                while not stop.is_set():
                    sql = "SELECT id, name FROM items WHERE id > $1 ORDER BY id LIMIT 50" if n % 2 \
                        else "SELECT count(*), pg_sleep(0.002) FROM items"
                    args = {"sql": sql, "params": [n]} if n % 2 else {"sql": sql}
                    try:
                        await c.call_tool("query", args, make_ctx())
                        answered += 1
                        progressed.set()
                    except ToolExecutionError:
                        pass  # a statement the termination hit fails: that is allowed

            callers = [asyncio.create_task(caller(n)) for n in range(8)]
            try:
                killed = 0
                # Terminate the pool's backends again and again while statements run, the reset
                # (ROLLBACK + RESET) of released connections among them; between two rounds the
                # callers get a few calls through.
                for _ in range(25):
                    killed += (await admin_execute(pg_url, "postgres", KILL, db))[0][0]
                    target = answered + 4
                    async with asyncio.timeout(30):
                        while answered < target:
                            progressed.clear()
                            await progressed.wait()
                assert killed > 0
            finally:
                stop.set()
                await asyncio.wait_for(asyncio.gather(*callers), 30)
            # After the storm every call is answered.
            for _ in range(5):
                result = await c.call_tool("query", {"sql": "SELECT count(*) FROM items"}, make_ctx())
                assert result["structuredContent"]["rows"] == [[500]]
    # The reset never raises into the pool (which logs "Exception during reset or similar" with a
    # traceback): a dead connection is dropped with one debug line.
    bad = [r for r in caplog.records
           if "Exception during reset" in r.getMessage() or r.name.startswith("sqlalchemy") and r.levelno >= logging.ERROR
           or (r.exc_info is not None and r.levelno >= logging.INFO)]
    assert not bad, "\n".join(f"{r.name} {r.levelname}: {r.getMessage()}" for r in bad)
    assert "Traceback" not in caplog.text
