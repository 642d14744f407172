"""Issue 14, row 8: SIGKILL under load lost 17 of 1,112 audit events (the batching window).

The attack: kill -9 a gateway process while clients are calling. With ``audit.durability:
strict`` every request that got a response has its audit event after a restart (committed before
the response, or fsync'd to the spill file and replayed by the restart): into PostgreSQL, into
SQLite, and into PostgreSQL while it refuses connections (the events go to the spill file). The
same kill in the default batch mode does lose the events of its batching window, which is what
shows the check can tell.

The load and the checks are those of ``tests/audit/test_nothing_lost.py`` (SIGTERM, store outage).
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from collections import Counter
from pathlib import Path

import aiohttp
import pytest

from tests.audit.pgdb import ScratchDatabase, scratch_database
from tests.audit.test_nothing_lost import Answered, _client
from tests.support import gateway_process

CONFIG = """
gateway: {{http: {{json_response: true}}, log_level: warning}}
connectors:
  - name: team
    type: static
    prompts: [{{name: hello, arguments: [{{name: who}}], messages: [{{text: "hello {{who}}"}}]}}]
audit:
  store: "{store}"
  spill_path: "{spill}"
  durability: {durability}
  batch_size: {batch_size}
  flush_interval_s: {flush}
"""


def _config(store: str, spill: Path, durability: str) -> str:
    # Batch mode with a wide window (1 s, batches never full), so the kill lands inside it.
    batch_size, flush = (200, 0.05) if durability == "strict" else (100_000, 1.0)
    return CONFIG.format(store=store, spill=spill, durability=durability, batch_size=batch_size, flush=flush)


async def _load_then_kill(config: str, answered: Answered, db: ScratchDatabase | None = None) -> None:
    """Eight clients call until the process is killed; with ``db``, the store is down for the
    second half of the run and still down when the kill comes."""
    async with gateway_process(config) as gw, aiohttp.ClientSession() as http:
        stop = asyncio.Event()
        clients = [asyncio.create_task(_client(http, gw.mcp_url, answered, stop)) for _ in range(8)]
        await answered.reached(300)
        if db is not None:
            await db.go_down()
            await answered.reached(len(answered) + 300)
        gw.proc.send_signal(signal.SIGKILL)  # while the clients are still calling
        assert await asyncio.wait_for(gw.proc.wait(), 30) == -signal.SIGKILL
        stop.set()
        await asyncio.wait_for(asyncio.gather(*clients), 30)
    if db is not None:
        await db.come_back()
    # Restart: the new process replays whatever the killed one left in the spill file before it
    # reports ready; then it stops cleanly.
    async with gateway_process(config):
        pass


def _missing(rows: list[tuple[str, str]], answered: set[tuple[str, str]]) -> list[tuple[str, str]]:
    counts = Counter(rows)
    assert all(n == 1 for n in counts.values()), "duplicate audit events"
    return [k for k in answered if k not in counts]


async def _pg_rows(db: ScratchDatabase) -> list[tuple[str, str]]:
    rows = await db.fetch("SELECT session_id, request_id FROM gw_audit_events WHERE method = 'prompts/get'")
    return [(r["session_id"], r["request_id"]) for r in rows]


def _sqlite_rows(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        return list(conn.execute("SELECT session_id, request_id FROM gw_audit_events WHERE method = 'prompts/get'"))


async def test_strict_postgres_sigkill_loses_no_answered_event(pg_url: str, tmp_path: Path) -> None:
    async with scratch_database(pg_url) as db:
        answered = Answered()
        await _load_then_kill(_config(db.url, tmp_path / "spill.jsonl", "strict"), answered)
        missing = _missing(await _pg_rows(db), answered)
    assert len(answered) >= 300 and not missing, f"{len(missing)} of {len(answered)} answered requests lost"


async def test_strict_sqlite_sigkill_loses_no_answered_event(tmp_path: Path) -> None:
    answered = Answered()
    await _load_then_kill(_config(f"sqlite:///{tmp_path / 'audit.db'}", tmp_path / "spill.jsonl", "strict"), answered)
    missing = _missing(_sqlite_rows(tmp_path / "audit.db"), answered)
    assert len(answered) >= 300 and not missing, f"{len(missing)} of {len(answered)} answered requests lost"


async def test_strict_sigkill_during_a_store_outage_keeps_the_spilled_events(pg_url: str, tmp_path: Path) -> None:
    spill = tmp_path / "spill.jsonl"
    async with scratch_database(pg_url) as db:
        answered = Answered()
        await _load_then_kill(_config(db.url, spill, "strict"), answered, db)
        missing = _missing(await _pg_rows(db), answered)
    assert len(answered) >= 600 and not missing, f"{len(missing)} of {len(answered)} answered requests lost"
    assert not spill.exists() or spill.stat().st_size == 0  # replayed by the restart


@pytest.mark.parametrize("store", ["postgres", "sqlite"])
async def test_batch_mode_sigkill_does_lose_its_window(store: str, pg_url: str, tmp_path: Path) -> None:
    """The control: the same kill in the default mode loses the events not yet committed."""
    answered = Answered()
    if store == "sqlite":
        await _load_then_kill(_config(f"sqlite:///{tmp_path / 'audit.db'}", tmp_path / "s.jsonl", "batch"), answered)
        missing = _missing(_sqlite_rows(tmp_path / "audit.db"), answered) if (tmp_path / "audit.db").exists() \
            else list(answered)
    else:
        async with scratch_database(pg_url) as db:
            await _load_then_kill(_config(db.url, tmp_path / "s.jsonl", "batch"), answered)
            missing = _missing(await _pg_rows(db), answered)
    assert missing, "batch mode lost nothing: the kill missed the batching window, the check proves nothing"
