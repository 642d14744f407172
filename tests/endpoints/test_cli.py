"""The command line for endpoints: ``list --endpoint``, ``validate`` (and ``--deep``) naming the line
of a selection that matches nothing or a rename that collides, ``stdio --endpoint`` refusing a
principal outside ``principals``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support import REPO

BASE = """\
audit: {enabled: false}
telemetry: {metrics: false}
connectors:
  - name: kit
    type: static
    prompts:
      - {name: triage, description: Triage an incident, messages: [{role: user, text: go}]}
      - {name: other, description: Something else, messages: [{role: user, text: later}]}
    resources:
      - {uri: 'docs://runbook', name: runbook, mime_type: text/plain, text: 'runbook'}
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO)


def _write(tmp: Path, endpoints: str) -> Path:
    path = tmp / "gateway.yaml"
    path.write_text(BASE + endpoints)
    return path


def test_list_endpoint_shows_what_it_serves(tmp_path: Path) -> None:
    path = _write(tmp_path, """\
endpoints:
  - name: oncall
    select: [{prompts: [kit_triage]}, {resources: ["docs://run*"]}]
    rename: {kit_triage: start_triage}
    description: {kit_triage: Start the triage.}
""")
    result = _cli("list", str(path), "--json", "--endpoint", "oncall")
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    assert [p["name"] for p in listing["prompts"]] == ["start_triage"]
    assert listing["prompts"][0]["description"] == "Start the triage."
    assert [r["uri"] for r in listing["resources"]] == ["docs://runbook"]
    assert listing["tools"] == []
    everything = json.loads(_cli("list", str(path), "--json").stdout)
    assert [p["name"] for p in everything["prompts"]] == ["kit_other", "kit_triage"]
    unknown = _cli("list", str(path), "--endpoint", "nope")
    assert unknown.returncode == 2 and "no endpoint is named 'nope' (oncall)" in unknown.stderr


def test_validate_names_the_line_of_an_unknown_connector(tmp_path: Path) -> None:
    path = _write(tmp_path, """\
endpoints:
  - name: oncall
    select:
      - {connector: kit}
      - {connector: runbooks}
""")
    result = _cli("validate", str(path))
    assert result.returncode == 2
    assert result.stderr.strip() == (f"{path}: endpoints[0].select[1].connector (line 15): "
                                     "no connector is named 'runbooks'")


def test_validate_names_the_line_of_an_embeddings_key_variable_that_is_not_set(tmp_path: Path) -> None:
    # serve would rank this endpoint lexically alone (and log it); validate says so before.
    path = _write(tmp_path, """\
endpoints:
  - name: finder
    discovery: search
    select: [{connector: kit}]
    search:
      embeddings:
        url: http://127.0.0.1:9/v1/embeddings
        model: m
        api_key_env: GATEWAY_TEST_UNSET_EMBEDDINGS_KEY
""")
    result = _cli("validate", str(path))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"{path}: endpoints[0].search.embeddings.api_key_env (line 19): the environment variable "
        "GATEWAY_TEST_UNSET_EMBEDDINGS_KEY is not set (or empty): this endpoint would rank lexically alone")
    with_key = subprocess.run([sys.executable, "-m", "gateway.cli", "validate", str(path)], capture_output=True,
                              text=True, timeout=60, cwd=REPO,
                              env={**os.environ, "GATEWAY_TEST_UNSET_EMBEDDINGS_KEY": "k"})
    assert with_key.returncode == 0, with_key.stderr


def test_validate_deep_refuses_a_rule_matching_nothing_and_a_colliding_rename(tmp_path: Path) -> None:
    path = _write(tmp_path, """\
endpoints:
  - name: oncall
    select:
      - {prompts: ["kit_*"]}
      - {tools: ["nothing_*"]}
    rename: {kit_triage: kit_other}
""")
    plain = _cli("validate", str(path))
    assert plain.returncode == 0, plain.stderr  # the file alone cannot tell
    deep = _cli("validate", str(path), "--deep")
    assert deep.returncode == 2
    lines = deep.stderr.strip().splitlines()
    assert f"{path}: endpoints[0].select[1] (line 15): this rule matches nothing the catalog serves" in lines
    assert any(line.startswith(f"{path}: endpoints[0].rename.kit_triage (line 16): rename 'kit_triage' → "
                               "'kit_other' collides") for line in lines), lines
    listed = _cli("list", str(path), "--endpoint", "oncall")
    assert listed.returncode == 2 and "matches nothing" in listed.stderr


def test_stdio_endpoint_refuses_a_principal_outside_its_principals(tmp_path: Path) -> None:
    path = _write(tmp_path, """\
auth: {stdio_principal: local}
endpoints:
  - name: oncall
    select: [{connector: kit}]
    principals: ["group:oncall"]
""")
    result = subprocess.run([sys.executable, "-m", "gateway.cli", "stdio", "--config", str(path), "--endpoint",
                             "oncall"], capture_output=True, text=True, timeout=60, cwd=REPO, input="")
    assert result.returncode == 2 and result.stdout == ""
    assert "'local' is not among the principals of endpoint 'oncall'" in result.stderr
