"""Defence in depth behind the sanitising boundary (issue 26), on a real PostgreSQL store.

* A spill file holding what used to wedge the replay (a NUL, lone surrogates, invalid UTF-8,
  over-long values, a torn line) replays completely; the store comes back and stays up.
* A batch the store refuses because of one event is split until the culprit is alone: the other
  events are stored, the culprit is stored in its strong escaped form, or (refused even so) kept
  in the rejected file; the store is never marked unavailable for it.
* Strict durability: a call whose event can be neither committed nor spilled is answered with an
  error, never a result; batch durability still answers it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp

from gateway.audit.escape import unescape_event
from gateway.audit.events import finalize
from gateway.audit.writer import AuditWriter
from gateway.config import AuditConfig
from tests.audit.pgdb import scratch_database
from tests.audit.sample import sample_event
from tests.e2e.rawhttp import messages_of
from tests.support import running_gateway


def _line(event: dict[str, Any]) -> bytes:
    """A spill line as the writer before issue 26 wrote it (``ensure_ascii``: a surrogate or a NUL
    is a JSON escape, which reads back as the character)."""
    data = dict(event)
    data["time"] = data["time"].isoformat()
    return json.dumps(data).encode() + b"\n"


async def test_a_poisoned_spill_file_replays_completely(pg_url: str, tmp_path: Path) -> None:
    spill = tmp_path / "spill.jsonl"
    events = [sample_event(i) for i in range(40)]
    events[3]["arguments"] = {"id": "\u0000x"}  # the OpenAPI argument that stalled the store
    events[7]["arguments"] = {"who": "P-\ud800-x", "\u0000": "key"}
    events[11]["principal"] = "p" * 300  # longer than its column
    events[13]["target"] = "t" * 5000  # larger than a btree entry may be
    events[17]["error_message"] = "NUL \u0000 in text"
    lines = [_line(e) for e in events]
    lines[21] = lines[21].replace(b'"session_id": "', b'"session_id": "\xff\xfe')  # invalid UTF-8
    spill.write_bytes(b"".join(lines) + b'{"event_id": "torn", "ti')  # killed mid-write
    async with scratch_database(pg_url) as db:
        cfg = AuditConfig(store=db.url, spill_path=str(spill), batch_size=8)
        writer = AuditWriter(cfg, tmp_path)
        await writer.start()  # replays before it serves
        try:
            assert writer.store_up and writer.replayed == 40 and writer.rejected == 0
            assert not spill.exists() and not writer.replay_path.exists()
            assert b"torn" in writer.rejected_path.read_bytes()  # kept for a person, not retried
            writer.submit(sample_event(99))
            await writer.flush()
            assert writer.store_up and writer.written == 1
        finally:
            await writer.stop()
        rows = {r["event_id"]: dict(r) for r in await db.fetch("SELECT * FROM gw_audit_events")}
    assert len(rows) == 41
    for i in (3, 7, 17, 21):
        assert rows[events[i]["event_id"]]["escaped"], i
    got = unescape_event({**rows[events[7]["event_id"]], "arguments": json.loads(rows[events[7]["event_id"]]["arguments"])})
    assert got["arguments"] == events[7]["arguments"]
    assert rows[events[21]["event_id"]]["session_id"].startswith("\\udcff\\udcfe")
    assert rows[events[11]["event_id"]]["principal"] == "p" * 199 + "…"
    assert len(rows[events[13]["event_id"]]["target"]) == 1000


async def test_one_refused_event_never_takes_its_batch(pg_url: str, tmp_path: Path) -> None:
    async with scratch_database(pg_url) as db:
        cfg = AuditConfig(store=db.url, spill_path=str(tmp_path / "spill.jsonl"))
        writer = AuditWriter(cfg, tmp_path)
        await writer.start()
        try:
            redactor = writer.redactor
            batch = [finalize(sample_event(i), redactor) for i in range(30)]
            batch[5]["client_name"] = "raw \ud800 past the boundary"  # as if sanitising were skipped
            batch[20]["latency_ms"] = "not a number"  # refused in any form
            await writer._insert(batch)
            assert writer.escaped == 1 and writer.rejected == 1 and writer.store_up
            assert writer.store_errors == 0 and not writer.spill_path.exists()
            rejected = [json.loads(line) for line in writer.rejected_path.read_text().splitlines()]
            assert [e["event_id"] for e in rejected] == [batch[20]["event_id"]]
        finally:
            await writer.stop()
        rows = {r["event_id"]: r for r in await db.fetch("SELECT event_id, client_name, escaped FROM gw_audit_events")}
    assert len(rows) == 29 and batch[20]["event_id"] not in rows
    culprit = rows[batch[5]["event_id"]]
    assert culprit["escaped"] and culprit["client_name"] == "raw \\ud800 past the boundary"


CONFIG = """
gateway: {{log_level: error}}
connectors:
  - name: team
    type: static
    prompts: [{{name: hello, messages: [{{text: hi}}]}}]
audit: {{store: "postgresql://postgres@127.0.0.1:1/nowhere", spill_path: "{spill}", durability: {durability}}}
"""


async def _initialize(tmp_path: Path, durability: str) -> dict[str, Any]:
    """The answer to an initialize (a call like any other: audited) while the audit store refuses
    connections and the spill file's folder is a file."""
    (tmp_path / "not-a-dir").write_text("a file where the spill file's folder should be")
    config = CONFIG.format(spill=tmp_path / "not-a-dir" / "spill.jsonl", durability=durability)
    msg = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
           "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    async with running_gateway(config) as gw, aiohttp.ClientSession() as http:
        async with http.post(gw.mcp_url, json=msg, headers={"Accept": "application/json, text/event-stream"}) as resp:
            assert resp.status == 200
            [reply] = await messages_of(resp)
            return reply


async def test_strict_answers_an_error_when_the_event_is_neither_stored_nor_spilled(tmp_path: Path) -> None:
    reply = await _initialize(tmp_path, "strict")
    assert "result" not in reply
    assert reply["error"]["code"] == -32603 and "audit event could not be recorded" in reply["error"]["message"]


async def test_batch_still_answers_when_the_event_is_lost(tmp_path: Path) -> None:
    reply = await _initialize(tmp_path, "batch")
    assert reply["result"]["serverInfo"]
