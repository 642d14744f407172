"""bench/discovery.py's child (index build and memory) runs at a small size; the full bench is
`make bench`-style manual work, not part of the suite."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def test_bench_child_measures_a_small_index() -> None:
    path = Path(__file__).resolve().parents[2] / "bench" / "discovery.py"
    spec = importlib.util.spec_from_file_location("bench_discovery", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    built = module.build_child(1)
    assert built["tools"] == 1223
    assert built["build_s"] > 0 and built["incremental_s"] > 0
