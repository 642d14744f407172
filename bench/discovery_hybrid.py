"""Benchmark: ``find_tools`` CPU with hybrid ranking (``search.embeddings``) on vs off.

A :class:`~gateway.discovery.catalog_search.CatalogSearch` over a real catalog of GitHub's REST
API (1,223 tools) served under 1 and 5 connector prefixes (~1,200 and ~6,100 tools), against the
loopback embeddings stub (``tests/discovery/embeddings_stub.py``), run in a child process so that
its CPU is not counted here. Vectors have ``--dim`` dimensions (1,536 by default: the size of
OpenAI's text-embedding-3-small; the stub is asked for that many with ``dimensions``).

Per size, over every query of the labelled sets, ``--repeat`` times, the process's CPU time of:

* ``lexical``: ``find`` without embeddings (as today);
* ``hybrid, query vector cached``: ``query_vector`` answered by the LRU, then ``find`` with it: the
  lexical top 50, the cosine over every tool vector, the fusion and the result;
* ``hybrid, query vector fetched``: the same with the LRU off, so each call also POSTs the query
  to the stub and parses its answer (the client's CPU only; the wall time includes the stub's);

and the one-time cost of embedding every tool (requests, wall time: mostly the pure-Python stub),
and the memory of the vectors (float32).

Run: ``.venv/bin/python bench/discovery_hybrid.py [--repeat 3] [--dim 1536] [--sizes 1,5]``.

``--recall`` measures instead what the fusion does to recall@1/@5 on the labelled sets of
``docs/discovery.md`` (GitHub, 1,223 tools), lexical alone against hybrid at each ``--weights``:
against the stub by default (a deliberately weak stand-in: a bag of words with a tiny synonym
table), or against a real model with ``--url URL --model M [--api-key-env VAR] [--dimensions N]``,
which is how an operator should choose ``weight`` (or decide against embeddings) for a model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from connectors.base import ToolSpec  # noqa: E402
from gateway.discovery.catalog_search import CatalogSearch  # noqa: E402
from gateway.discovery.embeddings import safe_url  # noqa: E402
from gateway.discovery.hybrid import Semantic  # noqa: E402
from gateway.endpoints.config import EmbeddingsConfig  # noqa: E402
from tests.discovery.labelled import BLIND, DEV, FRESH, HELDOUT, TASKS, github_corpus, load_tasks  # noqa: E402
from tests.test_catalog import Fake, _catalog  # noqa: E402


class GitHub(Fake):
    """GitHub's operations as one connector's tools (local names), with their tags and paths."""

    def __init__(self, name: str, tools: tuple[dict[str, Any], ...], origins: dict[str, tuple[tuple[str, ...], str]]
                 ) -> None:
        super().__init__(name, [t["name"] for t in tools])
        self.wires = {t["name"]: t for t in tools}
        self.origins = origins

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec(n, self.wires[n]) for n in self.tool_names]

    def tool_origin(self, name: str) -> tuple[tuple[str, ...], str]:
        return self.origins.get(name, ((), ""))


def _stub() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.discovery.embeddings_stub"], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())["url"]


async def _cpu(queries: list[str], repeat: int, call: Callable[[str], Awaitable[Any]]) -> tuple[float, float, float]:
    """(p50 CPU ms, p99 CPU ms, p50 wall ms) of *call* over the queries."""
    for q in queries:  # warm: document frequencies, the compiled matrix, the LRU when on
        await call(q)
    cpu, wall = [], []
    for _ in range(repeat):
        for q in queries:
            t0, c0 = time.perf_counter(), time.process_time()
            await call(q)
            cpu.append((time.process_time() - c0) * 1000)
            wall.append((time.perf_counter() - t0) * 1000)
    cpu.sort()
    return statistics.median(cpu), cpu[int(len(cpu) * 0.99) - 1], statistics.median(wall)


async def measure(copies: int, url: str, dim: int, repeat: int, queries: list[str]) -> dict[str, Any]:
    corpus = github_corpus("")
    origins = {d.name: (tuple(d.tags.split()), d.path) for d in corpus.docs}
    catalog = _catalog(*((GitHub(f"gh{i}", corpus.tools, origins), f"gh{i}_") for i in range(copies)))
    lexical = CatalogSearch(catalog, packs=("github",))
    lexical.refresh()
    out: dict[str, Any] = {"tools": len(lexical.prints)}

    config = EmbeddingsConfig(url=url, model="stub", dimensions=dim, batch=256, index_timeout_s=120,
                              query_cache=4096)
    semantic = Semantic(config, "bench", env={})
    hybrid = CatalogSearch(catalog, semantic, packs=("github",))
    hybrid.refresh()
    t0 = time.perf_counter()
    embedded = await hybrid.embed()
    out["embed_s"], out["embedded"], out["requests"] = time.perf_counter() - t0, embedded, semantic.client.requests
    out["vectors_mb"] = len(semantic.store) * dim * 4 / 2**20

    async def off(q: str) -> Any:
        return lexical.find(q)

    async def on(q: str) -> Any:
        return hybrid.find(q, vector=await hybrid.query_vector(q))

    out["lexical"] = await _cpu(queries, repeat, off)
    out["cached"] = await _cpu(queries, repeat, on)
    uncached = Semantic(config.model_copy(update={"query_cache": 0}), "bench", env={})
    uncached.store = semantic.store
    hybrid.semantic = uncached
    out["fetched"] = await _cpu(queries, max(1, repeat // 3), on)
    await semantic.close()
    await uncached.close()
    return out


async def recall(url: str, args: argparse.Namespace) -> int:
    """Recall@1/@5 per labelled set, lexical vs hybrid at each weight (see the module doc)."""
    corpus = github_corpus("")
    origins = {d.name: (tuple(d.tags.split()), d.path) for d in corpus.docs}
    catalog = _catalog((GitHub("gh", corpus.tools, origins), ""))
    config = EmbeddingsConfig(url=url, model=args.model, api_key_env=args.api_key_env, dimensions=args.dimensions,
                              batch=128, timeout_s=30, index_timeout_s=120, query_cache=0)
    semantic = Semantic(config, "bench")
    search = CatalogSearch(catalog, semantic, packs=("github",))
    search.refresh()
    await search.embed()
    if len(semantic.store) != len(search.prints):
        print(f"only {len(semantic.store)} of {len(search.prints)} tools embedded (see the warnings)")
        return 1
    weights = [float(w) for w in args.weights.split(",")]
    print(f"recall over the GitHub catalog ({len(search.prints)} tools), model {args.model!r} at {safe_url(url)}")
    print(f"{'set':10}{'tasks':>6}{'lexical @1/@5':>16}" + "".join(f"{f'w={w:g} @1/@5':>16}" for w in weights))
    for label, path in (("main", TASKS), ("held-out", HELDOUT), ("dev", DEV), ("fresh", FRESH), ("blind", BLIND)):
        tasks = load_tasks(path)
        at = {w: [0, 0] for w in [0.0, *weights]}
        for task in tasks:
            want = {corpus.name_of[op] for op in task["ops"]}
            vector = await search.query_vector(task["query"])
            assert vector is not None, "a query failed (see the warnings)"
            for w in at:
                semantic.config = config.model_copy(update={"weight": w}) if w else config
                found = search.find(task["query"], 5, vector=vector if w else None)
                top = [t["name"] for t in found["structuredContent"]["tools"]]
                at[w][0] += bool(top) and top[0] in want
                at[w][1] += bool(want & set(top))
        n = len(tasks)
        print(f"{label:10}{n:>6}" + "".join(f"{at[w][0] / n:>10.3f}{at[w][1] / n:>6.3f}" for w in at))
    await semantic.close()
    return 0


async def main_async(args: argparse.Namespace) -> int:
    if args.recall:
        if args.url:
            return await recall(args.url, args)
        proc, url = _stub()
        try:
            return await recall(url, args)
        finally:
            proc.terminate()
            proc.wait()
    queries = [t["query"] for path in (TASKS, HELDOUT, DEV, FRESH, BLIND) for t in load_tasks(path)]
    proc, url = _stub()
    try:
        results = [await measure(int(c), url, args.dim, args.repeat, queries) for c in args.sizes.split(",")]
    finally:
        proc.terminate()
        proc.wait()
    print(f"find_tools CPU per call, {len(queries)} queries × {args.repeat}; vectors of {args.dim} dimensions; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'tools':>7}{'mode':>32}{'p50 CPU':>10}{'p99 CPU':>10}{'p50 wall':>10}")
    for r in results:
        for key, label in (("lexical", "lexical (embeddings off)"), ("cached", "hybrid, query vector cached"),
                           ("fetched", "hybrid, query vector fetched")):
            p50, p99, wall = r[key]
            print(f"{r['tools']:>7}{label:>32}{p50:>8.2f}ms{p99:>8.2f}ms{wall:>8.2f}ms")
    print()
    for r in results:
        print(f"{r['tools']} tools: embedded {r['embedded']} in {r['requests']} requests, {r['embed_s']:.1f} s "
              f"(stub time included); vectors {r['vectors_mb']:.1f} MB")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="passes over the queries")
    parser.add_argument("--dim", type=int, default=1536, help="vector dimensions")
    parser.add_argument("--sizes", default="1,5", help="GitHub catalogs under distinct prefixes, per run")
    parser.add_argument("--recall", action="store_true", help="measure recall on the labelled sets instead")
    parser.add_argument("--url", help="--recall: a real /v1/embeddings URL (default: the stub)")
    parser.add_argument("--model", default="stub", help="--recall: the model")
    parser.add_argument("--api-key-env", help="--recall: the variable holding the key")
    parser.add_argument("--dimensions", type=int, help="--recall: dimensions to ask for")
    parser.add_argument("--weights", default="0.5,1", help="--recall: fusion weights to compare")
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
