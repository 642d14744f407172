"""bench/telemetry.py runs end to end with tiny sizes (the real run is `make bench`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "telemetry.py"


async def test_bench_runs_with_tiny_sizes(capsys):
    spec = importlib.util.spec_from_file_location("bench_telemetry", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    await module.run(calls=20, rounds=1)
    out = capsys.readouterr().out
    assert "added p50 ms" in out and "tools/call (openapi)" in out and "prompts/get (static)" in out
