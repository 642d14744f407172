"""bench/discovery_hybrid.py measures at a small size (1,223 tools, 32 dimensions, two queries),
against the in-process stub, so the bench does not rot; the full run is manual."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.discovery.embeddings_stub import EmbeddingsStub

BENCH = Path(__file__).resolve().parents[2] / "bench" / "discovery_hybrid.py"


async def test_hybrid_bench_measures_both_modes_at_a_small_size() -> None:
    spec = importlib.util.spec_from_file_location("bench_discovery_hybrid", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    stub = EmbeddingsStub()
    url = await stub.start()
    try:
        out = await module.measure(1, url, 32, 1, ["list open pull requests", "star a repository"])
    finally:
        await stub.stop()
    # 1,223 tools, two views each (hybrid.tool_texts), 256 texts a request: 10 requests.
    assert out["tools"] == out["embedded"] == 1223 and out["requests"] == 10
    assert all(out[mode][0] > 0 for mode in ("lexical", "cached", "fetched"))
