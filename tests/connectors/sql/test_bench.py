"""bench/sql.py stays runnable: a run with tiny sizes prints both tables."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import REPO


def test_bench_sql_runs_with_tiny_sizes(pg_url: str) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "sql.py"), "--rows", "3000", "--iterations", "20",
                           "--pg-url", pg_url], capture_output=True, text=True, timeout=90, cwd=REPO,
                          env={**os.environ})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    for path in ("asyncpg direct", "connector.call_tool", "gateway tools/call", "gateway ping",
                 "connector.call_tool, max_bytes off", "gateway tools/call, max_bytes off", "a 500-row page"):
        assert path in out
    costs = [line.split()[-1] for line in out.splitlines() if line.startswith(("connector.call_tool ", "gateway tools/call "))
             and "max_bytes off" not in line]
    assert len(costs) == 3 and all(c.startswith(("+", "-")) for c in costs), out
    memory = [line.split() for line in out.splitlines() if line.startswith("items")]
    assert [row[0] for row in memory] == ["items_small", "items_medium", "items"]
