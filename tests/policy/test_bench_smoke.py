"""bench/policy.py stays importable (the bench itself is run by `make bench`, not by the tests)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def test_bench_module_imports() -> None:
    path = Path(__file__).resolve().parents[2] / "bench" / "policy.py"
    spec = importlib.util.spec_from_file_location("bench_policy", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert callable(module.main) and callable(module.chain_row)
