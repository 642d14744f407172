"""``serve --workers N``: N processes on one port (SO_REUSEPORT) sharing state through Redis serve
the conformance suites as one process does; with the memory store N > 1 is refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance import harness
from tests.conformance.test_conformance import HERE, MODERN, reference
from tests.scale.harness import state_section
from tests.support import REPO, gateway_process


def test_workers_with_the_memory_store_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text("audit: {enabled: false}\n")
    proc = subprocess.run([sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--workers", "2"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 2
    assert "--workers 2 needs a state store the workers share" in proc.stderr and "redis://" in proc.stderr


@pytest.mark.timeout(300)
async def test_two_workers_on_one_port_pass_the_conformance_suites(tmp_path: Path) -> None:
    async with reference("dual") as upstream:
        entry = {"name": "conformance", "type": "mcp", "prefix": "", "transport": "streamable_http", "url": upstream}
        config = json.dumps({"audit": {"enabled": False}, "gateway": {"cursor_secret": "workers"},
                             "connectors": [entry], "state": state_section()})
        async with gateway_process(config, args=("--workers", "2")) as gw:
            # Two workers listen: the supervisor and its children are all alive.
            pid = gw.proc.pid
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()  # noqa: ASYNC240
            assert len(children) == 2, children
            (tmp_path / "old").mkdir()
            (tmp_path / "new").mkdir()
            old = await harness.run_server(gw.mcp_url, tmp_path / "old", package=harness.STABLE,
                                           spec_version="2025-11-25", expected_failures=HERE / "baseline.yml")
            assert old.returncode == 0 and old.scenarios and not old.failing(), old.report()
            new = await harness.run_server(gw.mcp_url, tmp_path / "new", requirement=MODERN)
            assert new.scored is not None and set(new.passing()) >= set(new.scored), new.report()
