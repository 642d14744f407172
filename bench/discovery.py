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

Run: ``.venv/bin/python bench/discovery.py [--copies 5] [--repeat 20] [--baseline REF]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gateway.discovery import SearchIndex  # noqa: E402
from gateway.discovery.tools import CALL_TOOL, DEFAULT_LIMIT, FIND_TOOLS, find_result  # noqa: E402
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
    evaluate,
    github_corpus,
    load_tasks,
)

TARGET_RECALL5 = 0.9
TARGET_P50_MS = 5.0
TARGET_INDEX_MB = 50.0
PACKS = ("github",)  # the GitHub catalog is served with its pack (search: {packs: [github]})
# (label, file, tuned on?): the ranker may be tuned on all eight (fresh and blind since round 3,
# blind-2 since round 4, blind-3 since round 5, blind-4 since round 6); a measurement-only set (an
# independent author's, merged separately) is listed with False, left out while its file is absent.
SETS = tuple(s for s in (("main", TASKS, True), ("held-out", HELDOUT, True), ("dev", DEV, True),
                         ("fresh", FRESH, True), ("blind", BLIND, True), ("blind-2", BLIND2, True),
                         ("blind-3", BLIND3, True), ("blind-4", BLIND4, True), ("blind-5", BLIND5, False)) if s[1].exists())

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


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def build_child(copies: int) -> dict[str, float]:
    """Runs in a fresh process: build time and memory added by the index for *copies* × GitHub."""
    corpora = [github_corpus(f"gh{i}_") for i in range(copies)]
    docs = [d for c in corpora for d in c.docs]
    gc.collect()
    before = _rss_mb()
    t0 = time.perf_counter()
    index = SearchIndex(PACKS)
    index.sync(docs)
    build = time.perf_counter() - t0
    gc.collect()
    after = _rss_mb()
    t0 = time.perf_counter()
    index.sync(docs[:-100])  # incremental: 100 tools gone
    index.sync(docs)  # and back
    incremental = time.perf_counter() - t0
    return {"tools": len(index), "build_s": build, "index_mb": after - before, "incremental_s": incremental}


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=5, help="GitHub catalogs under distinct prefixes")
    parser.add_argument("--repeat", type=int, default=20, help="passes over the queries for latency")
    parser.add_argument("--baseline", metavar="REF", help="also rank the labelled sets with the ranker of git commit REF")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(build_child(args.copies)))
        return 0

    out = subprocess.run([sys.executable, __file__, "--child", "--copies", str(args.copies)],
                         check=True, capture_output=True, text=True)
    built = json.loads(out.stdout)

    # Latency at scale, in this process.
    corpora = [github_corpus(f"gh{i}_") for i in range(args.copies)]
    tools = {t["name"]: t for c in corpora for t in c.tools}
    index = SearchIndex(PACKS)
    index.sync(d for c in corpora for d in c.docs)
    queries = [t["query"] for _, path, _ in SETS for t in load_tasks(path)]
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

    # Recall over the GitHub catalog as one connector serves it.
    github = corpora[0]
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

    print(f"tool search over {built['tools']} tools ({args.copies} × GitHub REST, {len(github.tools)} each); "
          f"{len(queries)} queries × {args.repeat}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'measure':44}{'value':>14}{'target':>14}{'':>10}")
    rows = [
        ("index build (6k tools)", f"{built['build_s'] * 1000:.0f} ms", "", ""),
        ("incremental sync (-100 then +100 tools)", f"{built['incremental_s'] * 1000:.0f} ms", "", ""),
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
    print(f"\ntargets: {'all met' if met else 'NOT all met'}")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
