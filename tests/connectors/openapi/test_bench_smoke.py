"""bench/openapi.py imports and its child programs compile (the benchmark itself is not run here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def test_bench_module_loads() -> None:
    path = Path(__file__).resolve().parents[3] / "bench" / "openapi.py"
    spec = importlib.util.spec_from_file_location("bench_openapi", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    compile(module.GATEWAY_CHILD, "gateway_child", "exec")
    compile(module.FASTMCP_CHILD, "fastmcp_child", "exec")
    assert module.DEFAULT_SPEC.exists()
