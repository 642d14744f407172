"""``validate`` reports every problem it can find in one run (issue 27): schema errors and what the
checks find in the rest together; ``--deep`` probes every connector whose own entry is valid, and a
failed stdio upstream is reported with its stderr; a stdio principal that no access rule admits is
a warning in ``validate`` and in the log of ``stdio`` and ``serve`` at start."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.clients import CORE_ONLY
from tests.support import REPO, running_gateway

TINY = REPO / "examples" / "tiny_mcp_server.py"
# What `npx` prints when a package does not exist, then exits 1 (the ops trial's case).
FAILING = "import sys\nsys.stderr.write('npm error 404 Not Found - GET https://registry.npmjs.org/@acme%2fnope\\n')\n" \
          "sys.exit(1)\n"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


def _lines(stderr: str, path: Path) -> list[str]:
    return [line.removeprefix(f"{path}: ") for line in stderr.splitlines()]


def test_validate_lists_a_type_error_and_a_missing_file_together(tmp_path: Path) -> None:
    """It used to stop at the type error: the missing file showed only once that was fixed."""
    config = tmp_path / "gateway.yaml"
    config.write_text("""\
connectors:
  - {name: team, type: static, prompts: 5}
  - {name: db, type: sql, url: "sqlite+aiosqlite:///./nope.db"}
  - {name: docs, type: static, resources: [{uri: "x://1", name: one, path: ./gone.md}]}
""")
    result = _cli("validate", str(config))
    assert result.returncode == 2 and result.stdout == ""
    lines = _lines(result.stderr, config)
    assert len(lines) == 3, result.stderr
    assert lines[0].startswith("connectors[0].prompts (line 2): ")
    assert lines[1] == f"connectors[1].url (line 3): sqlite database file not found: {tmp_path / 'nope.db'}"
    assert lines[2] == f"connectors[2].resources[0].path (line 4): file not found: {tmp_path / 'gone.md'}"


def test_validate_names_every_unset_environment_variable(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text('auth: {api_keys: [{name: a, key: "${H27C_UNSET_A}"}]}\n'
                      'connectors: [{name: p, type: openapi, spec: "${H27C_UNSET_B}"}]\n')
    result = _cli("validate", str(config))
    assert result.returncode == 2
    assert [line.split(":")[0] for line in _lines(result.stderr, config)] == [
        "auth.api_keys[0].key (line 1)", "connectors[0].spec (line 2)"]
    assert "H27C_UNSET_A is not set" in result.stderr and "H27C_UNSET_B is not set" in result.stderr


def test_validate_checks_connectors_when_the_top_level_is_invalid(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text("gateway: {page_size: many}\nconnectors:\n"
                      "  - {name: db, type: sql, url: \"sqlite+aiosqlite:///./nope.db\"}\n")
    lines = _lines(_cli("validate", str(config)).stderr, config)
    assert [line.split(":")[0] for line in lines] == ["gateway.page_size (line 1)", "connectors[0].url (line 3)"]


def test_validate_deep_probes_every_valid_connector_and_shows_a_failed_upstreams_stderr(tmp_path: Path) -> None:
    """--deep used to do nothing once a basic check failed, and said only "upstream process
    exited (code 1)" of an upstream that wrote why on stderr."""
    config = tmp_path / "gateway.yaml"
    (tmp_path / "failing.py").write_text(FAILING)
    config.write_text(CORE_ONLY + f"""\
connectors:
  - {{name: db, type: sql, url: "sqlite+aiosqlite:///./nope.db"}}
  - {{name: broken, type: static, prompts: 5}}
  - {{name: tiny, type: mcp, command: {sys.executable}, args: [{TINY}]}}
  - name: npx
    type: mcp
    command: {sys.executable}
    args: [./failing.py]
""")
    result = _cli("validate", "--deep", str(config))
    assert result.returncode == 2, result.stdout + result.stderr  # problems of the file outrank failed probes
    probes = result.stdout.splitlines()
    assert probes[0] == "connector tiny (mcp): ok: 3 tools"
    assert probes[1].startswith("connector npx (mcp): FAILED: ") and "exited (code 1)" in probes[1], probes
    assert "npm error 404 Not Found - GET https://registry.npmjs.org/@acme%2fnope" in probes[1]
    assert len(probes) == 2, probes  # db (file missing) and broken (schema) are not probed
    lines = _lines(result.stderr, config)
    assert lines[0].startswith("connectors[1].prompts (line 5): ")
    assert lines[1].startswith("connectors[0].url (line 4): sqlite database file not found")
    assert lines[2] == "1 of 2 checks failed"


ACCESS = CORE_ONLY + f"""\
auth: {{api_keys: [{{name: ops, key: abc}}]}}
access:
  - {{principals: [ops], allow: ["*"]}}
  - {{principals: ["*"], deny: ["tiny_*"]}}
connectors:
  - {{name: tiny, type: mcp, command: {sys.executable}, args: [{TINY}]}}
"""
WARNING = "no access rule allows anything to the stdio principal 'local'"


def test_validate_warns_of_a_stdio_principal_no_access_rule_admits(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(ACCESS)
    result = _cli("validate", str(config))
    assert result.returncode == 0 and result.stdout.strip().endswith(": OK")  # a warning, not an error
    [line] = _lines(result.stderr, config)
    assert line.startswith(f"warning: auth.stdio_principal (line 3): {WARNING}")
    admitted = tmp_path / "admitted.yaml"
    admitted.write_text(ACCESS.replace("[ops]", "[ops, local]"))
    assert _cli("validate", str(admitted)).stderr == ""
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text(ACCESS.replace("auth: {", "auth: {stdio_principal: ops, "))
    assert _cli("validate", str(renamed)).stderr == ""
    no_rules = tmp_path / "open.yaml"
    no_rules.write_text(CORE_ONLY + "connectors: [{name: t, type: static, prompts: [{name: hi, messages: "
                                    "[{text: hello}]}]}]\n")
    assert _cli("validate", str(no_rules)).stderr == ""  # no rules: everything is allowed


def test_stdio_logs_the_warning_at_start(tmp_path: Path) -> None:
    """The trial's case: stdio served 0 tools and nothing said why."""
    config = tmp_path / "gateway.yaml"
    config.write_text(ACCESS + "gateway: {log_format: text}\n")
    result = subprocess.run([sys.executable, "-m", "gateway.cli", "stdio", "--config", str(config)],
                            input="", capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert f"config auth.stdio_principal: {WARNING}" in result.stderr
    assert "WARNING" in result.stderr.split(WARNING)[0].splitlines()[-1]


async def test_serve_logs_the_warning_at_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="gateway.app"):
        async with running_gateway(ACCESS, base_dir=tmp_path):
            pass
    assert any(WARNING in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records), caplog.text
