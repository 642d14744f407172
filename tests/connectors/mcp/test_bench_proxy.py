"""bench/proxy.py stays runnable: a tiny run (no FastMCP row) prints the whole table."""

from __future__ import annotations

import subprocess
import sys

from tests.support import REPO


def test_bench_proxy_runs_with_tiny_sizes() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "proxy.py"), "--seconds", "0.3", "--concurrency", "2",
                           "--fastmcp-python", "/nonexistent"], capture_output=True, text=True, timeout=90, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    rows = [line for line in lines if line.startswith("(")]
    labels = [r[:31].strip() for r in rows]
    assert labels == [label for label in ("(a) direct", "(b) gateway", "(b*) gateway, cached", "(b+) +audit+metrics",
                                          "(a) direct 2026-07-28",
                                          "(b) gateway 2026-07-28", "(d) aiohttp relay", "(c) FastMCP proxy")
                      for _ in range(2)]
    assert "skipped" in rows[-1]
    assert lines[0].startswith("upstream: mcp SDK echo") and "load average" in lines[0]
    end = lines.index("") + 1  # the lines after the table
    assert lines[end].startswith("targets: gateway adds") and lines[end + 1].startswith("for information: with its default")
    assert lines[end + 2].startswith("response cache: a cached call takes") and lines[end + 3] == ""
    # Both revisions side by side at 1 caller: latency added against the target, CPU of both processes.
    assert lines[end + 4].startswith("targets (issue 12): a call through the gateway adds <= 0.5 ms")
    assert "gateway CPU us/call" in lines[end + 5] and "upstream CPU us/call" in lines[end + 5]
    stateless, session = lines[end + 7], lines[end + 8]
    assert stateless.startswith("2026-07-28 (stateless)") and session.startswith("2025-06-18 (session)")
    for row in (stateless, session):
        cells = row.split(")", 1)[1].replace("NOT met", "NOT_met").split()
        assert len(cells) == 7 and cells[3] in ("met", "NOT_met") and float(cells[-1]) > 0 and float(cells[-2]) > 0
    assert lines[end + 9].startswith("for scale: a bare aiohttp relay (d) adds")
    assert lines[-1].startswith("load average") and lines[-1].endswith("at the end")
