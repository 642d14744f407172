"""``mcp-gateway audit query``: filters by time, principal, target and outcome; table and JSON."""

from __future__ import annotations

import asyncio
import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.audit.query_cli import main, parse_when
from gateway.audit.store import AuditStore
from tests.audit.sample import sample_event as _event

REPO = Path(__file__).resolve().parents[2]


def test_parse_when() -> None:
    now = datetime(2026, 1, 2, 12, tzinfo=UTC)
    assert parse_when("15m", now) == now - timedelta(minutes=15)
    assert parse_when("2026-01-01T00:00:00Z") == datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError):
        parse_when("yesterday")


async def _seed(db: Path) -> None:
    store = AuditStore(f"sqlite:///{db}")
    old = _event(0)
    old["time"] = datetime.now(UTC) - timedelta(days=3)
    denied = _event(1, principal="bob")
    denied.update(outcome="denied", error_code=-32003)
    await store.open()
    await store.write([old, denied, _event(2), _event(3)])
    await store.close()


def test_query_filters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(_seed(tmp_path / "audit.db"))  # sync test: main() runs its own event loop
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text("audit: {store: 'sqlite:///./audit.db'}\n")

    def run(*args: str) -> list[dict]:
        assert main(["query", "--config", str(cfg), "--json", *args]) == 0
        return [json.loads(line) for line in capsys.readouterr().out.splitlines()]

    assert len(run()) == 4
    assert len(run("--since", "1d")) == 3
    assert [e["principal"] for e in run("--outcome", "denied")] == ["bob"]
    assert len(run("--principal", "alice", "--since", "1h")) == 2
    assert [e["request_id"] for e in run("--target", "shop_tool2")] == ["2"]
    assert len(run("--target", "shop_*", "--until", "1d")) == 1
    assert main(["query", "--config", str(cfg), "--since", "bogus"]) == 2
    capsys.readouterr()


def test_cli_entry_point(tmp_path: Path) -> None:
    asyncio.run(_seed(tmp_path / "audit.db"))
    cfg = tmp_path / "gateway.yaml"
    cfg.write_text("audit: {store: 'sqlite:///./audit.db'}\n")
    out = subprocess.run([str(REPO / ".venv/bin/mcp-gateway"), "audit", "query", "--config", str(cfg),
                          "--outcome", "denied"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "bob" in out and "denied" in out and "(1 events)" in out
