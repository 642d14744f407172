"""bench/policy.py runs end to end with tiny sizes (the real run is `make bench`), so the bench
cannot silently rot when the core changes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_runs_with_tiny_sizes() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "policy.py"), "--calls", "60", "--events", "1000",
                           "--seconds", "0.2", "--concurrent-calls", "200"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "added p50 ms" in proc.stdout and "events/s sustained" in proc.stdout
    assert "PostgreSQL  strict" in proc.stdout and "SQLite      strict" in proc.stdout
