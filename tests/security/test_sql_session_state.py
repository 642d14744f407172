"""Issue 14, row 5: session state leaked through the pool.

Attacks: a session-level ``pg_advisory_lock`` taken in a ``query`` call outlived its ROLLBACK and
stayed held on the pooled connection (blocking every other client of that lock); so did
``PREPARE``d statements, and — through ``execute`` on a connector with ``allow_writes`` — ``LISTEN``,
``SET`` and ``WITH HOLD`` cursors, which a commit keeps. Now every connection returned to the pool
is reset (a SQLAlchemy pool ``reset`` event), and read-only connectors refuse these statements
before they run. Each test uses a pool of one connection, so the next call provably runs on the
connection the attack used.
"""

from __future__ import annotations

import asyncio

import pytest

import connectors.sql.connector as connector_module
from gateway.protocol.errors import ToolExecutionError
from tests.connectors.sql.helpers import admin_execute, make_ctx, pg_database, server_poll, start_connector

from .support import SETUP, loop_probe, pg_role, probing, role_url

ADVISORY = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND granted"
STATE = """SELECT (SELECT count(*) FROM pg_prepared_statements WHERE from_sql) AS prepared,
                  (SELECT count(*) FROM pg_listening_channels()) AS listening,
                  (SELECT count(*) FROM pg_cursors WHERE name <> '') AS cursors,
                  current_setting('search_path') AS search_path,
                  current_setting('statement_timeout') AS statement_timeout,
                  current_setting('default_transaction_read_only') AS read_only"""


async def _state(c: connector_module.SQLConnector) -> list[object]:
    result = await c.call_tool("query", {"sql": STATE}, make_ctx())
    row: list[object] = result["structuredContent"]["rows"][0]
    return row


async def test_read_only_connectors_refuse_session_state_and_the_pool_resets_what_gets_through(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with pg_database(pg_url, SETUP) as db, pg_role(pg_url, db) as role, \
            start_connector({"url": role_url(pg_url, db, role), "pool_size": 1, "allow_privileged": False}) as (c, _):
        clean = await _state(c)
        assert clean[:4] == [0, 0, 0, '"$user", public'] and clean[5] == "on"
        for sql in ("SELECT pg_advisory_lock(4242)", "PREPARE leak AS SELECT 1", "LISTEN leak",
                    "DECLARE leak CURSOR WITH HOLD FOR SELECT 1", "SET search_path = nowhere"):
            with pytest.raises(ToolExecutionError, match="Refused") as info:
                await c.call_tool("query", {"sql": sql}, make_ctx())
            assert info.value.status in ("refused_statement", "refused_function")

        # The guard is a seatbelt: switched off, each statement runs — and leaves nothing behind.
        monkeypatch.setattr(connector_module, "check_read_statement", lambda sql, dialect: None)
        async with probing(loop_probe) as probe:
            for sql in ("SELECT pg_advisory_lock(4242)", "SELECT pg_advisory_lock_shared(4243)",
                        "PREPARE leak AS SELECT 1", "LISTEN leak", "DECLARE leak CURSOR WITH HOLD FOR SELECT 1",
                        "SELECT set_config('search_path', 'nowhere', false)", "SET statement_timeout = 1"):
                await c.call_tool("query", {"sql": sql}, make_ctx())
                assert await _state(c) == clean, sql
        assert probe.worst < 0.1
        for key in (4242, 4243):
            await server_poll(pg_url, ADVISORY, key, until=lambda rows: rows[0][0] == 0)


async def test_writes_commit_session_state_and_the_pool_resets_it(pg_url: str) -> None:
    grants = "GRANT INSERT, UPDATE ON customers TO {role}; GRANT USAGE ON SEQUENCE customers_id_seq TO {role}"
    async with pg_database(pg_url, SETUP) as db, pg_role(pg_url, db, grants) as role, \
            start_connector({"url": role_url(pg_url, db, role), "pool_size": 1, "allow_writes": True,
                             "allow_privileged": False}) as (c, _):
        clean = await _state(c)
        assert clean[5] == "off"  # a writer's sessions are not read-only by default
        for sql in ("PREPARE leak AS SELECT 1", "LISTEN leak", "SET search_path = nowhere",
                    "SET statement_timeout = 1", "DECLARE leak CURSOR WITH HOLD FOR SELECT 1",
                    "SELECT pg_advisory_lock(4244)"):
            await c.call_tool("execute", {"sql": sql}, make_ctx())
            assert await _state(c) == clean, sql
        await server_poll(pg_url, ADVISORY, 4244, until=lambda rows: rows[0][0] == 0)
        # And the write itself was committed.
        await c.call_tool("execute", {"sql": "INSERT INTO customers (name, region) VALUES ('new', 'emea')"},
                          make_ctx())
        assert (await admin_execute(pg_url, db, "SELECT count(*) FROM customers"))[0][0] == 301


async def test_a_lock_taken_by_an_attacker_does_not_block_other_callers(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the reset, the lock stayed held by the idle pooled connection, and every other
    client waiting on it (here: the admin) blocked until the gateway restarted."""
    monkeypatch.setattr(connector_module, "check_read_statement", lambda sql, dialect: None)
    async with pg_database(pg_url, SETUP) as db, pg_role(pg_url, db) as role, \
            start_connector({"url": role_url(pg_url, db, role), "pool_size": 2, "allow_privileged": False}) as (c, _):
        attack = asyncio.create_task(
            c.call_tool("query", {"sql": "SELECT pg_advisory_lock(4245), pg_sleep(0.5)"}, make_ctx()))
        await server_poll(pg_url, ADVISORY, 4245, until=lambda rows: rows[0][0] == 1)
        # Meanwhile the other pooled connection serves other callers at once.
        async with probing(lambda: c.call_tool("query", {"sql": "SELECT 1"}, make_ctx())) as probe:
            await attack
        assert len(probe.samples) >= 5 and probe.worst < 0.1
        # Once the call is over, another session gets the lock without waiting.
        got = await admin_execute(pg_url, db, "SELECT set_config('lock_timeout', '2s', false), pg_advisory_lock(4245)")
        assert len(got) == 1
