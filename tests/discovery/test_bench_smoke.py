"""bench/discovery.py's child (index build and memory) and its --semantic stages run at a small
size; the full bench is `make bench`-style manual work, not part of the suite."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from types import ModuleType


def _bench() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "bench" / "discovery.py"
    spec = importlib.util.spec_from_file_location("bench_discovery", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_child_measures_a_small_index() -> None:
    module = _bench()
    built = module.build_child(1)
    assert built["tools"] == 1223
    assert built["build_s"] > 0 and built["incremental_s"] > 0


def test_bench_semantic_stages_on_a_small_catalog(tmp_path: Path) -> None:
    """The --semantic path (local model, installed by the Makefile) times every stage of a hybrid
    find_tools; the whole includes the encode; the first sync filled the disk cache, a second
    encoder reads it back (the reruns the bench relies on)."""
    module = _bench()
    from gateway.discovery import SearchIndex
    from tests.discovery.labelled import github_corpus

    corpus = github_corpus("gh_")
    docs = {d.name: d for d in corpus.docs[:40]}
    index = SearchIndex(("github",))
    index.sync(docs.values())
    tools = {t["name"]: t for t in corpus.tools if t["name"] in docs}
    queries = ["list the releases of a repository", "delete a webhook"]
    stages = module.semantic_latency(index, docs, tools, queries, 1, tmp_path)
    assert set(stages) == {"encode", "lexical", "dense", "fuse", "rest", "cached", "whole"}
    assert all(len(v) == len(queries) for v in stages.values())
    assert sum(stages["whole"]) >= sum(stages["encode"]) > 0
    semantic, encoder = module._semantic(index, docs, tmp_path)
    prints = dict(index.fingerprints)
    embedded, _, _ = asyncio.run(module._sync_probed(semantic, prints, lambda n: module.tool_texts(docs[n])))
    encoder.shutdown()
    assert embedded == len(docs) and encoder.cached == 2 * len(docs)  # two views a tool (hybrid.tool_texts)
