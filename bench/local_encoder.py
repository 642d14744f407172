"""Benchmark: the local embedding model (``gateway.discovery.local_model.LocalEncoder``, numpy) on
real tools: memory, indexing throughput, query latency, and the disk cache.

A catalog of ``tests/data/openapi`` (``--catalog``, default GitHub's REST API; ``--tools`` of its
tools, default 600) is served through the OpenAPI connector by a gateway started in this process;
each tool's text is what hybrid search embeds (``hybrid.tool_text``: name in words, title,
description, tags, path, parameters). In a child process (so the numbers are the encoder's alone):

* RSS after importing the gateway and numpy, after loading the model (hash check, mapping), and
  after embedding every tool text (``index`` calls of ``--batch`` texts, as ``search.local.batch``);
* index throughput: tool texts per CPU second and the catalog's CPU seconds, with the ids per text;
* query latency: CPU ms per ``query`` call (p50, p90) over queries of 5 to 20 words, uncached;
* the same catalog again through a fresh encoder sharing ``cache_dir``: what a restart costs.

Run: ``.venv/bin/python bench/local_encoder.py [--catalog stripe] [--tools 600] [--batch 8]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SPECS = {"github": "github-api.json.gz", "stripe": "stripe.json.gz", "twilio": "twilio-api.json.gz",
         "box": "box.json.gz", "digitalocean": "digitalocean.json.gz", "opsgenie": "opsgenie.json.gz",
         "vikunja": "vikunja.json.gz"}
QUERIES = [
    "list the open pull requests of a repository",
    "who approved the deployment to production yesterday",
    "create a refund for the last charge of this customer",
    "send a text message to the on-call engineer about the outage",
    "delete the webhook that posts to our old chat channel",
    "find all invoices that are past due for a customer and email them a reminder today",
    "add a collaborator with write access",
    "what is the status of the latest workflow run on the main branch",
    "star a repository",
    "upload a file to a shared folder and give my team read access to it please",
]


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def tool_texts(catalog: str, limit: int) -> list[str]:
    from gateway.discovery.catalog_search import CatalogSearch
    from gateway.discovery.hybrid import tool_text
    from tests.support import running_gateway

    spec = REPO / "tests" / "data" / "openapi" / SPECS[catalog]
    config = (f'audit: {{store: none}}\ntelemetry: {{metrics: false}}\nconnectors:\n'
              f'  - {{name: {catalog}, type: openapi, spec: "{spec}"}}\n'
              f'endpoints:\n  - {{name: e, discovery: list, select: [{{connector: {catalog}}}]}}\n')
    with tempfile.TemporaryDirectory() as tmp:
        async with running_gateway(config, base_dir=tmp) as gw:
            search = CatalogSearch(gw.gateway.endpoints.get("e").view)
            search.refresh()
            return [tool_text(search._docs[name][1]) for name in sorted(search.prints)][:limit]


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def child(texts: list[str], batch: int, cache_dir: str) -> dict[str, Any]:
    import numpy  # noqa: F401 - counted in the baseline

    from gateway.discovery.local_model import LocalEncoder

    out: dict[str, Any] = {"rss_base_mb": rss_mb()}
    encoder = LocalEncoder(cache_dir=cache_dir)
    t0, c0 = time.perf_counter(), cpu()
    model = encoder.load()
    out["load_s"], out["rss_loaded_mb"] = time.perf_counter() - t0, rss_mb()
    out["ids"] = [len(model.tokenizer.encode(t)) for t in texts]
    c0, t0 = cpu(), time.perf_counter()
    for start in range(0, len(texts), batch):
        await encoder.embed(texts[start:start + batch], "index")
    out["index_cpu_s"], out["index_wall_s"] = cpu() - c0, time.perf_counter() - t0
    out["rss_indexed_mb"] = rss_mb()
    for q in QUERIES[:2]:
        await encoder.embed([q], "query")
    times = []
    for _ in range(5):
        for q in QUERIES:
            c0 = cpu()
            await encoder.embed([q], "query")
            times.append((cpu() - c0) * 1e3)
    out["query_ms"] = times
    encoder.shutdown()
    again = LocalEncoder(cache_dir=cache_dir)
    again.load()
    c0, t0 = cpu(), time.perf_counter()
    for start in range(0, len(texts), batch):
        await again.embed(texts[start:start + batch], "index")
    out["cached_cpu_s"], out["cached_wall_s"], out["cached"] = cpu() - c0, time.perf_counter() - t0, again.cached
    again.shutdown()
    out["rss_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--catalog", default="github", choices=sorted(SPECS))
    parser.add_argument("--tools", type=int, default=600)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--child", nargs=3, metavar=("TEXTS", "BATCH", "CACHE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        texts = json.loads(Path(args.child[0]).read_text())
        print(json.dumps(asyncio.run(child(texts, int(args.child[1]), args.child[2]))))
        return
    texts = asyncio.run(tool_texts(args.catalog, args.tools))
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "texts.json"
        file.write_text(json.dumps(texts))
        proc = subprocess.run([sys.executable, __file__, "--child", str(file), str(args.batch), str(Path(tmp) / "cache")],
                              capture_output=True, text=True, check=True, cwd=REPO)
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    ids, q = r["ids"], sorted(r["query_ms"])
    n = len(texts)
    print(f"{args.catalog}: {n} tools, ids per text mean {statistics.mean(ids):.0f} (max {max(ids)}, "
          f"{sum(i >= 256 for i in ids)} truncated at 256)")
    print(f"load: {r['load_s']:.2f} s (SHA-256 of the files, mapping)")
    print(f"RSS: {r['rss_base_mb']:.0f} MB (python, numpy, gateway) -> {r['rss_loaded_mb']:.0f} MB loaded -> "
          f"{r['rss_indexed_mb']:.0f} MB after indexing (peak {r['rss_peak_mb']:.0f} MB)")
    print(f"index: {r['index_cpu_s']:.1f} s CPU ({r['index_wall_s']:.1f} s wall) = {n / r['index_cpu_s']:.1f} tool "
          f"texts per CPU second, {r['index_cpu_s'] / sum(ids) * 1e3:.2f} ms per id")
    print(f"query: p50 {statistics.median(q):.1f} ms CPU, p90 {q[int(0.9 * (len(q) - 1))]:.1f} ms "
          f"({len(q)} uncached queries of 3-16 words)")
    print(f"restart with cache_dir: {r['cached']} of {n} from disk, {r['cached_cpu_s']:.2f} s CPU "
          f"({r['cached_wall_s']:.2f} s wall)")


if __name__ == "__main__":
    main()
