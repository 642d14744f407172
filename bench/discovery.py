"""Benchmark: tool search (``discovery: search``) at catalog scale.

Reports, against the issue's targets:

* index build time and the memory the index adds, for ~6,000 tools (GitHub's 1,223 operations
  served under five connector prefixes, so names and texts are real, not generated filler). Memory
  is the process's resident set before and after building, measured in a fresh child process with
  the tool texts already in memory, so it counts the index (SQLite FTS5 + the Python maps) alone;
* ``find_tools`` latency p50/p99 at that size: ranking plus building the result (full Tool objects
  and text), over every query of the labelled sets, repeated. Wall time and the process's CPU time
  are both printed, with the load average: on a shared machine wall time includes waiting for a
  core; CPU time is the work one query costs. The target is judged on CPU time;
* recall@1/@5 over the GitHub catalog on every labelled set side by side: the sets the ranker was
  tuned on (main, held-out, dev, fresh, blind, blind-2, blind-3, blind-4) and the measurement-only
  one it never is (blind-5, when merged), so the gap between tuned and new wording stays in view.
  With ``--baseline REF`` the same sets are also ranked by the ranker of git commit REF (exported
  to a temporary directory and run in a child process), for a before/after table:
  ``--baseline 4443759`` is the ranker before the blind set was written;
* the size of ``tools/list`` for the whole GitHub catalog vs a ``discovery: search`` endpoint
  (bytes of JSON and an estimate of tokens at 4 characters a token: no tokenizer ships offline).

With ``--semantic``, the offline semantic signal (the local model, :mod:`gateway.discovery.local_model`)
at the same size, printed next to the lexical figures in one table:

* the tool vectors' build as an endpoint runs it in the background (``Semantic.sync`` in the
  encoder's thread: serving is not blocked), CPU (all threads) and wall, in a fresh child process,
  through the encoder's disk cache in ``--cache-dir`` (default ``bench/.cache/discovery-vectors``,
  gitignored) so reruns are fast; the first, uncached build is recorded there by the run that had
  to encode every text (``--cold``: encode again, with an empty temporary cache) and printed by
  later runs. The copies share their texts (the prefix is not embedded): 1,223 texts are encoded;
* the memory the model, the vector matrix and the encoder's caches add (resident set, after
  ``malloc_trim``: the forward passes' freed activations are not held; the figure before it is
  shown too); the total leaves out the file pages of the model's mapping (the word embeddings'
  rows a build read stay resident as page cache the kernel may reclaim), shown apart;
* the event loop's longest turn (CPU) while the vectors are built: what the build keeps serving waiting;
* incremental syncs: 100 tools gone and back (the same docs: their vectors are known by text, the
  matrix is updated), and 100 tools whose description changed (new docs: the lexical rows and
  profiles are remade, and both views of each go through the model in the encoder's thread, with
  a second encoder without the disk cache so every run encodes them: CPU, wall, the loop's longest turn);
* per query, CPU time of each stage of ``find_tools`` as ``CatalogSearch.find`` runs it: query
  encode (the LRU missed: every query is encoded), lexical top 50, dense top 50, fusion, back-fill
  and result; the whole p50/p99, and the same with the query vector cached.

With ``--catalog stripe`` (or ``twilio``, ``opsgenie``, ``vikunja``: tuning catalogs of issue 28) the
latency and build rows are for that catalog instead, served without a pack (the general core alone,
as an operator's own API is) in as many copies as bring it nearest GitHub's 6,115 tools (Stripe:
13 × 468), timed on its task set's queries; the recall table stays GitHub's.

Run: ``.venv/bin/python bench/discovery.py [--catalog github] [--copies 5] [--repeat 20] [--baseline REF]
[--semantic [--semantic-repeat 3] [--cache-dir DIR] [--cold]]``.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gateway.discovery import SearchIndex  # noqa: E402
from gateway.discovery.hybrid import CANDIDATES, Semantic, fuse, query_text, tool_texts  # noqa: E402
from gateway.discovery.index import SearchHit, ToolDoc  # noqa: E402
from gateway.discovery.local_model import LocalEncoder  # noqa: E402
from gateway.discovery.tools import CALL_TOOL, DEFAULT_LIMIT, FIND_TOOLS, MAX_LIMIT, find_result  # noqa: E402
from gateway.endpoints.config import LocalModelConfig  # noqa: E402
from tests.discovery.labelled import (  # noqa: E402
    BLIND,
    BLIND2,
    BLIND3,
    BLIND4,
    BLIND5,
    DEV,
    FRESH,
    HELDOUT,
    TASKS,
    Corpus,
    evaluate,
    github_corpus,
    load_tasks,
)

TARGET_RECALL5 = 0.9
TARGET_P50_MS = 5.0
TARGET_SEMANTIC_P50_MS = 10.0  # find_tools with the offline semantic signal
TARGET_INDEX_MB = 50.0
TARGET_SEMANTIC_MB = 100.0  # the index with the semantic side (the model's weights included)
TARGET_BUILD_S = 2.0  # or in the background without blocking serving (the vectors are)
TARGET_SYNC_MS = 100.0
CACHE_DIR = REPO / "bench" / ".cache" / "discovery-vectors"  # gitignored: the local model's vector cache
PACKS = ("github",)  # the GitHub catalog is served with its pack (search: {packs: [github]})
# (label, file, tuned on?): the ranker may be tuned on all eight (fresh and blind since round 3,
# blind-2 since round 4, blind-3 since round 5, blind-4 since round 6); a measurement-only set (an
# independent author's, merged separately) is listed with False, left out while its file is absent.
SETS = tuple(s for s in (("main", TASKS, True), ("held-out", HELDOUT, True), ("dev", DEV, True),
                         ("fresh", FRESH, True), ("blind", BLIND, True), ("blind-2", BLIND2, True),
                         ("blind-3", BLIND3, True), ("blind-4", BLIND4, True), ("blind-5", BLIND5, False)) if s[1].exists())

# --catalog: the latency rows for an endpoint without a pack (an operator's own API is read by the
# general core alone), on a tuning catalog of issue 28 served in copies up to about GitHub's 6,115
# tools. Measurement-only catalogs are not offered: their queries are never read here.
CORE_CATALOGS = {"stripe": ("stripe.json.gz", "stripe-tasks.yaml"), "twilio": ("twilio-api.json.gz", "twilio-api-tasks.yaml"),
                 "opsgenie": ("opsgenie.json.gz", "opsgenie-tasks.yaml"), "vikunja": ("vikunja.json.gz", "vikunja-tasks.yaml")}
GITHUB_TOOLS = 6115  # 5 × GitHub's 1,223: the size a core-only catalog is copied up to


def corpus(catalog: str, prefix: str) -> Corpus:
    """*catalog*'s tools under *prefix*, mapped by the OpenAPI connector as a connector serves them."""
    if catalog == "github":
        return github_corpus(prefix)
    from connectors.openapi.config import OpenAPIConfig
    from connectors.openapi.loader import check_version
    from connectors.openapi.mapping import map_spec
    from gateway.discovery.openapi import operation_docs

    path = REPO / "tests" / "data" / "openapi" / CORE_CATALOGS[catalog][0]
    doc = json.loads(gzip.decompress(path.read_bytes()))
    mapped = map_spec(doc, check_version(doc, str(path)), OpenAPIConfig(name=catalog, type="openapi", spec=str(path)))
    return Corpus(tuple(operation_docs(doc, mapped.operations, prefix)),
                  tuple({**op.definition, "name": prefix + op.name} for op in mapped.operations), {})


def packs(catalog: str) -> tuple[str, ...]:
    return PACKS if catalog == "github" else ()


def copies_for(catalog: str, copies: int | None) -> int:
    """*copies*, else GitHub's 5, else as many as bring the catalog nearest 6,115 tools."""
    if copies is not None:
        return copies
    return 5 if catalog == "github" else max(1, round(GITHUB_TOOLS / len(corpus(catalog, "").docs)))


def catalog_queries(catalog: str) -> list[str]:
    """The queries timed: every GitHub set's, or the core catalog's task set (a tuning set)."""
    if catalog == "github":
        return [t["query"] for _, path, _ in SETS for t in load_tasks(path)]
    return [t["query"] for t in load_tasks(REPO / "tests" / "data" / "discovery" / CORE_CATALOGS[catalog][1])]


# Runs in a child process whose sys.path starts with a git export of another commit: that commit's
# ranker and corpus mapping, this tree's task files. Prints {label: [recall@1, recall@5]}.
_BASELINE = """
import importlib.util, json, sys
sys.path.insert(0, sys.argv[1])
from gateway.discovery import SearchIndex
from pathlib import Path
import inspect
# This tree's labelled-set helpers (tests/discovery/labelled.py, not in the export), over the
# export's gateway and connectors.
spec = importlib.util.spec_from_file_location("labelled", sys.argv[3])
labelled = sys.modules["labelled"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(labelled)
evaluate, github_corpus, load_tasks = labelled.evaluate, labelled.github_corpus, labelled.load_tasks
corpus = github_corpus("")
# The GitHub sets are read with the github pack where the ranker has packs (issue 28), as before otherwise.
index = SearchIndex(("github",)) if "packs" in inspect.signature(SearchIndex).parameters else SearchIndex()
index.sync(corpus.docs)
out = {}
for label, path in json.loads(sys.argv[2]):
    r = evaluate(index, corpus, load_tasks(Path(path)))
    out[label] = [r.at1, r.at5]
print(json.dumps(out))
"""


def _trim() -> None:
    """Give the C heap's free pages back (glibc's malloc_trim): the forward passes' freed
    activations otherwise stay in the resident set, which would count them as held."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _file_mb() -> float:
    """The resident pages mapped from files (the model's word embeddings are read from a mapping:
    the rows a build touched stay resident, but as page cache the kernel may take back)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[2])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def build_child(copies: int, catalog: str = "github") -> dict[str, float]:
    """Runs in a fresh process: build time and memory added by the index for *copies* × *catalog*."""
    corpora = [corpus(catalog, f"gh{i}_") for i in range(copies)]
    docs = [d for c in corpora for d in c.docs]
    gc.collect()
    before = _rss_mb()
    t0 = time.perf_counter()
    index = SearchIndex(packs(catalog))
    index.sync(docs)
    build = time.perf_counter() - t0
    gc.collect()
    after = _rss_mb()
    t0 = time.perf_counter()
    index.sync(docs[:-100])  # incremental: 100 tools gone
    index.sync(docs)  # and back
    incremental = time.perf_counter() - t0
    # 100 tools whose text changed (new doc objects, as a connector's new spec gives): one sync.
    changed = docs[:-100] + [replace(d, description=d.description + " (changed)") for d in docs[-100:]]
    t0 = time.perf_counter()
    index.sync(changed)
    changed_s = time.perf_counter() - t0
    return {"tools": len(index), "build_s": build, "index_mb": after - before, "incremental_s": incremental,
            "changed_s": changed_s}


def baseline(ref: str) -> dict[str, list[float]]:
    """Recall@1/@5 of the ranker at git commit *ref* on this tree's labelled sets."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "gateway", "connectors",
                                  "tests/data/openapi"], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        sets = json.dumps([(label, str(path)) for label, path, _ in SETS])
        labelled = str(REPO / "tests" / "discovery" / "labelled.py")
        out = subprocess.run([sys.executable, "-c", _BASELINE, tmp, sets, labelled], check=True, capture_output=True,
                             text=True, cwd=tmp)
    result: dict[str, list[float]] = json.loads(out.stdout)
    return result


# -- the offline semantic side (--semantic) ---------------------------------------------------------
def _semantic(index: SearchIndex, docs: dict[str, ToolDoc], cache_dir: Path) -> tuple[Semantic, LocalEncoder]:
    """A :class:`Semantic` over the local model for *index*'s tools (vectors not made yet)."""
    encoder = LocalEncoder(cache_dir=cache_dir)
    return Semantic(LocalModelConfig(), "bench", encoder=encoder), encoder


async def _sync_probed(semantic: Semantic, prints: dict[str, str], texts: Any) -> tuple[int, float, float]:
    """``semantic.sync`` with a probe on the event loop: (tools embedded, the loop thread's CPU
    seconds over the sync, the probe's own wake-ups included, the most CPU one probe turn waited for, i.e. the longest the loop was
    kept from serving by the sync's own work between batches). CPU time, not wall: a loaded machine
    delays a turn without the sync being the cause."""
    done = asyncio.Event()
    stall = 0.0

    async def probe() -> None:
        nonlocal stall
        while not done.is_set():
            c0 = time.thread_time()
            await asyncio.sleep(0.001)
            stall = max(stall, time.thread_time() - c0)

    task = asyncio.create_task(probe())
    c0 = time.thread_time()
    try:
        embedded = await semantic.sync(prints, texts)
    finally:
        done.set()
    loop_cpu = time.thread_time() - c0
    await task
    return embedded, loop_cpu, stall


def semantic_child(copies: int, cache_dir: Path, catalog: str = "github") -> dict[str, float]:
    """Runs in a fresh process: the background vector build of *copies* × GitHub with the local
    model (as :meth:`CatalogSearch.embed` runs it: ``Semantic.sync`` in the encoder's thread, the
    event loop free meanwhile), CPU (every thread of the process) and wall, and the memory it adds.
    The five copies share their texts (the prefix is not embedded), so 1,223 texts are encoded."""
    corpora = [corpus(catalog, f"gh{i}_") for i in range(copies)]
    docs = {d.name: d for c in corpora for d in c.docs}
    index = SearchIndex(packs(catalog))
    index.sync(docs.values())
    prints = dict(index.fingerprints)
    gc.collect()
    rss0, file0 = _rss_mb(), _file_mb()
    semantic, encoder = _semantic(index, docs, cache_dir)
    t0, c0 = time.perf_counter(), time.process_time()
    encoder.load()
    load_wall, load_cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_model = _rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    embedded, _, stall = asyncio.run(_sync_probed(semantic, prints, lambda name: tool_texts(docs[name])))
    semantic.rank(np.zeros(384, dtype=np.float32), prints, 1, None)  # compiles the matrix searched
    build_wall, build_cpu = time.perf_counter() - t0, time.process_time() - c0
    gc.collect()
    rss_peak = _rss_mb()
    _trim()
    rss1 = _rss_mb()
    mapped = _file_mb() - file0
    # Incremental: 100 tools gone and back (the lexical index's share is measured by build_child);
    # their vectors are kept by fingerprint, so none is encoded again: the matrix is recompiled.
    incremental = 0.0
    for part in (list(docs.values())[:-100], list(docs.values())):
        index.sync(part)
        now = dict(index.fingerprints)
        c0 = time.process_time()
        asyncio.run(semantic.sync(now, lambda name: tool_texts(docs[name])))
        semantic.rank(np.zeros(384, dtype=np.float32), now, 1, None)
        incremental += time.process_time() - c0
    # 100 tools whose text changed: their two views go through the model (the encoder's thread, in
    # the background: serving goes on, lexically for these tools until their vectors land). A
    # second encoder without the disk cache, so a rerun encodes them again and the cache is not grown.
    changed = {**docs, **{n: replace(d, description=d.description + " (changed)") for n, d in list(docs.items())[-100:]}}
    index.sync(changed.values())
    now = dict(index.fingerprints)
    fresh = LocalEncoder()
    fresh.load()
    semantic.client = fresh
    t0, c0 = time.perf_counter(), time.process_time()
    changed_embedded, _, changed_stall = asyncio.run(_sync_probed(semantic, now, lambda name: tool_texts(changed[name])))
    semantic.rank(np.zeros(384, dtype=np.float32), now, 1, None)
    changed_wall, changed_cpu = time.perf_counter() - t0, time.process_time() - c0
    fresh.shutdown()
    encoder.shutdown()
    return {"tools": len(prints), "embedded": embedded, "from_disk": encoder.cached, "load_cpu_s": load_cpu,
            "load_wall_s": load_wall, "build_cpu_s": build_cpu, "build_wall_s": build_wall,
            "loop_stall_ms": stall * 1000,
            "model_mb": rss_model - rss0, "vectors_mb": semantic.store._matrix.nbytes / 2**20,
            "semantic_mb": rss1 - rss_model, "mapped_mb": mapped, "semantic_untrimmed_mb": rss_peak - rss_model, "incremental_s": incremental,
            "changed_embedded": changed_embedded, "changed_cpu_s": changed_cpu, "changed_wall_s": changed_wall,
            "changed_stall_ms": changed_stall * 1000}


def semantic_build(copies: int, cache_dir: Path, cold: bool,
                   catalog: str = "github") -> tuple[dict[str, float], dict[str, float] | None]:
    """This run's build (child process; *cold*: with an empty temporary cache) and the first,
    uncached one (recorded in *cache_dir* by the last uncached run; None while there is none)."""
    with tempfile.TemporaryDirectory() as empty:
        out = subprocess.run([sys.executable, __file__, "--semantic-child", "--copies", str(copies), "--catalog", catalog,
                              "--cache-dir", empty if cold else str(cache_dir)], check=True, capture_output=True, text=True)
    built: dict[str, float] = json.loads(out.stdout)
    cache_dir.mkdir(parents=True, exist_ok=True)
    record = cache_dir / (f"first-build-{copies}.json" if catalog == "github" else f"first-build-{catalog}-{copies}.json")
    if not built["from_disk"]:  # every text went through the model: this run is the uncached one
        record.write_text(json.dumps({**built, "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}))
    first = json.loads(record.read_text()) if record.exists() else None
    return built, first


def semantic_latency(index: SearchIndex, docs: dict[str, ToolDoc], tools: dict[str, Any], queries: list[str],
                     repeat: int, cache_dir: Path) -> dict[str, list[float]]:
    """CPU ms per query of each stage of ``find_tools`` with the semantic side, as
    :meth:`CatalogSearch.find` runs it (lexical top n without back-fill, dense top n, fusion,
    back-fill, result), the query vector encoded each time (an LRU miss: the worst case) from the
    text :meth:`CatalogSearch.query_vector` embeds (:func:`~gateway.discovery.hybrid.query_text`,
    made each time too: the "encode" stage counts both)."""
    semantic, encoder = _semantic(index, docs, cache_dir)
    prints = dict(index.fingerprints)
    asyncio.run(semantic.sync(prints, lambda name: tool_texts(docs[name])))
    model = encoder.load()
    n, limit, pack = min(max(DEFAULT_LIMIT, CANDIDATES), MAX_LIMIT), DEFAULT_LIMIT, bool(index.lexicon.packs)
    stages: dict[str, list[float]] = {k: [] for k in ("encode", "lexical", "dense", "fuse", "rest", "cached", "whole")}
    clock = time.process_time
    for _ in range(repeat):
        for q in queries:
            c0 = clock()
            # What CatalogSearch.query_vector embeds: the query without its values (its parse counted here).
            vector = model.encode([" ".join(query_text(q, index.lexicon).split())])[0]
            c1 = clock()
            lexical = index.search(q, n, None, fill=False)
            c2 = clock()
            nearest = semantic.rank(vector, prints, n, None)
            c3 = clock()
            hits = fuse(lexical, nearest, limit, semantic.config.weight, domain_pack=pack)
            c4 = clock()
            if len(hits) < limit:  # CatalogSearch.find's back-fill
                found = {h.name for h in hits}
                floor = min((h.score for h in hits), default=0.0)
                hits += [SearchHit(h.name, floor) for h in index.search(q, limit) if h.name not in found][:limit - len(hits)]
            find_result(hits, tools)
            c5 = clock()
            for key, ms in (("encode", c1 - c0), ("lexical", c2 - c1), ("dense", c3 - c2), ("fuse", c4 - c3),
                            ("rest", c5 - c4), ("cached", c5 - c1), ("whole", c5 - c0)):
                stages[key].append(ms * 1000)
    encoder.shutdown()
    return {k: sorted(v) for k, v in stages.items()}


def _pct(values: list[float], q: float) -> float:
    """The *q* quantile of sorted *values* (the p99 convention used above)."""
    return statistics.median(values) if q == 0.5 else values[max(0, int(len(values) * q) - 1)]


def semantic_table(lexical: dict[str, float], built: dict[str, float], first: dict[str, float] | None,
                   lexical_cpu: list[float], stages: dict[str, list[float]], repeat: int) -> None:
    """Lexical alone next to lexical + the offline semantic signal, against the targets (CPU ms)."""
    def ok(value: float, target: float) -> str:
        return "met" if value <= target else "NOT met"

    whole50 = statistics.median(stages["whole"])
    # What the process holds: the page cache behind the model's mapping is the kernel's to reclaim.
    held = lexical["index_mb"] + built["semantic_mb"] + built["model_mb"] - built["mapped_mb"]
    uncached = "not recorded: run once with an empty --cache-dir" if first is None else (
        f"{first['build_cpu_s']:.1f} s CPU, {first['build_wall_s']:.1f} s wall, {first['embedded']} tools "
        f"({first['when']})")
    print(f"lexical alone vs with the offline semantic signal (all-MiniLM-L6-v2, numpy, one BLAS thread), "
          f"{built['tools']} tools; CPU time; {repeat} passes with the query vector encoded each time (LRU miss)")
    print(f"{'measure':44}{'lexical':>12}{'+semantic':>12}{'target':>14}{'':>9}")
    lex_build = lexical["build_s"] * 1000
    sem_build = built["build_cpu_s"] * 1000
    rows = [
        ("index build, this run (CPU ms)", f"{lex_build:.0f}", f"+{sem_build:.0f}", f"<= {TARGET_BUILD_S * 1000:.0f}",
         "background" if sem_build > TARGET_BUILD_S * 1000 else ok(lex_build + sem_build, TARGET_BUILD_S * 1000)),
        ("  vectors' wall ms (encoder thread)", "", f"{built['build_wall_s'] * 1000:.0f}", "", ""),
        ("  event loop's longest turn (CPU ms)", "", f"{built['loop_stall_ms']:.1f}", "", ""),
        ("  from the disk cache / encoded", "", f"{built['from_disk']}/{built['embedded']}", "", ""),
        ("model load (CPU ms, once a process)", "", f"{built['load_cpu_s'] * 1000:.0f}", "", ""),
        ("incremental sync -100/+100 (ms)", f"{lexical['incremental_s'] * 1000:.0f}",
         f"+{built['incremental_s'] * 1000:.0f}", f"<= {TARGET_SYNC_MS:.0f}",
         ok((lexical["incremental_s"] + built["incremental_s"]) * 1000, TARGET_SYNC_MS)),
        (f"sync of {built['changed_embedded']} changed tools (ms)", f"{lexical['changed_s'] * 1000:.0f}",
         f"+{built['changed_cpu_s'] * 1000:.0f}", f"<= {TARGET_SYNC_MS:.0f}",
         "background" if built["changed_cpu_s"] * 1000 > TARGET_SYNC_MS else ok(
             (lexical["changed_s"] + built["changed_cpu_s"]) * 1000, TARGET_SYNC_MS)),
        ("  their vectors' wall ms (encoder thread)", "", f"{built['changed_wall_s'] * 1000:.0f}", "", ""),
        ("  event loop's longest turn (CPU ms)", "", f"{built['changed_stall_ms']:.1f}", "", ""),
        ("memory: index (MB)", f"{lexical['index_mb']:.1f}", f"{lexical['index_mb']:.1f}", "", ""),
        ("memory: tool vectors (MB, matrix)", "", f"{built['vectors_mb']:.1f}", "", ""),
        ("memory: vectors + caches (MB, RSS)", "", f"{built['semantic_mb']:.1f}", "", ""),
        ("  before malloc_trim (freed activations)", "", f"{built['semantic_untrimmed_mb']:.1f}", "", ""),
        ("memory: model (MB, RSS)", "", f"{built['model_mb']:.1f}", "", ""),
        ("  of which file pages (the model's mapping)", "", f"{built['mapped_mb']:.1f}", "", ""),
        ("memory: total, file pages excluded (MB)", f"{lexical['index_mb']:.1f}", f"{held:.1f}",
         f"<= {TARGET_SEMANTIC_MB:.0f}", ok(held, TARGET_SEMANTIC_MB)),
    ]
    for stage, label in (("encode", "query text + encode"), ("lexical", "lexical top 50 (no back-fill)"),
                         ("dense", "dense top 50 (6k cosines)"), ("fuse", "fuse"), ("rest", "back-fill + result"),
                         ("cached", "find_tools, query vector cached")):
        rows.append((f"{label} p50 / p99 (CPU ms)", "",
                     f"{_pct(stages[stage], 0.5):.2f}/{_pct(stages[stage], 0.99):.2f}", "", ""))
    rows += [
        ("find_tools p50 (CPU ms)", f"{_pct(lexical_cpu, 0.5):.2f}", f"{whole50:.2f}",
         f"<= {TARGET_P50_MS:.0f} / {TARGET_SEMANTIC_P50_MS:.0f}",
         f"{ok(_pct(lexical_cpu, 0.5), TARGET_P50_MS)}/{ok(whole50, TARGET_SEMANTIC_P50_MS)}"),
        ("find_tools p99 (CPU ms)", f"{_pct(lexical_cpu, 0.99):.2f}", f"{_pct(stages['whole'], 0.99):.2f}", "", ""),
    ]
    for label, lex, sem, target, verdict in rows:
        print(f"{label:44}{lex:>12}{sem:>12}{target:>14}{verdict:>9}")
    print(f"first vector build (uncached): {uncached}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, help="catalogs under distinct prefixes (GitHub: 5; a --catalog: ~6,115 tools)")
    parser.add_argument("--catalog", choices=("github", *CORE_CATALOGS), default="github",
                        help="the catalog timed: GitHub with its pack, or a tuning catalog read by the general core alone")
    parser.add_argument("--repeat", type=int, default=20, help="passes over the queries for latency")
    parser.add_argument("--baseline", metavar="REF", help="also rank the labelled sets with the ranker of git commit REF")
    parser.add_argument("--semantic", action="store_true", help="also measure the offline semantic side (local model)")
    parser.add_argument("--semantic-repeat", type=int, default=3, help="passes over the queries with the semantic side")
    parser.add_argument("--cache-dir", type=Path, default=CACHE_DIR, help="the local model's vector cache")
    parser.add_argument("--cold", action="store_true", help="build the vectors with an empty cache (a temporary one)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--semantic-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    catalog = args.catalog
    copies = args.copies = copies_for(catalog, args.copies)
    if args.child:
        print(json.dumps(build_child(copies, catalog)))
        return 0
    if args.semantic_child:
        print(json.dumps(semantic_child(copies, args.cache_dir, catalog)))
        return 0

    out = subprocess.run([sys.executable, __file__, "--child", "--copies", str(copies), "--catalog", catalog],
                         check=True, capture_output=True, text=True)
    built = json.loads(out.stdout)

    # Latency at scale, in this process.
    corpora = [corpus(catalog, f"gh{i}_") for i in range(copies)]
    tools = {t["name"]: t for c in corpora for t in c.tools}
    index = SearchIndex(packs(catalog))
    index.sync(d for c in corpora for d in c.docs)
    queries = catalog_queries(catalog)
    for q in queries:  # warm: the first sight of a phrase computes its document frequency once
        index.search(q, DEFAULT_LIMIT)
    times, cpu = [], []
    for _ in range(args.repeat):
        for q in queries:
            t0, c0 = time.perf_counter(), time.process_time()
            find_result(index.search(q, DEFAULT_LIMIT), tools)
            times.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
    times.sort()
    cpu.sort()
    p50, cpu50 = statistics.median(times), statistics.median(cpu)
    p99, cpu99 = times[int(len(times) * 0.99) - 1], cpu[int(len(cpu) * 0.99) - 1]

    sem_built = first = stages = None
    if args.semantic:
        sem_built, first = semantic_build(copies, args.cache_dir, args.cold, catalog)
        docs = {d.name: d for c in corpora for d in c.docs}
        stages = semantic_latency(index, docs, tools, queries, args.semantic_repeat, args.cache_dir)

    # Recall over the GitHub catalog as one connector serves it.
    github = corpora[0] if catalog == "github" else github_corpus("")
    one = SearchIndex(PACKS)
    one.sync(github.docs)
    recalls = {label: evaluate(one, github, load_tasks(path)) for label, path, _ in SETS}
    bare = SearchIndex()  # the general core alone: what the github pack adds
    bare.sync(github.docs)
    cores = {label: evaluate(bare, github, load_tasks(path)) for label, path, _ in SETS}
    main_set = recalls["main"]
    before = baseline(args.baseline) if args.baseline else None

    whole = json.dumps({"tools": list(github.tools)}, separators=(",", ":"))
    search = json.dumps({"tools": [FIND_TOOLS, CALL_TOOL]}, separators=(",", ":"))

    def ok(flag: bool) -> str:
        return "met" if flag else "NOT met"

    served = "GitHub REST, with its pack" if catalog == "github" else f"{catalog}, the general core alone (no pack)"
    print(f"tool search over {built['tools']} tools ({copies} × {served}, {len(corpora[0].tools)} each); "
          f"{len(queries)} queries × {args.repeat}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'measure':44}{'value':>14}{'target':>14}{'':>10}")
    rows = [
        ("index build (6k tools)", f"{built['build_s'] * 1000:.0f} ms", "", ""),
        ("incremental sync (-100 then +100 tools)", f"{built['incremental_s'] * 1000:.0f} ms", "", ""),
        ("sync of 100 changed tools (new text)", f"{built['changed_s'] * 1000:.0f} ms", "", ""),
        ("memory the index adds", f"{built['index_mb']:.1f} MB", f"< {TARGET_INDEX_MB:.0f} MB",
         ok(built["index_mb"] < TARGET_INDEX_MB)),
        ("find_tools p50 (CPU time)", f"{cpu50:.2f} ms", f"< {TARGET_P50_MS:.0f} ms", ok(cpu50 < TARGET_P50_MS)),
        ("find_tools p99 (CPU time)", f"{cpu99:.2f} ms", "", ""),
        ("find_tools p50 (wall time)", f"{p50:.2f} ms", "", ""),
        ("find_tools p99 (wall time)", f"{p99:.2f} ms", "", ""),
        (f"recall@5 ({main_set.tasks} main tasks)", f"{main_set.at5:.3f}", f">= {TARGET_RECALL5}",
         ok(main_set.at5 >= TARGET_RECALL5)),
    ]
    for label, value, target, verdict in rows:
        print(f"{label:44}{value:>14}{target:>14}{verdict:>10}")
    if sem_built is not None and stages is not None:
        print()
        semantic_table(built, sem_built, first, cpu, stages, args.semantic_repeat)
    print()
    print("recall over the GitHub catalog (1,223 tools), read with packs: [github]; tuned: the ranker was tuned "
          "on the set's misses; core: the same without the pack (the general core alone)")
    head = f"{'set':10}{'tasks':>6}{'tuned':>7}"
    head += f"{'before @1':>11}{'before @5':>11}" if before else ""
    print(head + f"{'recall@1':>10}{'recall@5':>10}{'core @1':>9}{'core @5':>9}")
    for label, _, tuned in SETS:
        r = recalls[label]
        line = f"{label:10}{r.tasks:>6}{'yes' if tuned else 'no':>7}"
        if before:
            line += f"{before[label][0]:>11.3f}{before[label][1]:>11.3f}"
        print(line + f"{r.at1:>10.3f}{r.at5:>10.3f}{cores[label].at1:>9.3f}{cores[label].at5:>9.3f}")
    if before:
        print(f"(before: the ranker of commit {args.baseline}, on the same task files)")
    print()
    print(f"{'tools/list of the GitHub catalog':44}{'JSON bytes':>14}{'~tokens':>14}")
    print(f"{'every tool (discovery: list)':44}{len(whole):>14,}{len(whole) // 4:>14,}")
    print(f"{'find_tools + call_tool (discovery: search)':44}{len(search):>14,}{len(search) // 4:>14,}")
    met = main_set.at5 >= TARGET_RECALL5 and cpu50 < TARGET_P50_MS and built["index_mb"] < TARGET_INDEX_MB
    if stages is not None:
        met = met and statistics.median(stages["whole"]) <= TARGET_SEMANTIC_P50_MS
    print(f"\ntargets: {'all met' if met else 'NOT all met'}")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
