"""bench/core.py stays runnable: a run with a handful of requests prints the full table."""

from __future__ import annotations

import subprocess
import sys

from tests.support import REPO


def test_bench_core_runs_with_tiny_sizes() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "core.py"), "--iterations", "16", "--concurrency", "2",
                           "--tools", "3"], capture_output=True, text=True, timeout=90, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert "tools/list = 8 tools" in lines[0]
    rows = [line.split() for line in lines[3:-1]]
    assert [(r[0], r[1]) for r in rows] == [("ping", "sequential"), ("ping", "2"), ("tools/list", "sequential"),
                                            ("tools/list", "2")]
    assert all(r[-1].endswith("x") for r in rows)
