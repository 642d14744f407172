"""bench/soak.py stays runnable: a two-second soak prints its table and a verdict."""

from __future__ import annotations

import subprocess
import sys

from tests.support import REPO


def test_bench_soak_runs_briefly() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "soak.py"), "--seconds", "2", "--every", "1",
                           "--concurrency", "2"], capture_output=True, text=True, timeout=90, cwd=REPO)
    # Two seconds are all warm-up, so the verdict itself is not judged here (exit 1 = suspected).
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    rows = [line for line in lines if line.strip() and line.split()[0].isdigit()]
    assert len(rows) >= 2 and all(float(row.split()[-1]) > 0 for row in rows)  # calls went through
    assert lines[-1].startswith("after warm-up: RSS")


def test_bench_soak_faults_runs_briefly() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "soak.py"), "--faults", "--seconds", "12",
                           "--concurrency", "4"], capture_output=True, text=True, timeout=180, cwd=REPO)
    out = proc.stdout
    assert proc.returncode in (0, 1), out[-2000:] + proc.stderr[-2000:]
    phases = (["steady"], ["resets"], ["kill"], ["rest"])
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.split()[:1] in phases}
    assert set(rows) == {"steady", "resets", "kill", "rest"}
    for name, row in rows.items():
        assert int(row[1]) > 0, name  # requests went through in every phase
        # columns: up other notes rest db list; what the phase does not fault never failed
        assert row[3] == row[4] == row[6] == row[7] == "0", (name, row)
    assert rows["steady"][2] == "0" and rows["rest"][5] != "0"  # the REST faults were seen
    audit = next(line for line in out.splitlines() if line.startswith("audit rows"))
    assert audit.split()[2] == audit.split()[6], audit  # audit rows = answered requests
