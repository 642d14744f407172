"""Issue 14, row 4: a superuser SQL connector escaped read-only.

Attacks: as a superuser, ``COPY … TO PROGRAM`` ran a shell command on the database host,
``pg_read_file`` read server files, ``dblink_exec`` committed a write; the gateway only warned.
Now a privileged role (superuser, CREATEROLE, a dangerous predefined role, or — without
``allow_writes`` — any write privilege) refuses to start unless ``allow_privileged: true``, with an
error naming that key; and with it, the functions and statements that act outside the read-only
transaction are refused before they reach the server (the effects are checked on the server).
"""

from __future__ import annotations

import json
import secrets

import asyncpg
import pytest

import connectors.sql.connector as connector_module
from gateway.protocol.errors import ConfigError, ToolExecutionError
from tests.connectors.sql.helpers import (
    admin_execute,
    asyncpg_url,
    libpq_url,
    make_ctx,
    pg_database,
    start_connector,
)
from tests.support import running_gateway

from .support import SETUP, loop_probe, pg_role, probing, role_url

# The SQL tests' start_connector accepts privileged roles unless told otherwise: here it is told.
REFUSE = {"allow_privileged": False}

WITH_DBLINK = SETUP + "CREATE EXTENSION dblink;"


async def test_a_superuser_connector_refuses_to_start_and_names_allow_privileged(pg_url: str) -> None:
    async with pg_database(pg_url, SETUP) as db:
        url = asyncpg_url(pg_url, db)  # the server's own superuser
        with pytest.raises(ConfigError, match="allow_privileged") as info:
            async with start_connector({"url": url, "allow_privileged": False}):
                pass
        assert "superuser" in info.value.message and info.value.path == "connectors[db].allow_privileged"
        config = f"""
            audit: {{enabled: false}}
            connectors:
              - {{name: shop, type: sql, url: {json.dumps(url)}}}
              - {{name: demo, type: static, prompts: [{{name: hello, messages: [{{text: hi}}]}}]}}
            """
        async with running_gateway(config) as gw:  # the gateway runs; only that connector is refused
            assert "shop" not in gw.connectors and "allow_privileged" in gw.failed["shop"]
            assert "demo" in gw.connectors


@pytest.mark.parametrize(("grants", "attributes", "finding", "allowed_with_writes"), [
    ("GRANT INSERT ON customers TO {role}", "", "can write to public.customers", True),
    ("ALTER TABLE docs OWNER TO {role}", "", "can write to public.docs", True),
    ("GRANT USAGE ON SEQUENCE customers_id_seq TO {role}", "", "public.customers_id_seq", True),
    ("GRANT CREATE ON SCHEMA public TO {role}", "", "can CREATE in schema public", True),
    ("GRANT pg_write_all_data TO {role}", "", "member of pg_write_all_data", False),
    ("GRANT pg_read_server_files TO {role}", "", "member of pg_read_server_files", False),
    ("GRANT pg_execute_server_program TO {role}", "", "member of pg_execute_server_program", False),
    ("", "CREATEROLE", "CREATEROLE", False),
])
async def test_roles_that_can_write_or_act_outside_transactions_are_refused(
        pg_url: str, grants: str, attributes: str, finding: str, allowed_with_writes: bool) -> None:
    async with pg_database(pg_url, SETUP) as db:
        async with pg_role(pg_url, db) as plain:  # the control: a reader starts
            async with start_connector({"url": role_url(pg_url, db, plain), **REFUSE}) as (c, _):
                assert c.health().up
        async with pg_role(pg_url, db, grants, attributes=attributes) as role:
            url = role_url(pg_url, db, role)
            with pytest.raises(ConfigError, match="allow_privileged") as info:
                async with start_connector({"url": url, **REFUSE}):
                    pass
            assert finding in info.value.message, info.value.message
            if allowed_with_writes:  # write privileges are what allow_writes is for
                async with start_connector({"url": url, "allow_writes": True, **REFUSE}) as (c, _):
                    assert c.health().up
            else:
                with pytest.raises(ConfigError, match="allow_privileged"):
                    async with start_connector({"url": url, "allow_writes": True, **REFUSE}):
                        pass
            async with start_connector({"url": url, "allow_privileged": True}) as (c, _):
                assert c.health().up


async def test_privileges_gained_while_running_take_the_connector_down(pg_url: str) -> None:
    async with pg_database(pg_url, SETUP) as db, pg_role(pg_url, db) as role, \
            start_connector({"url": role_url(pg_url, db, role), "refresh_s": 0, **REFUSE}) as (c, events):
        assert (await c.call_tool("query", {"sql": "SELECT 1"}, make_ctx()))["structuredContent"]["rows"] == [[1]]
        await admin_execute(pg_url, db, f'GRANT DELETE ON customers TO "{role}"')
        with pytest.raises(ToolExecutionError, match="allow_privileged") as info:
            await c.call_tool("list_tables", {"refresh": True}, make_ctx())
        assert info.value.status == "privileged" and not c.health().up
        with pytest.raises(ToolExecutionError, match="allow_privileged"):
            await c.call_tool("query", {"sql": "SELECT 1"}, make_ctx())
        mark = events.mark()
        await admin_execute(pg_url, db, f'REVOKE DELETE ON customers FROM "{role}"')
        # The monitor probes while down and brings it back once the role is fixed.
        await events.wait_for(lambda kind, h: kind == "health_changed" and h.up, timeout=15, since=mark)
        assert (await c.call_tool("query", {"sql": "SELECT 1"}, make_ctx()))["structuredContent"]["rows"] == [[1]]


async def _effects(pg_url: str, db: str, marker: str) -> dict[str, object]:
    """What the attacks below would have changed, read as the admin."""
    rows = await admin_execute(pg_url, db, """
        SELECT (SELECT count(*) FROM customers) AS customers,
               (SELECT count(*) FROM pg_largeobject_metadata) AS large_objects,
               (pg_stat_file($1, true)).size IS NOT NULL AS marker_exists,
               (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory') AS advisory_locks""", marker)
    return dict(rows[0])


async def test_with_allow_privileged_a_superuser_still_cannot_act_outside_the_read_only_transaction(pg_url: str) -> None:
    marker = f"/tmp/gw_sec_{secrets.token_hex(6)}"
    async with pg_database(pg_url, WITH_DBLINK) as db:
        admin = await asyncpg.connect(libpq_url(pg_url, db))
        try:
            # The control: these effects are observable (the admin can run a program on the server).
            await admin.execute(f"COPY (SELECT 1) TO PROGRAM 'touch {marker}'")
            assert (await _effects(pg_url, db, marker))["marker_exists"] is True
            await admin.execute(f"COPY (SELECT 1) TO PROGRAM 'rm -f {marker}'")
            before = await _effects(pg_url, db, marker)
            assert before == {"customers": 300, "large_objects": 0, "marker_exists": False, "advisory_locks": 0}

            dsn = f"dbname={db} user=postgres host=127.0.0.1"
            attacks = [
                f"COPY (SELECT 1) TO PROGRAM 'touch {marker}'",
                f"COPY customers TO '{marker}'",
                "SELECT pg_read_file('/etc/passwd')",
                "SELECT pg_catalog.pg_read_binary_file('/etc/passwd')",
                "SELECT * FROM pg_ls_dir('/')",
                "SELECT lo_import('/etc/passwd')",
                f"SELECT lo_export(1, '{marker}')",
                f"SELECT dblink_exec('{dsn}', 'INSERT INTO customers (name, region) VALUES (''x'', ''emea'')')",
                f"SELECT * FROM public.\"dblink\"('{dsn}', 'SELECT 1') AS t(x int)",
                f"SELECT dblink_connect('pwn', '{dsn}')",
                "SELECT query_to_xml('SELECT pg_read_file(''/etc/passwd'')', true, false, '')",
                "SELECT pg_advisory_lock(4242)",
                "EXPLAIN ANALYZE SELECT pg_try_advisory_lock(4242)",
                f"SELECT pg_terminate_backend({admin.get_server_pid()})",
                f"DO $$ BEGIN EXECUTE 'COPY (SELECT 1) TO PROGRAM ''touch {marker}'''; END $$",
                "SET ROLE postgres",
                f"SELECT U&\"d\\0062link_exec\"('{dsn}', 'DELETE FROM customers')",
            ]
            async with start_connector({"url": asyncpg_url(pg_url, db), "allow_privileged": True}) as (c, _):
                async with probing(loop_probe) as probe:
                    for sql in attacks:
                        with pytest.raises(ToolExecutionError, match="Refused") as info:
                            await c.call_tool("query", {"sql": sql}, make_ctx())
                        assert info.value.status in ("refused_statement", "refused_function"), (sql, info.value)
                        with pytest.raises(ToolExecutionError, match="Refused"):
                            await c.call_tool("explain", {"sql": sql}, make_ctx())
                assert probe.worst_cpu < 0.1, f"the event loop worked {probe.worst_cpu * 1000:.0f} ms in one span"
                # Reads still work, and the connection the admin holds was not terminated.
                ok = await c.call_tool("query", {"sql": "SELECT count(*) FROM customers"}, make_ctx())
                assert ok["structuredContent"]["rows"] == [[300]]
            assert await admin.fetchval("SELECT 1") == 1
            assert await _effects(pg_url, db, marker) == before
        finally:
            await admin.close()


async def test_a_least_privilege_role_is_refused_by_the_database_even_without_the_guard(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Defence in depth: with the statement guard switched off, the role's privileges refuse the
    same attacks (SQLSTATE 42501 insufficient privilege, or dblink's password requirement)."""
    monkeypatch.setattr(connector_module, "check_read_statement", lambda sql, dialect: None)
    marker = f"/tmp/gw_sec_{secrets.token_hex(6)}"
    async with pg_database(pg_url, WITH_DBLINK) as db, pg_role(pg_url, db) as role, \
            start_connector({"url": role_url(pg_url, db, role), **REFUSE}) as (c, _):
        before = await _effects(pg_url, db, marker)
        dsn = f"dbname={db} user=postgres host=127.0.0.1"
        for sql in (f"COPY (SELECT 1) TO PROGRAM 'touch {marker}'", "SELECT pg_read_file('/etc/passwd')",
                    "SELECT lo_import('/etc/passwd')", "SELECT * FROM pg_ls_dir('/')",
                    f"SELECT dblink_exec('{dsn}', 'DELETE FROM customers')"):
            with pytest.raises(ToolExecutionError) as info:
                await c.call_tool("query", {"sql": sql}, make_ctx())
            assert info.value.status in ("42501", "2F003", "25006"), (sql, info.value.status, info.value.message)
        assert await _effects(pg_url, db, marker) == before
