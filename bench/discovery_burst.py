"""Benchmark: a burst of concurrent ``find_tools`` against the local model, queued vs bounded.

One :class:`~gateway.discovery.catalog_search.CatalogSearch` over GitHub's REST API (1,223 tools,
its pack) with the local model (vectors from ``--cache-dir``, made on the first run), then bursts
of ``--burst`` find_tools at once (distinct labelled queries, the query-vector LRU off: each one
needs the model), each as the endpoint serves it (``query_vector`` then ``find``), under two
settings side by side in one run:

* ``queue_s 60``: every query waits for its vector (up to ``timeout_s``, 2 s): what the endpoint
  did before ``search.local.queue_s``;
* ``queue_s 0.25`` (the default): a query that would wait longer than that behind the queries
  already queued for the model is ranked lexically at once (reason ``busy``).

Printed per setting: wall-clock latency of the calls p50 / p90 / p99 / max, how many were ranked
with the model, lexically because busy, or after a timeout, and recall@5 of the burst's queries
(the price of answering some of them lexically).

Run: ``PYTHONPATH=$PWD .venv/bin/python bench/discovery_burst.py [--burst 200] [--cache-dir DIR]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from discovery_hybrid import GitHub  # noqa: E402

from gateway.discovery import local_model  # noqa: E402
from gateway.discovery.catalog_search import CatalogSearch  # noqa: E402
from gateway.discovery.hybrid import Semantic  # noqa: E402
from gateway.endpoints.config import LocalModelConfig  # noqa: E402
from gateway.telemetry import metrics  # noqa: E402
from tests.discovery.labelled import BLIND2, BLIND3, BLIND4, github_corpus, load_tasks  # noqa: E402
from tests.test_catalog import _catalog  # noqa: E402


def _fallbacks(endpoint: str, reason: str) -> float:
    return metrics.REGISTRY.get_sample_value("mcp_gateway_search_lexical_fallbacks_total",
                                             {"endpoint": endpoint, "reason": reason}) or 0.0


async def burst(search: CatalogSearch, tasks: list[tuple[str, set[str]]], endpoint: str) -> dict[str, Any]:
    async def one(task: tuple[str, set[str]]) -> tuple[float, bool]:
        query, wanted = task
        started = time.perf_counter()
        vector = await search.query_vector(query)
        names = [t["name"] for t in search.find(query, 5, vector=vector)["structuredContent"]["tools"]]
        return time.perf_counter() - started, bool(wanted & set(names))

    before = {r: _fallbacks(endpoint, r) for r in ("busy", "timeout")}
    got = await asyncio.gather(*(one(t) for t in tasks))
    walls = sorted(w for w, _ in got)

    def pct(q: float) -> float:
        return walls[min(len(walls) - 1, round(q * (len(walls) - 1)))] * 1e3

    lexical = {r: int(_fallbacks(endpoint, r) - before[r]) for r in before}
    return {"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "max": walls[-1] * 1e3,
            "model": len(tasks) - sum(lexical.values()), **lexical,
            "recall5": statistics.mean(found for _, found in got)}


async def main_async(args: argparse.Namespace) -> int:
    corpus = github_corpus("")
    origins = {d.name: (tuple(d.tags.split()), d.path) for d in corpus.docs}
    catalog = _catalog((GitHub("gh", corpus.tools, origins), "gh_"))
    encoder = local_model.LocalEncoder(cache_dir=args.cache_dir)
    named = github_corpus("gh_")  # the tools' names as the prefixed catalog serves them
    tasks = [(t["query"], {named.name_of[op] for op in t["ops"]})
             for name in (BLIND2, BLIND3, BLIND4) for t in load_tasks(name)][:args.burst]
    rows = {}
    try:
        for queue_s in (60.0, 0.25):
            endpoint = f"burst-{queue_s}"
            semantic = Semantic(LocalModelConfig(queue_s=queue_s, query_cache=0), endpoint, encoder=encoder)
            search = CatalogSearch(catalog, semantic, packs=("github",))
            search.refresh()
            t0 = time.process_time()
            await search.embed()
            if queue_s == 60.0:
                print(f"{len(search.prints)} tools, vectors ready ({time.process_time() - t0:.1f} s CPU here); "
                      f"bursts of {len(tasks)} distinct queries at once", flush=True)
            await semantic.query("warm the model up")
            rows[queue_s] = await burst(search, tasks, endpoint)
    finally:
        encoder.shutdown()
    print(f"{'setting':<14}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'max ms':>9}{'model':>7}{'busy':>6}"
          f"{'timeout':>9}{'recall@5':>10}")
    for queue_s, r in rows.items():
        print(f"{'queue_s ' + format(queue_s, 'g'):<14}{r['p50']:>9.1f}{r['p90']:>9.1f}{r['p99']:>9.1f}"
              f"{r['max']:>9.1f}{r['model']:>7}{r['busy']:>6}{r['timeout']:>9}{r['recall5']:>10.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--burst", type=int, default=200, help="find_tools calls at once")
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/mcp-gateway-burst-vectors"),
                        help="the tool vectors' disk cache (kept between runs)")
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
