"""One character must not erase the record (issue 26): calls carrying a lone surrogate, a NUL,
control characters, a 4-byte emoji, or invalid UTF-8 in a header, made concurrently with 30
ordinary calls through a real gateway over HTTP, leave exactly one audit row per answered call in
the store (SQLite and PostgreSQL, batch and strict durability) and one line in the JSONL mirror;
the store never becomes unavailable, and an escaped row gives back exactly what was sent."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.audit.escape import unescape_event
from gateway.audit.writer import AuditWriter
from gateway.filters.audit import AuditFilter
from tests.audit.hostile import BAD_TRACE, HOSTILE_ARGUMENTS, Answered, Caller
from tests.audit.pgdb import scratch_database
from tests.support import RunningGateway, running_gateway

CONFIG = """
gateway: {{http: {{json_response: true}}, log_level: warning}}
connectors:
  - name: team
    type: static
    prompts: [{{name: hello, arguments: [{{name: who}}], messages: [{{text: "hello {{who}}"}}]}}]
audit:
  store: "{store}"
  jsonl: "{jsonl}"
  spill_path: "{spill}"
  durability: {durability}
  flush_interval_s: 0.2
"""
BAD_CLIENT = {"name": "C-\ud800-\u0000", "version": "\udcff" * 150}  # also longer than its column
ORDINARY = 30


def _writer(gw: RunningGateway) -> AuditWriter:
    return next(f.writer for f in gw.gateway.filters if isinstance(f, AuditFilter))


@asynccontextmanager
async def _store_url(kind: str, pg_url: str, tmp_path: Path) -> AsyncIterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path}/audit.db"
    else:
        async with scratch_database(pg_url) as db:
            yield db.url


async def _drive(url: str) -> Answered:
    """30 ordinary calls over three sessions, at once with one call of each hostile kind and one
    from a session whose client info is hostile."""
    answered = Answered()
    async with aiohttp.ClientSession() as http:
        callers = [Caller(http, url, answered) for _ in range(4)]
        await asyncio.gather(*(c.open() for c in callers[:3]), callers[3].open(BAD_CLIENT))
        calls = [callers[i % 3].call(f"n-{i}", "ordinary", {"who": f"n{i}"}) for i in range(ORDINARY)]
        calls += [callers[i % 3].call(f"h-{kind}", kind, args) for i, (kind, args) in enumerate(HOSTILE_ARGUMENTS)]
        calls.append(callers[0].call_with_bad_header("h-header"))
        calls.append(callers[3].call("h-client", "client", {"who": "client"}))
        await asyncio.wait_for(asyncio.gather(*calls), 60)
    return answered


@pytest.mark.parametrize("durability", ["batch", "strict"])
@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
async def test_hostile_strings_leave_one_row_per_answered_call(store: str, durability: str, pg_url: str,
                                                               tmp_path: Path) -> None:
    jsonl = tmp_path / "audit.jsonl"
    async with _store_url(store, pg_url, tmp_path) as url:
        config = CONFIG.format(store=url, jsonl=jsonl, spill=tmp_path / "spill.jsonl", durability=durability)
        async with running_gateway(config) as gw:
            writer = _writer(gw)
            answered = await _drive(gw.mcp_url)
            await asyncio.wait_for(writer.flush(), 30)
            assert writer.store is not None
            rows = await writer.store.query(limit=10_000)
            assert writer.store_up and writer.store_errors == 0 and writer.spilled == 0
            assert writer.escaped == 0 and writer.rejected == 0  # sanitised where made: no culprit left
    kinds = Counter(answered.calls.values())
    assert kinds["ordinary"] == ORDINARY and kinds["initialize"] == 4
    # Prompt arguments must be strings: the refusal quotes the key (with its NUL and surrogate).
    assert [rid for _, rid in answered.errors] == ["h-keys"]
    assert all(kinds[kind] == 1 for kind, _ in HOSTILE_ARGUMENTS) and kinds["header"] == kinds["client"] == 1
    _one_row_each(rows, answered)
    lines = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    _one_row_each(lines, answered)
    _hostile_rows_read_back(rows)
    _hostile_rows_read_back(lines)


def _one_row_each(rows: list[dict[str, Any]], answered: Answered) -> None:
    seen = Counter((r["session_id"], r["request_id"]) for r in rows)
    missing = [key for key in answered.calls if seen[key] == 0]
    assert not missing, f"answered calls without an audit row: {missing}"
    assert all(n == 1 for n in seen.values()), "duplicate audit rows"
    assert set(seen) == set(answered.calls)


def _hostile_rows_read_back(rows: list[dict[str, Any]]) -> None:
    """Escaped rows are marked and give back exactly what was sent; the others are unchanged."""
    by_id = {r["request_id"]: dict(r) for r in rows}
    for kind, args in HOSTILE_ARGUMENTS:
        row = by_id[f"h-{kind}"]
        assert bool(row["escaped"]) == (kind in ("surrogate", "nul", "keys")), kind
        # A refusal while parsing records no arguments; its message quotes the bad key.
        assert unescape_event(row)["arguments"] == (None if kind == "keys" else args), kind
    assert unescape_event(by_id["h-keys"])["error_message"].endswith("(w\u0000\ud83d)")
    assert by_id["h-header"]["escaped"] and by_id["h-client"]["escaped"]
    header = unescape_event(by_id["h-header"])
    assert header["trace_id"] == BAD_TRACE.split(b"-")[1].decode("utf-8", "surrogateescape")
    client = unescape_event(by_id["h-client"])
    assert client["client_name"] == BAD_CLIENT["name"]
    assert client["client_version"] == "\udcff" * 16 + "…"  # cut to its 100 characters, whole escapes only
    ordinary = by_id["n-0"]
    assert ordinary["escaped"] is None and ordinary["arguments"] == {"who": "n0"}
