"""Shared pieces of the attack suite: PostgreSQL roles made for one test and dropped after, a
gateway probe that times a trivial request (or coroutine) all through an attack, and the memory of
a gateway process.

A missing PostgreSQL is a failure here, like everywhere in the suite: nothing skips.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import asyncpg

from tests.connectors.sql.helpers import libpq_url

__all__ = ["pg_role", "role_url", "Probe", "probing", "loop_probe", "healthz", "rss_mib", "hwm_mib", "tool_call", "SETUP"]

# The data every SQL attack runs against: plain tables, a sequence, nothing a reader may change.
SETUP = """
CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL, region text NOT NULL);
INSERT INTO customers (name, region) SELECT 'customer ' || i, (ARRAY['emea', 'amer', 'apac'])[1 + i % 3]
FROM generate_series(1, 300) i;
CREATE TABLE docs (id int PRIMARY KEY, body text NOT NULL, blob bytea NOT NULL, meta jsonb NOT NULL);
INSERT INTO docs SELECT i, repeat(chr(97 + i % 26), 100000), decode(repeat('ab', 1000), 'hex'), '{"k": 1}'
FROM generate_series(1, 120) i;
"""


def role_url(pg_url: str, database: str, role: str) -> str:
    """The SQLAlchemy URL of ``database`` as ``role`` (the test server trusts local connections)."""
    from sqlalchemy.engine import make_url

    url = make_url(pg_url).set(drivername="postgresql+asyncpg", database=database, username=role, password=None)
    return url.render_as_string(hide_password=False)


@asynccontextmanager
async def pg_role(pg_url: str, database: str, grants: str = "", *, attributes: str = "") -> AsyncIterator[str]:
    """A LOGIN role (no superuser, no CREATEROLE) allowed to connect to ``database`` and to SELECT
    every table of its ``public`` schema, plus ``grants`` (SQL run as admin in ``database``, with
    ``{role}`` replaced). Dropped afterwards with what it owns."""
    role = f"gw_sec_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(libpq_url(pg_url))
    await admin.execute(f'CREATE ROLE "{role}" LOGIN NOSUPERUSER NOCREATEDB {attributes or "NOCREATEROLE"}')
    db = await asyncpg.connect(libpq_url(pg_url, database))
    try:
        await db.execute(f'GRANT CONNECT ON DATABASE "{database}" TO "{role}"; '
                         f'GRANT USAGE ON SCHEMA public TO "{role}"; '
                         f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
        if grants:
            await db.execute(grants.replace("{role}", f'"{role}"'))
        yield role
    finally:
        try:
            await db.execute(f'DROP OWNED BY "{role}"')
        finally:
            await db.close()
            # Its sessions first (a connector that outlived its test would keep the role in use).
            await admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
            await admin.execute(f'DROP ROLE IF EXISTS "{role}"')
            await admin.close()


@dataclass
class Probe:
    """Latencies (s) of a trivial request or coroutine repeated while something else runs.

    ``samples`` are wall time: what a caller waits, including time the machine gave other processes.
    ``cpu_samples`` are the event-loop thread's CPU time over each whole turn of the probe, the pause
    between probes included (``time.thread_time``): the work the loop did while the probe's timers
    waited, which a busy machine does not inflate. A turn is ``every_s`` plus one probe long, so more
    than ~0.1 s of CPU in one turn means a timer was that late because of work on the loop; a loaded
    machine shows only in ``samples``.
    """

    samples: list[float] = field(default_factory=list)
    cpu_samples: list[float] = field(default_factory=list)

    @property
    def worst(self) -> float:
        return max(self.samples) if self.samples else float("inf")

    @property
    def worst_cpu(self) -> float:
        return max(self.cpu_samples) if self.cpu_samples else float("inf")


@asynccontextmanager
async def probing(once: Callable[[], Awaitable[Any]], every_s: float = 0.01) -> AsyncIterator[Probe]:
    """Run ``once`` back to back (``every_s`` apart) while the block runs; the probe's latencies are
    recorded, including the one in flight when the block ends."""
    probe = Probe()
    stop = asyncio.Event()

    async def loop() -> None:
        while True:  # at least once, even when the block never yields to the loop
            started, cpu = time.perf_counter(), time.thread_time()
            await once()
            probe.samples.append(time.perf_counter() - started)
            if stop.is_set():
                probe.cpu_samples.append(time.thread_time() - cpu)
                return
            try:
                await asyncio.wait_for(stop.wait(), every_s)
            except TimeoutError:
                pass
            # The whole turn, the wait included: a stall between two probes delays this turn's timer.
            probe.cpu_samples.append(time.thread_time() - cpu)

    task = asyncio.create_task(loop())
    try:
        yield probe
    finally:
        stop.set()
        await task


async def loop_probe() -> None:
    """The trivial coroutine: a timer of 1 ms; the time it takes measures how late the loop runs it."""
    await asyncio.sleep(0.001)


def healthz(http: aiohttp.ClientSession, base_url: str) -> Callable[[], Awaitable[None]]:
    async def once() -> None:
        async with http.get(base_url + "/healthz") as resp:
            assert resp.status == 200
            await resp.read()

    return once


def _status(pid: int, key: str) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"{key} not in /proc/{pid}/status")


def rss_mib(pid: int) -> float:
    return _status(pid, "VmRSS")


def hwm_mib(pid: int) -> float:
    """The process's peak resident memory so far."""
    return _status(pid, "VmHWM")


async def tool_call(session: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A ``tools/call`` through a :class:`tests.e2e.rawhttp.RawSession`; the JSON-RPC result."""
    reply = await session.request("tools/call", {"name": name, "arguments": arguments})
    assert "result" in reply, reply
    result: dict[str, Any] = reply["result"]
    return result
