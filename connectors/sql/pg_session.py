"""PostgreSQL session hygiene: what a pooled connection may carry, what it may receive, and what
the connector's role may do.

* **Reset on release** (:func:`install_reset`). A SQLAlchemy pool ``reset`` event runs on every
  connection returned to the pool, whatever code path returns it, in one round trip: ``ROLLBACK``
  when a transaction is still open, then :data:`RESET_SQL` — release session advisory locks,
  deallocate the prepared statements created with SQL ``PREPARE`` (the driver's own, created by the
  protocol, are kept: asyncpg caches them, which is why this is not ``DISCARD ALL``), ``CLOSE ALL``,
  ``UNLISTEN *``, ``RESET ALL`` (the settings given at connect time, such as
  ``default_transaction_read_only``, are the session defaults it returns to). A connection that is
  closed, or whose reset fails (its backend was terminated), is aborted and its pool slot
  invalidated without any further I/O (:func:`_discard`), never reused. A read's ``ROLLBACK`` already undoes
  ``SET``, ``LISTEN`` and cursors; advisory locks and prepared statements outlive it, and a write
  (``allow_writes``) commits all of them: the reset covers both.
* **A byte meter on the socket** (:class:`WireMeter`). Sits between the transport and asyncpg's
  protocol and counts what the server sends while a statement runs; past its limit it aborts the
  connection, so a reply the byte budget's SQL wrappers cannot bound (``EXPLAIN`` of a folded
  constant, ``SHOW``, ``RETURNING``) never grows the process beyond the limit. The statement then
  fails with :class:`connectors.sql.errors.ResultTooLarge` and the connection is discarded.
* **Privileges** (:data:`PRIVILEGES_SQL`, :func:`privilege_findings`): what makes a role too
  powerful for the connector (see ``allow_privileged`` in the README).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import await_only

__all__ = ["install_reset", "RESET_SQL", "WireMeter", "meter_of", "PRIVILEGES_SQL",
           "privilege_findings", "DANGEROUS_ROLES"]

log = logging.getLogger(__name__)

RESET_SQL = (
    "DO $gw$ DECLARE r record; BEGIN PERFORM pg_advisory_unlock_all(); "
    "FOR r IN SELECT name FROM pg_prepared_statements WHERE from_sql LOOP "
    "EXECUTE format('DEALLOCATE %I', r.name); END LOOP; END $gw$; CLOSE ALL; UNLISTEN *; RESET ALL")


def install_reset(engine: AsyncEngine, reset_sql: str) -> None:
    """Reset every connection the pool gets back (create the engine with ``pool_reset_on_return=None``:
    this event is the reset)."""

    @event.listens_for(engine.sync_engine, "reset")
    def _reset(dbapi_connection: Any, connection_record: Any, reset_state: Any) -> None:
        if reset_state.terminate_only or not reset_state.asyncio_safe:
            return  # being discarded, or garbage-collected outside the loop: no I/O possible
        driver = dbapi_connection.driver_connection
        if driver is None:
            return
        if driver.is_closed():
            _discard(driver, connection_record, None)
            return
        sql = f"ROLLBACK; {reset_sql}" if driver.is_in_transaction() else reset_sql
        try:
            # Runs inside SQLAlchemy's greenlet (the async engine's checkin): await_only may wait here.
            await_only(driver.execute(sql))
        except Exception as exc:
            _discard(driver, connection_record, exc)


def _discard(driver: Any, connection_record: Any, exc: Exception | None) -> None:
    """Drop a connection the reset could not (or need not) talk to, quietly.

    A backend ended by ``pg_terminate_backend`` or a restart leaves asyncpg mid-way through its
    error handling for a while (the FATAL message read, the socket not yet closed): any statement
    then fails with ``cannot switch to state 15; another operation (2) is in progress``. Letting
    the reset raise would make the pool log ``Exception during reset or similar`` with a traceback
    and then try a graceful close on that same busy protocol; instead the socket is aborted with no
    I/O and the pool slot invalidated, so its next checkout connects afresh. A dead connection is
    expected under a terminated backend: one line at debug, no traceback."""
    driver.terminate()  # aborts the transport; no round trip on a protocol that is not idle
    connection_record.invalidate(exc)
    if exc is not None:
        log.debug("pooled connection discarded on reset: %s: %s", type(exc).__name__, exc)


class WireMeter(asyncio.Protocol):
    """Forwards a transport's events to the driver's protocol, counting received bytes while armed."""

    def __init__(self, inner: Any, transport: Any) -> None:
        self._inner = inner
        self._transport = transport
        self.limit: int | None = None
        self.received = 0
        self.tripped = False

    def arm(self, limit: int | None) -> None:
        self.limit, self.received, self.tripped = limit, 0, False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # pragma: no cover - installed late
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.limit is not None:
            self.received += len(data)
            if self.received > self.limit:
                if not self.tripped:
                    self.tripped = True
                    self._transport.abort()  # connection_lost follows; asyncpg fails the statement
                return
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        handler = getattr(self._inner, "eof_received", None)
        return handler() if handler is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


def meter_of(driver: Any, meters: Any) -> WireMeter | None:
    """The connection's meter, installed on first use (``meters``: a WeakKeyDictionary per backend).
    None when the transport cannot swap protocols (then only the SQL wrappers bound a reply)."""
    meter: WireMeter | None = meters.get(driver)
    if meter is None:
        transport = getattr(driver, "_transport", None)  # asyncpg keeps its transport here
        if transport is None or not hasattr(transport, "set_protocol"):
            return None
        meter = WireMeter(transport.get_protocol(), transport)
        transport.set_protocol(meter)
        meters[driver] = meter
    return meter


# Predefined roles whose members act outside any transaction: run programs and read or write files
# on the server (COPY … PROGRAM / TO file, pg_read_file, lo_import), write every table, signal
# other sessions, create subscriptions.
DANGEROUS_ROLES = ("pg_execute_server_program", "pg_read_server_files", "pg_write_server_files",
                   "pg_write_all_data", "pg_signal_backend", "pg_create_subscription")

# One round trip. ``roles``: every role the login role is a member of (itself included), i.e. what
# it can SET ROLE to; attributes and privileges are checked for all of them. ``writable``: up to 5
# relations (tables, views, foreign tables, sequences, materialized views) outside the system
# schemas that one of those roles owns or may INSERT/UPDATE/DELETE/TRUNCATE (tables) or
# UPDATE/USAGE (sequences: nextval/setval). ``creatable``: schemas where one may CREATE, and the
# database when one may create schemas in it.
PRIVILEGES_SQL = """
WITH me AS (SELECT oid, rolname, rolsuper, rolcreaterole FROM pg_roles
            WHERE pg_has_role(current_user, oid, 'MEMBER'))
SELECT
  (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS is_superuser,
  (SELECT coalesce(array_agg(rolname::text ORDER BY rolname) FILTER (WHERE rolsuper), '{}') FROM me) AS superusers,
  (SELECT coalesce(array_agg(rolname::text ORDER BY rolname) FILTER (WHERE rolcreaterole), '{}') FROM me) AS createrole,
  (SELECT coalesce(array_agg(rolname::text ORDER BY rolname), '{}') FROM me) AS member_of,
  ARRAY(SELECT format('%I.%I', n.nspname, c.relname)
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind IN ('r', 'p', 'v', 'f', 'm', 'S')
          AND n.nspname NOT IN ('pg_catalog', 'information_schema')
          AND n.nspname !~ '^pg_(toast|temp_|toast_temp_)'
          AND EXISTS (SELECT 1 FROM me WHERE me.oid = c.relowner
                      OR (c.relkind IN ('r', 'p', 'v', 'f')
                          AND has_table_privilege(me.oid, c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE'))
                      OR (c.relkind = 'S' AND has_sequence_privilege(me.oid, c.oid, 'UPDATE, USAGE')))
        ORDER BY 1 LIMIT 5) AS writable,
  ARRAY(SELECT format('schema %I', n.nspname) FROM pg_namespace n
        WHERE n.nspname !~ '^pg_(toast|temp_|toast_temp_)'
          AND EXISTS (SELECT 1 FROM me WHERE has_schema_privilege(me.oid, n.oid, 'CREATE'))
        ORDER BY 1 LIMIT 5)
  || CASE WHEN EXISTS (SELECT 1 FROM me WHERE has_database_privilege(me.oid, current_database(), 'CREATE'))
          THEN ARRAY[format('database %I', current_database())] ELSE '{}' END AS creatable
"""


def privilege_findings(row: Mapping[str, Any], allow_writes: bool) -> list[str]:
    """Why the role is too powerful for a connector without ``allow_privileged`` (empty: it is not).
    A superuser, CREATEROLE or a dangerous predefined role always counts; write privileges count
    when the connector is read-only."""
    if row["is_superuser"]:
        return ["superuser"]  # may do everything below and more
    found: list[str] = []
    supers: Sequence[str] = row["superusers"]
    if supers:
        found.append(f"member of superuser role {', '.join(supers)}")
    if row["createrole"]:
        found.append(f"CREATEROLE ({', '.join(row['createrole'])})")
    dangerous = [r for r in DANGEROUS_ROLES if r in row["member_of"]]
    if dangerous:
        found.append(f"member of {', '.join(dangerous)}")
    if not allow_writes:
        if row["writable"]:
            found.append(f"can write to {', '.join(row['writable'])}"
                         f"{' …' if len(row['writable']) >= 5 else ''} (owner, or INSERT/UPDATE/DELETE/TRUNCATE "
                         "or sequence USAGE/UPDATE granted)")
        if row["creatable"]:
            found.append(f"can CREATE in {', '.join(row['creatable'])}")
    return found
