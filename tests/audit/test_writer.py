"""The audit writer and store: schema and migration, queries, redaction, JSON-lines mirror,
overflow, retention, and spill/replay across a PostgreSQL outage."""

from __future__ import annotations

import asyncio
import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa

from gateway.audit.events import REDACTED, Redactor, capture
from gateway.audit.store import AuditStore
from gateway.audit.writer import AuditWriter
from gateway.config import AuditConfig
from gateway.context import CallContext, Principal
from tests.audit.pgdb import scratch_database


def _ctx(i: int, arguments: dict[str, Any] | None = None, principal: str = "alice") -> CallContext:
    session = SimpleNamespace(id="sess-1", transport="streamable_http",
                              client_info={"name": "claude", "version": "9.9"})
    ctx = CallContext(session=session, method="tools/call", request_id=i, params={},  # type: ignore[arg-type]
                      principal=Principal(principal), target=f"shop_tool{i % 3}",
                      arguments=arguments or {"n": i},
                      traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    ctx.record.connector, ctx.record.backend_target, ctx.record.backend_status = "shop", f"tool{i % 3}", 200
    return ctx


def _event(i: int, **kw: Any) -> dict[str, Any]:
    return capture(_ctx(i, **kw), "ok", None, None, 1.5)


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
