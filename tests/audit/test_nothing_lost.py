"""Nothing lost: a gateway process under concurrent load gets SIGTERM; every request that received
a response has exactly one audit event in PostgreSQL afterwards — also when PostgreSQL refused
connections for part of the run (events spill to the local file and are replayed)."""

from __future__ import annotations

import asyncio
import itertools
import signal
from pathlib import Path

import aiohttp

from tests.audit.pgdb import ScratchDatabase, scratch_database
from tests.support import gateway_process

CONFIG = """
gateway: {{http: {{json_response: true}}, log_level: warning, shutdown_grace_s: 10}}
connectors:
  - name: team
    type: static
    prompts: [{{name: hello, arguments: [{{name: who}}], messages: [{{text: "hello {{who}}"}}]}}]
audit:
  store: "{store}"
  spill_path: "{spill}"
  batch_size: 200
  flush_interval_s: 0.05
"""


async def _client(http: aiohttp.ClientSession, url: str, answered: set[tuple[str, str]],
                  stop: asyncio.Event) -> None:
    """Calls until the gateway stops answering; records (session id, request id) of each response."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    try:
        async with http.post(url, headers=headers, json={
                "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "load", "version": "1"}}}) as resp:
            if resp.status != 200:
                return
            headers["Mcp-Session-Id"] = session = resp.headers["Mcp-Session-Id"]
        async with http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}):
            pass
        for rid in itertools.count(1):
            if stop.is_set():
                return
            async with http.post(url, headers=headers, json={
                    "jsonrpc": "2.0", "id": rid, "method": "prompts/get",
                    "params": {"name": "team_hello", "arguments": {"who": "x", "api_key": "s3cret"}}}) as resp:
                if resp.status != 200:
                    return
                body = await resp.json(content_type=None)
            if body.get("id") == rid and ("result" in body or "error" in body):
                answered.add((session, str(rid)))
    except (TimeoutError, aiohttp.ClientError):
        return


async def _run_and_terminate(config: str, db: ScratchDatabase | None, answered: Answered) -> None:
    async with gateway_process(config) as gw, aiohttp.ClientSession() as http:
        stop = asyncio.Event()
        clients = [asyncio.create_task(_client(http, gw.mcp_url, answered, stop)) for _ in range(8)]
        await answered.reached(200)
        if db is not None:
            await db.go_down()
            await answered.reached(len(answered) + 300)
            await db.come_back()
            await answered.reached(len(answered) + 200)
        gw.proc.send_signal(signal.SIGTERM)  # while the clients are still calling
        code = await asyncio.wait_for(gw.proc.wait(), 30)
        stop.set()
        await asyncio.wait_for(asyncio.gather(*clients), 30)
        assert code == 0
        if db is not None:  # the outage really happened and the gateway said so
            assert gw.proc.stderr is not None
            assert b"audit store unavailable, spilling" in await gw.proc.stderr.read()


class Answered(set[tuple[str, str]]):
    """The answered requests; ``await reached(n)`` wakes when n of them were answered."""

    def __init__(self) -> None:
        super().__init__()
        self._waiters: list[tuple[int, asyncio.Event]] = []

    def add(self, item: tuple[str, str]) -> None:
        super().add(item)
        for n, event in self._waiters:
            if len(self) >= n:
                event.set()

    async def reached(self, n: int, timeout: float = 30) -> None:
        event = asyncio.Event()
        self._waiters.append((n, event))
        if len(self) >= n:
            event.set()
        await asyncio.wait_for(event.wait(), timeout)


async def _check(db: ScratchDatabase, answered: set[tuple[str, str]]) -> None:
    rows = await db.fetch("SELECT session_id, request_id, count(*) AS n, max(arguments::text) AS args "
                          "FROM gw_audit_events WHERE method = 'prompts/get' GROUP BY 1, 2")
    counts = {(r["session_id"], r["request_id"]): r["n"] for r in rows}
    missing = [k for k in answered if k not in counts]
    assert not missing, f"{len(missing)} answered requests have no audit event"
    assert all(n == 1 for n in counts.values()), "duplicate audit events"
    assert all("s3cret" not in r["args"] for r in rows)


async def test_sigterm_under_load_loses_no_event(pg_url: str, tmp_path: Path) -> None:
    async with scratch_database(pg_url) as db:
        answered = Answered()
        config = CONFIG.format(store=db.url, spill=tmp_path / "spill.jsonl")
        await _run_and_terminate(config, None, answered)
        await _check(db, answered)


async def test_store_outage_spills_then_replays(pg_url: str, tmp_path: Path) -> None:
    async with scratch_database(pg_url) as db:
        answered = Answered()
        spill = tmp_path / "spill.jsonl"
        config = CONFIG.format(store=db.url, spill=spill)
        await _run_and_terminate(config, db, answered)
        # Restart: the new process replays whatever the old one left in the spill file before it
        # reports ready (the audit writer starts with the gateway, before the HTTP app serves).
        async with gateway_process(config):
            assert not spill.exists() or spill.stat().st_size == 0
        await _check(db, answered)
        spilled = await db.fetch("SELECT count(*) AS n FROM gw_audit_events")
        assert spilled[0]["n"] >= len(answered)
