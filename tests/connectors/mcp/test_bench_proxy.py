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
    assert lines[-4].startswith("targets: gateway adds") and lines[-3].startswith("for information: with its default")
    assert lines[-2].startswith("response cache: a cached call takes")
    assert lines[-1].startswith("targets at 2026-07-28 (stateless): gateway adds")
