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
* recall@1/@5 on the labelled set (and on the held-out and fresh sets) over the GitHub catalog;
* the size of ``tools/list`` for the whole GitHub catalog vs a ``discovery: search`` endpoint
  (bytes of JSON and an estimate of tokens at 4 characters a token: no tokenizer ships offline).

Run: ``.venv/bin/python bench/discovery.py [--copies 5] [--repeat 20]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gateway.discovery import SearchIndex  # noqa: E402
from gateway.discovery.labelled import FRESH, HELDOUT, evaluate, github_corpus, load_tasks  # noqa: E402
from gateway.discovery.tools import CALL_TOOL, DEFAULT_LIMIT, FIND_TOOLS, find_result  # noqa: E402

TARGET_RECALL5 = 0.9
TARGET_P50_MS = 5.0
TARGET_INDEX_MB = 50.0


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
    index = SearchIndex()
    index.sync(docs)
    build = time.perf_counter() - t0
    gc.collect()
    after = _rss_mb()
    t0 = time.perf_counter()
    index.sync(docs[:-100])  # incremental: 100 tools gone
    index.sync(docs)  # and back
    incremental = time.perf_counter() - t0
    return {"tools": len(index), "build_s": build, "index_mb": after - before, "incremental_s": incremental}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=5, help="GitHub catalogs under distinct prefixes")
    parser.add_argument("--repeat", type=int, default=20, help="passes over the queries for latency")
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
    index = SearchIndex()
    index.sync(d for c in corpora for d in c.docs)
    queries = [t["query"] for t in load_tasks() + load_tasks(HELDOUT) + load_tasks(FRESH)]
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
    one = SearchIndex()
    one.sync(github.docs)
    main_set = evaluate(one, github, load_tasks())
    held = evaluate(one, github, load_tasks(HELDOUT))
    fresh = evaluate(one, github, load_tasks(FRESH))

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
        (f"recall@1 ({main_set.tasks} labelled tasks)", f"{main_set.at1:.3f}", "", ""),
        (f"recall@5 ({main_set.tasks} labelled tasks)", f"{main_set.at5:.3f}", f">= {TARGET_RECALL5}",
         ok(main_set.at5 >= TARGET_RECALL5)),
        (f"recall@1 ({held.tasks} held-out tasks)", f"{held.at1:.3f}", "", ""),
        (f"recall@5 ({held.tasks} held-out tasks)", f"{held.at5:.3f}", "", ""),
        (f"recall@1 ({fresh.tasks} fresh tasks)", f"{fresh.at1:.3f}", "", ""),
        (f"recall@5 ({fresh.tasks} fresh tasks)", f"{fresh.at5:.3f}", "", ""),
    ]
    for label, value, target, verdict in rows:
        print(f"{label:44}{value:>14}{target:>14}{verdict:>10}")
    print()
    print(f"{'tools/list of the GitHub catalog':44}{'JSON bytes':>14}{'~tokens':>14}")
    print(f"{'every tool (discovery: list)':44}{len(whole):>14,}{len(whole) // 4:>14,}")
    print(f"{'find_tools + call_tool (discovery: search)':44}{len(search):>14,}{len(search) // 4:>14,}")
    met = main_set.at5 >= TARGET_RECALL5 and cpu50 < TARGET_P50_MS and built["index_mb"] < TARGET_INDEX_MB
    print(f"\ntargets: {'all met' if met else 'NOT all met'}")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
