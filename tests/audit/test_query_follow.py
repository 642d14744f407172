"""``mcp-gateway audit query`` answers "who, lately": newest events first, ``--follow`` tails new
rows (also rows another replica committed late, with lower ids) until SIGINT or ``--follow-for``,
and refused calls name the connector of the target they were refused. On SQLite and on a real
PostgreSQL; the CLI runs as the installed console script, as an operator runs it."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.audit.store import AuditStore
from tests.audit.pgdb import scratch_database
from tests.audit.sample import sample_event as _event
from tests.filters.mcp_http import McpHttp
from tests.support import running_gateway

REPO = Path(__file__).resolve().parents[2]
CLI = str(REPO / ".venv" / "bin" / "mcp-gateway")


@asynccontextmanager
async def audit_store(kind: str, tmp_path: Path, pg_url: str) -> AsyncIterator[tuple[AuditStore, Path]]:
    """An opened, empty store of ``kind`` and a gateway.yaml whose audit.store is it."""
    cfg = tmp_path / "gateway.yaml"
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'audit.db'}"
        store = AuditStore(url)
        cfg.write_text(f"audit: {{store: '{url}'}}\n")
        await store.open()
        try:
            yield store, cfg
        finally:
            await store.close()
        return
    async with scratch_database(pg_url) as db:
        store = AuditStore(db.url)
        cfg.write_text(f"audit: {{store: '{db.url}'}}\n")
        await store.open()
        try:
            yield store, cfg
        finally:
            await store.close()


@contextmanager
def _ctrl_c_as_from_a_terminal() -> Iterator[None]:
    """Children spawned inside see SIGINT at its default, as from an operator's terminal.

    A child inherits an ignored SIGINT: a test run started in the background of a shell without
    job control (``cmd &`` in a script) ignores it, and Python then installs no KeyboardInterrupt
    handler, so the follower would ignore the Ctrl-C the test sends and run to ``--follow-for``.
    A handled signal is reset to its default at exec: the parent handles it while spawning."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _at(i: int, minutes_ago: float, **fields: Any) -> dict[str, Any]:
    event = _event(i)
    event.update(time=datetime.now(UTC) - timedelta(minutes=minutes_ago), **fields)
    return event


async def _query(cfg: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    proc = await asyncio.create_subprocess_exec(CLI, "audit", "query", "--config", str(cfg), "--json", *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return proc.returncode, [json.loads(line) for line in out.decode().splitlines()]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_newest_first_and_limit_keeps_the_newest(kind: str, tmp_path: Path, pg_url: str) -> None:
    async with audit_store(kind, tmp_path, pg_url) as (store, cfg):
        # Inserted out of time order: the order is by event time, not by insertion.
        await store.write([_at(1, 30), _at(3, 10), _at(0, 40), _at(2, 20)])
        _, rows = await _query(cfg)
        assert [r["request_id"] for r in rows] == ["3", "2", "1", "0"]
        _, rows = await _query(cfg, "--limit", "2")
        assert [r["request_id"] for r in rows] == ["3", "2"]  # the newest two, not the oldest
        _, rows = await _query(cfg, "--limit", "2", "--oldest-first")
        assert [r["request_id"] for r in rows] == ["0", "1"]


async def _lines(stream: asyncio.StreamReader, n: int) -> list[dict[str, Any]]:
    out = []
    for _ in range(n):
        line = await asyncio.wait_for(stream.readline(), 20)
        assert line, f"the follower ended after {out}"
        out.append(json.loads(line))
    return out


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_follow_prints_each_new_row_once_also_late_commits(kind: str, tmp_path: Path, pg_url: str) -> None:
    async with audit_store(kind, tmp_path, pg_url) as (store, cfg):
        await store.write([_at(i, 10 - i) for i in range(5)])
        with _ctrl_c_as_from_a_terminal():
            proc = await asyncio.create_subprocess_exec(
                CLI, "audit", "query", "--config", str(cfg), "--json", "--limit", "3", "--follow",
                "--interval", "0.1", "--follow-for", "30", "--outcome", "ok",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert proc.stdout is not None
        try:
            # Like tail -f: the newest three, oldest of them first.
            assert [r["request_id"] for r in await _lines(proc.stdout, 3)] == ["2", "3", "4"]
            await store.write([_at(5, 0), _at(6, 0, outcome="denied")])  # filters hold while following
            assert [r["request_id"] for r in await _lines(proc.stdout, 1)] == ["5"]
            # Another replica's batch that took ids earlier but committed later: printed too, once.
            await store.write([_at(7, 0, id=1000)])
            assert [r["request_id"] for r in await _lines(proc.stdout, 1)] == ["7"]
            await store.write([_at(8, 0, id=900)])
            assert [r["request_id"] for r in await _lines(proc.stdout, 1)] == ["8"]
            await store.write([_at(9, 0)])
            assert [r["request_id"] for r in await _lines(proc.stdout, 1)] == ["9"]
            proc.send_signal(signal.SIGINT)  # Ctrl-C: a clean end, nothing printed twice
            out, err = await asyncio.wait_for(proc.communicate(), 20)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert proc.returncode == 0, err.decode()
        assert out == b"" and b"Traceback" not in err, (out, err)


async def test_follow_for_ends_the_follower(tmp_path: Path, pg_url: str) -> None:
    async with audit_store("sqlite", tmp_path, pg_url) as (store, cfg):
        await store.write([_at(0, 1)])
        loop = asyncio.get_running_loop()
        started = loop.time()
        _, rows = await _query(cfg, "--follow", "--follow-for", "1", "--interval", "0.2")
        assert [r["request_id"] for r in rows] == ["0"]
        assert loop.time() - started < 15


def test_bad_follow_arguments_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gateway.audit.query_cli import main

    cfg = tmp_path / "gateway.yaml"
    cfg.write_text("audit: {store: 'sqlite:///./audit.db'}\n")
    for bad in (["--follow-for", "0"], ["--interval", "-1"], ["--limit", "0"]):
        with pytest.raises(SystemExit) as exc:
            main(["query", "--config", str(cfg), "--follow", *bad])
        assert exc.value.code == 2, bad
    assert "must be" in capsys.readouterr().err


GATEWAY = """
gateway: {{http: {{json_response: true}}}}
audit: {{store: "sqlite:///{db}", spill_path: "{tmp}/spill.jsonl"}}
auth:
  api_keys: [{{name: ci, key: ci-key}}]
access:
  - {{principals: ["*"], allow: ["*"], deny: ["team_secret"]}}
rate_limits:
  rules: [{{scope: principal, match: "team_hello", rate: 1/h, burst: 1}}]
connectors:
  - name: team
    type: static
    prompts:
      - {{name: hello, messages: [{{text: hi}}]}}
      - {{name: secret, messages: [{{text: shh}}]}}
"""


async def test_refused_rows_name_the_connector_of_their_target(tmp_path: Path) -> None:
    """The finding: denied rows showed connector `-`. The call never reaches its connector, but
    the catalog knows whose target it named."""
    async with running_gateway(GATEWAY.format(db=tmp_path / "audit.db", tmp=tmp_path)) as gw, \
            aiohttp.ClientSession() as http:
        client = await McpHttp(http, gw.mcp_url, "ci-key").initialize()
        assert (await client.call("prompts/get", {"name": "team_secret"}))["error"]["code"] == -32003
        assert "result" in await client.call("prompts/get", {"name": "team_hello"})
        assert (await client.call("prompts/get", {"name": "team_hello"}))["error"]["code"] == -32029
        assert (await client.call("prompts/get", {"name": "nobody_knows"}))["error"]["code"] == -32602
    (tmp_path / "gateway.yaml").write_text(f"audit: {{store: 'sqlite:///{tmp_path / 'audit.db'}'}}\n")
    _, rows = await _query(tmp_path / "gateway.yaml", "--method", "prompts/get", "--oldest-first")
    assert [(r["outcome"], r["target"], r["connector"]) for r in rows] == [
        ("denied", "team_secret", "team"), ("ok", "team_hello", "team"), ("rate_limited", "team_hello", "team"),
        ("invalid", "nobody_knows", None)]
    table = await asyncio.create_subprocess_exec(
        CLI, "audit", "query", "--config", str(tmp_path / "gateway.yaml"), "--outcome", "denied",
        stdout=asyncio.subprocess.PIPE)
    out, _ = await table.communicate()
    (row,) = [line for line in out.decode().splitlines() if "team_secret" in line]
    assert row.split()[-3] == "team", row  # the connector column, before session and request ids
