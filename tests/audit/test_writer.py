"""The audit writer and store: schema and migration, queries, redaction, JSON-lines mirror,
overflow, retention, and spill/replay across a PostgreSQL outage."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from gateway.audit.events import REDACTED, Redactor
from gateway.audit.store import AuditStore
from gateway.audit.writer import AuditWriter
from gateway.config import AuditConfig
from tests.audit.pgdb import scratch_database
from tests.audit.sample import sample_event as _event


def _config(tmp_path: Path, store: str, **kw: Any) -> AuditConfig:
    return AuditConfig(store=store, spill_path=str(tmp_path / "spill.jsonl"), flush_interval_s=0.02, **kw)


def test_redaction_configured_always_and_by_value() -> None:
    key_digest = hashlib.sha256(b"the-ci-api-key").digest()
    redactor = Redactor(["ssn"], [key_digest])
    jwt_like = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlc2lnbmF0dXJl"
    args = {"ssn": "123", "user_password": "x", "nested": [{"API_KEY": "k", "ok": 1}], "note": "hi",
            "header": "Bearer abc.def", "token_like": jwt_like, "copy": "the-ci-api-key"}
    out = redactor.redact(args)
    assert out == {"ssn": REDACTED, "user_password": REDACTED, "nested": [{"API_KEY": REDACTED, "ok": 1}],
                   "note": "hi", "header": REDACTED, "token_like": REDACTED, "copy": REDACTED}
    assert args["ssn"] == "123"  # the caller's dict is untouched
    # Secrets are redacted even when the configured list is empty.
    assert Redactor([]).redact({"password": "p"}) == {"password": REDACTED}


async def test_sqlite_write_query_mirror_and_retention(tmp_path: Path) -> None:
    mirror = tmp_path / "audit.jsonl"
    writer = AuditWriter(_config(tmp_path, f"sqlite:///{tmp_path / 'a.db'}", jsonl=str(mirror)))
    await writer.start()
    old = _event(0)
    old["time"] = datetime.now(UTC) - timedelta(days=200)
    for event in [old] + [_event(i, arguments={"n": i, "password": "pw"}) for i in range(1, 10)]:
        writer.submit(event)
    await asyncio.wait_for(writer.flush(), 10)
    rows = await writer.store.query(since=datetime.now(UTC) - timedelta(hours=1))  # type: ignore[union-attr]
    assert len(rows) == 9
    row = rows[0]
    assert row["principal"] == "alice" and row["client_name"] == "claude" and row["client_version"] == "9.9"
    assert row["connector"] == "shop" and row["backend_status"] == "200" and row["latency_ms"] == 1.5
    assert row["trace_id"] == "0af7651916cd43dd8448eb211c80319c" and row["session_id"] == "sess-1"
    assert row["arguments"] == {"n": 1, "password": REDACTED}
    assert len(await writer.store.query(target="shop_tool1")) == 3  # type: ignore[union-attr]
    assert len(await writer.store.query(target="shop_*", principal="alice", outcome="ok")) == 10  # type: ignore[union-attr]
    assert await writer.store.prune(90) == 1  # type: ignore[union-attr]
    await writer.stop()
    lines = [json.loads(line) for line in mirror.read_text().splitlines()]
    assert len(lines) == 10 and lines[1]["arguments"]["password"] == REDACTED


async def test_schema_migration_adds_missing_columns(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    engine = sa.create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:  # a table as an older gateway created it
        conn.execute(sa.text("CREATE TABLE gw_audit_events (id INTEGER PRIMARY KEY, event_id VARCHAR(32) "
                             "UNIQUE NOT NULL, time DATETIME NOT NULL, method VARCHAR(100) NOT NULL, "
                             "outcome VARCHAR(40) NOT NULL)"))
    engine.dispose()
    store = AuditStore(f"sqlite:///{db}")
    await store.open()
    await store.write([_event(1)])
    rows = await store.query()
    await store.close()
    assert rows[0]["trace_id"] == "0af7651916cd43dd8448eb211c80319c"


async def test_queue_overflow_spills_instead_of_dropping(tmp_path: Path) -> None:
    writer = AuditWriter(_config(tmp_path, f"sqlite:///{tmp_path / 'a.db'}", queue_size=100))
    for i in range(150):  # not started: nothing drains the queue
        writer.submit(_event(i))
    assert writer.overflowed == 50
    await writer.start()  # replays the spill file, then drains the queue
    await asyncio.wait_for(writer.flush(), 10)
    rows = await writer.store.query(limit=1000)  # type: ignore[union-attr]
    await writer.stop()
    assert sorted(int(r["request_id"]) for r in rows) == list(range(150))


async def test_postgres_outage_spills_and_replays_without_duplicates(pg_url: str, tmp_path: Path) -> None:
    async with scratch_database(pg_url) as db:
        writer = AuditWriter(_config(tmp_path, db.url), retry_s=0.2)
        await writer.start()
        for i in range(100):
            writer.submit(_event(i))
        await asyncio.wait_for(writer.flush(), 10)
        await db.go_down()
        for i in range(100, 300):
            writer.submit(_event(i))
        await asyncio.wait_for(writer.flush(), 10)
        assert writer.spilled >= 200 and not writer.store_up
        await db.come_back()
        # Retries happen every 0.2 s while events keep arriving; wait for the replay itself.
        extra = 10_000
        async with asyncio.timeout(15):
            while writer.replayed < writer.spilled:
                extra += 1
                writer.submit(_event(extra))
                await writer.flush()
                await asyncio.sleep(0.05)
        await writer.stop()
        rows = await db.fetch("SELECT request_id, count(*) AS n FROM gw_audit_events GROUP BY request_id")
    ids = {int(r["request_id"]) for r in rows}
    assert set(range(300)) <= ids and all(r["n"] == 1 for r in rows)
    assert not (tmp_path / "spill.jsonl").exists() or (tmp_path / "spill.jsonl").stat().st_size == 0


async def test_a_trickle_of_events_is_committed_in_batches_not_one_by_one(tmp_path: Path) -> None:
    writer = AuditWriter(AuditConfig(store=f"sqlite:///{tmp_path / 'a.db'}", spill_path=str(tmp_path / "s.jsonl"),
                                     flush_interval_s=0.3, batch_size=4))
    await writer.start()
    assert writer.store is not None
    batches: list[int] = []
    real_write = writer.store.write

    async def counting_write(events: Any) -> None:
        batches.append(len(events))
        await real_write(events)

    writer.store.write = counting_write  # type: ignore[method-assign]
    for i in range(3):  # a quiet gateway: one request every 20 ms
        writer.submit(_event(i))
        await asyncio.sleep(0.02)
    await writer.flush()
    for i in range(3, 13):  # a burst: full batches, then what is left once the interval is out
        writer.submit(_event(i))
    await writer.flush()
    await writer.stop()
    assert batches == [3, 4, 4, 2]  # the trickle waited for company
    store = AuditStore(f"sqlite:///{tmp_path / 'a.db'}")
    assert len(await store.query()) == 13
    await store.close()


async def test_spill_replay_is_streamed_in_batches_not_loaded_whole(tmp_path: Path) -> None:
    """Replaying a large spill file holds one batch at a time (issue 19 point 4).

    Loading the whole file as one list grew the process for good after a 20,000-event outage;
    the replay's peak Python allocation must stay far below what the whole file costs in memory.
    tracemalloc counts allocations exactly, so the bound does not depend on timing or on the OS.
    """
    import tracemalloc

    from gateway.audit.events import finalize, from_jsonable

    writer = AuditWriter(_config(tmp_path, f"sqlite:///{tmp_path / 'a.db'}", batch_size=100))
    await writer.start()
    try:
        writer.submit(_event(-1))  # warms the engine and its statement cache outside the measure
        await asyncio.wait_for(writer.flush(), 10)
        n = 5000
        events = [finalize(_event(i), writer.redactor) for i in range(n)]
        writer._spill(events)
        del events
        lines = (tmp_path / "spill.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(lines) == n
        tracemalloc.start()
        try:
            whole = [from_jsonable(json.loads(line)) for line in lines]  # what loading it all costs
            _, whole_peak = tracemalloc.get_traced_memory()
            del whole, lines
            tracemalloc.reset_peak()
            base, _ = tracemalloc.get_traced_memory()
            await writer._replay()  # what the writer does once the store answers again
            _, replay_peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert writer.replayed == n and writer.store_up
        rows = await writer.store.query(limit=n + 10)  # type: ignore[union-attr]
        assert len(rows) == n + 1
        assert not (tmp_path / "spill.jsonl").exists() and not writer.replay_path.exists()
    finally:
        await writer.stop()
    # One batch is 2 % of the file; allow generous room for the driver's own buffers.
    assert replay_peak - base < whole_peak / 4, (replay_peak - base, whole_peak)


async def test_a_replay_hands_the_freed_heap_back_once(tmp_path: Path) -> None:
    """After a replay that moved events the writer calls glibc's ``malloc_trim`` once (the pages
    the replay freed go back to the OS; issue 19 point 4); a retry with nothing to replay does not."""
    from gateway.audit.events import finalize

    writer = AuditWriter(_config(tmp_path, f"sqlite:///{tmp_path / 'a.db'}", batch_size=50))
    await writer.start()
    try:
        assert writer.trims == 0  # nothing was spilled before the start
        writer._spill([finalize(_event(i), writer.redactor) for i in range(120)])
        await writer._replay()
        assert writer.replayed == 120 and writer.trims == 1  # three batches, one trim
        await writer._replay()
        assert writer.trims == 1
    finally:
        await writer.stop()


async def test_a_store_error_is_logged_without_the_statement_or_the_rows(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    """A failed insert is logged as the driver's reason, on one short line: not SQLAlchemy's
    message with the batch's INSERT and its rows (principals, session ids, arguments)."""
    from gateway.audit.events import finalize

    writer = AuditWriter(_config(tmp_path, f"sqlite:///{tmp_path / 'a.db'}"))
    await writer.start()
    assert writer.store is not None
    try:
        async with writer.store.engine.begin() as conn:  # the store breaks under the writer
            await conn.execute(sa.text("DROP TABLE gw_audit_events"))
        private = _event(7, arguments={"note": "private-words"})
        with pytest.raises(sa.exc.OperationalError) as info:
            await writer.store.write([finalize(private, writer.redactor)])
        assert "INSERT" in str(info.value) and "private-words" not in str(info.value)  # hide_parameters
        with caplog.at_level(logging.WARNING, logger="gateway.audit"):
            writer.submit(private)
            await asyncio.wait_for(writer.flush(), 10)
        assert writer.spilled == 1 and not writer.store_up
        [line] = [r.getMessage() for r in caplog.records if "audit store unavailable" in r.getMessage()]
        assert "OperationalError: no such table: gw_audit_events" in line and len(line) < 500, line
        for leaked in ("INSERT", "private-words", "sess-1", "alice", "\n"):
            assert leaked not in line, (leaked, line)
    finally:
        await writer.stop()


async def test_events_queued_during_a_replay_are_written_between_its_batches(tmp_path: Path) -> None:
    """A long replay does not let the queue pile up (issue 26 point 7: what piles up raises the
    heap's high-water mark for good): after each replay batch, a batch of queued events goes to
    the store. The writer task is not started, so only the replay can have written them."""
    from gateway.audit.events import finalize

    writer = AuditWriter(_config(tmp_path, f"sqlite:///{tmp_path / 'a.db'}", batch_size=50))
    try:
        writer._spill([finalize(_event(i), writer.redactor) for i in range(1000)])
        for i in range(1000, 2500):
            writer.submit(_event(i))
        await writer._replay()  # 20 replay batches of 50, each followed by 50 queued events
        assert writer.replayed == 1000 and writer.written == 1000 and writer.queue.qsize() == 500
        assert writer.store_up and not writer.spill_path.exists()
        rows = await writer.store.query(limit=10_000)  # type: ignore[union-attr]
        assert len(rows) == 2000 and len({r["event_id"] for r in rows}) == 2000
    finally:
        await writer.stop()
