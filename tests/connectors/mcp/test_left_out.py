"""What an upstream offers that the MCP connector leaves out on purpose is visible to the operator
(issue 25): a log line naming the tool and the rule, and ``mcp-gateway list`` (``leftOut`` in
``--json``) naming the connector, the tool, the rule and the reason."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from gateway.cli import main
from tests.connectors.mcp.helpers import SERVER


def _config(tmp_path: Path) -> Path:
    entry = {"name": "up", "type": "mcp", "transport": "stdio", "command": sys.executable,
             "args": [SERVER, "--transport", "stdio", "--era", "dual", "--bad-header-tool"],
             "protocol": "modern", "exclude": {"tools": ["pid", "die"]}, "ping_interval_s": 0}
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps({"audit": {"enabled": False}, "connectors": [entry]}))
    return path


def test_list_json_and_the_log_say_what_was_left_out_and_by_which_rule(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="connectors.mcp")
    path = _config(tmp_path)
    assert main(["list", str(path), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    names = {t["name"] for t in printed["tools"]}
    assert "up_echo" in names and not names & {"up_bad_header", "up_pid", "up_die"}
    left = {(e["connector"], e["name"], e["rule"]): e["reason"] for e in printed["leftOut"]}
    assert set(left) == {("up", "bad_header", "x-mcp-header"), ("up", "pid", "exclude"), ("up", "die", "exclude")}
    assert "type number" in left["up", "bad_header", "x-mcp-header"]
    assert "['pid', 'die']" in left["up", "pid", "exclude"]
    logged = [r.getMessage() for r in caplog.records if "left out by rule" in r.getMessage()]
    for tool, rule in (("bad_header", "x-mcp-header"), ("pid", "exclude"), ("die", "exclude")):
        assert any(f"tool {tool!r} left out by rule {rule}" in line for line in logged), logged

    assert main(["list", str(path)]) == 0
    text = capsys.readouterr().out
    assert "left out (3):" in text and "  up: tools bad_header by rule x-mcp-header: invalid x-mcp-header" in text


def test_nothing_left_out_keeps_the_listing_as_it_was(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entry = {"name": "up", "type": "mcp", "transport": "stdio", "command": sys.executable,
             "args": [SERVER, "--transport", "stdio"], "ping_interval_s": 0}
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps({"audit": {"enabled": False}, "connectors": [entry]}))
    assert main(["list", str(path), "--json"]) == 0
    assert list(json.loads(capsys.readouterr().out)) == ["tools", "resources", "resourceTemplates", "prompts"]
