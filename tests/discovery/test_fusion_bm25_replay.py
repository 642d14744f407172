"""bench/fusion_bm25.py replays the served fusion with a BM25 ranking added: its copy of the
fusion's arithmetic must stay the served one's (else every variant it measures is measured against
another fusion), and each way of adding BM25 must change what it says it changes."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

from gateway.discovery.fusion import CALIBRATION, fuse
from gateway.discovery.index import SearchHit
from tests.discovery.fusion_eval import Task


def _bench() -> ModuleType:
    name = "bench_fusion_bm25"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[2] / "bench" / "fusion_bm25.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _lists(rng: random.Random) -> tuple[list[SearchHit], list[SearchHit], list[SearchHit]]:
    tools = [f"t{i}" for i in range(40)]
    lex = sorted((SearchHit(n, rng.uniform(-0.5, 2.2)) for n in rng.sample(tools, 25)), key=lambda h: -h.score)
    sem = sorted((SearchHit(n, rng.uniform(0.1, 0.7)) for n in rng.sample(tools, 25)), key=lambda h: -h.score)
    bm = sorted((SearchHit(n, rng.uniform(1, 20)) for n in rng.sample(tools, 25)), key=lambda h: -h.score)
    return lex, sem, bm


def test_replay_without_bm25_is_the_served_fusion() -> None:
    fb = _bench()
    rng = random.Random(28)
    for trial in range(200):
        lex, sem, bm = _lists(rng)
        pack = trial % 2 == 1
        served = [h.name for h in fuse(lex, sem, 60, domain_pack=pack)]
        for mode in ("term", "zterm", "rrf", "boost", "conf", "sure"):
            # p = 0 through the copy of the arithmetic (not the shortcut to fuse): the same order.
            assert fb._fuse_extra(lex, sem, bm, CALIBRATION, pack, fb.Variant("stage1", mode, 0.0)) == served


def test_each_variant_moves_the_bm25_first() -> None:
    fb = _bench()
    lex = [SearchHit("a", 1.2), SearchHit("b", 1.0), SearchHit("c", 0.9), SearchHit("d", 0.5)]
    sem = [SearchHit("c", 0.6), SearchHit("a", 0.4), SearchHit("b", 0.35), SearchHit("e", 0.3), SearchHit("d", 0.2)]
    bm = [SearchHit("d", 9.0), SearchHit("a", 3.0)]
    task = Task("q", "", {"d"}, lex_candidates=lex, dense_candidates=sem, backfill=["a", "b"])
    extra = {"stage1": bm, "plain": bm, "raw": bm}
    served = fb.fused(task, extra, CALIBRATION, fb.Variant())
    assert served[:5] == [h.name for h in fuse(lex, sem, 5)] and served.index("d") > 1
    # A large enough term puts BM25's first first; the guard keeps it within the top 2 (the
    # lexical first keeps its floor of 3).
    assert fb.fused(task, extra, CALIBRATION, fb.Variant("plain", "term", 5.0))[0] == "d"
    guarded = fb.fused(task, extra, CALIBRATION, fb.Variant("plain", "guard", 2))
    assert guarded[1] == "d" and "a" in guarded[:3]
    # Agreement only acts when BM25's first is the cosine's first (here it is not).
    assert fb.fused(task, extra, CALIBRATION, fb.Variant("plain", "agree", 1)) == served
    assert fb._lift(["x", "y", "z"], "w", 2) == ["x", "w", "y", "z"]
    assert fb._lift(["x", "y", "z"], "z", 3) == ["x", "y", "z"]
