"""Smoke test: ``bench/audit_replay.py`` runs end to end (tiny sizes, both stores) and prints its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "audit_replay.py"


def test_audit_replay_bench_runs_on_sqlite_and_postgres(pg_url: str) -> None:
    for store in ("sqlite", pg_url):
        out = subprocess.run([sys.executable, str(BENCH), "--events", "300", "--batch-size", "50",
                              "--store", store], capture_output=True, text=True, timeout=240)
        assert out.returncode == 0, out.stderr[-2000:]
        rows = [line.split() for line in out.stdout.splitlines() if line.startswith(("whole", "streamed"))]
        assert [r[0] for r in rows] == ["whole", "streamed"], out.stdout
        assert all(float(r[-1].rstrip("%")) > -50 for r in rows), out.stdout  # numbers, not blanks
