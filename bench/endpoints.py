"""Benchmark: what endpoints (virtual servers) cost, side by side with ``/mcp``, at catalog scale.

One in-process gateway serving GitHub's REST API (1,223 operations, the real spec shipped as test
data) under ``--copies`` OpenAPI connectors (5: ~6,100 tools), with three endpoints:

* ``pulls`` — ``{tags: [pulls]}`` of one copy, one tool renamed with a fixed argument;
* ``half`` — ``{tools: ["gh0_*", "gh1_*"]}``, about 2,450 tools;
* ``search`` — every tool, ``discovery: search``.

Rows (all through the whole filter chain, with access rules on, in this process):

* ``prompts/get`` of a static prompt on ``/mcp`` vs on an endpoint that renames it: the per-call
  price of an endpoint (its translate hook and view lookup);
* ``tools/list`` (first page, ``page_size`` 50) on ``/mcp`` vs ``pulls`` vs ``half``;
* ``find_tools`` (limit 8) on the search endpoint: the first call (builds the endpoint's index)
  and then p50/p99 over the labelled queries;
* what re-selecting costs after a catalog rebuild (``Endpoints.rebuild`` for the three endpoints,
  ~6,100 tools), and the size of ``tools/list`` for the whole catalog vs the search endpoint.

Run: ``.venv/bin/python bench/endpoints.py [--copies 5] [--calls 3000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gateway.app import Gateway  # noqa: E402
from gateway.config import parse_config  # noqa: E402
from gateway.context import Principal  # noqa: E402
from gateway.discovery.catalog_search import CatalogSearch  # noqa: E402
from gateway.session import Session  # noqa: E402
from tests.discovery.labelled import GITHUB_SPEC, load_tasks  # noqa: E402


def config(copies: int) -> str:
    connectors = "\n".join(
        f"  - {{name: gh{i}, type: openapi, spec: {GITHUB_SPEC}, base_url: 'http://127.0.0.1:9'}}"
        for i in range(copies))
    return f"""
audit: {{enabled: false}}
telemetry: {{metrics: false}}
gateway: {{page_size: 50}}
access:
  - {{principals: ["*"], allow: ["*"], deny: ["gh0_repos_delete*"]}}
connectors:
  - name: team
    type: static
    prompts: [{{name: hello, arguments: [{{name: who}}], messages: [{{text: "hello {{who}}"}}]}}]
{connectors}
endpoints:
  - name: pulls
    select: [{{connector: gh0, tags: [pulls]}}, {{prompts: [team_hello]}}]
    rename: {{team_hello: greet, gh0_pulls_list: open_prs}}
    defaults: {{gh0_pulls_list: {{owner: acme}}}}
  - name: half
    select: [{{tools: ["gh0_*", "gh1_*"]}}]
  - name: search
    select: [{{tools: ["*"]}}]
    discovery: search
    search: {{packs: [github], semantic: off}}  # the lexical ranker's cost (the local model: bench/local_encoder.py)
"""


def _session(host: Any) -> Session:
    async def discard(message: dict[str, Any], related: Any = None) -> None:
        return None

    session = Session(host, "streamable_http", discard, Principal("bench"))
    session.lifecycle.initialized()
    session.protocol_version = "2025-11-25"
    session.client_info = {"name": "bench", "version": "1"}
    return session


async def _timed(host: Any, method: str, params: dict[str, Any], n: int) -> list[float]:
    session = _session(host)
    out = []
    for i in range(n):
        start = time.perf_counter()
        result = await host.dispatch(session, i, method, params)
        out.append(time.perf_counter() - start)
        assert "isError" not in result or not result["isError"], result
    return out


def _row(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p50 = statistics.median(ordered) * 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    return f"| {name} | {len(samples)} | {p50:.3f} | {p99:.3f} |"


async def main(copies: int, calls: int) -> None:
    gw = Gateway(parse_config(config(copies)))
    start = time.perf_counter()
    await gw.start()
    started = time.perf_counter() - start
    gc.collect()
    gc.freeze()  # as `serve` does after start-up
    try:
        pulls, half, search = (gw.endpoints.get(n) for n in ("pulls", "half", "search"))
        assert pulls is not None and half is not None and search is not None
        await search.search.warm()  # start-up set it off in the background: let it end before timing
        n_tools = len(gw.catalog.snapshot("tools").keys)
        print(f"catalog: {n_tools} tools ({copies} copies of GitHub's REST API); gateway start {started:.1f} s")
        print(f"endpoints: pulls {len(pulls.view.snapshot('tools').keys)} tools, half "
              f"{len(half.view.snapshot('tools').keys)}, search {len(search.view.snapshot('tools').keys)} (found by "
              "find_tools)\n")
        print("| request | n | p50 ms | p99 ms |")
        print("|---|---|---|---|")
        hello = {"arguments": {"who": "x"}}
        print(_row("prompts/get on /mcp", await _timed(gw, "prompts/get", {"name": "team_hello", **hello}, calls)))
        print(_row("prompts/get on endpoint pulls (renamed)",
                   await _timed(pulls, "prompts/get", {"name": "greet", **hello}, calls)))
        n_list = max(50, calls // 10)
        print(_row("tools/list page 1 on /mcp", await _timed(gw, "tools/list", {}, n_list)))
        print(_row("tools/list page 1 on endpoint pulls", await _timed(pulls, "tools/list", {}, n_list)))
        print(_row("tools/list page 1 on endpoint half", await _timed(half, "tools/list", {}, n_list)))
        queries = [t["query"] for t in load_tasks()]
        t0 = time.perf_counter()
        CatalogSearch(search.view, packs=("github",)).refresh()
        print(_row("building a search endpoint's index (in a worker thread after start and rebuilds)",
                   [time.perf_counter() - t0]))
        samples: list[float] = []
        session = _session(search)
        for i in range(max(1, calls // len(queries))):
            for q in queries:
                t0 = time.perf_counter()
                await search.dispatch(session, i, "tools/call", {"name": "find_tools", "arguments": {"query": q}})
                samples.append(time.perf_counter() - t0)
        print(_row("find_tools on endpoint search (labelled queries)", samples))
        rebuilds = []
        for _ in range(5):
            t0 = time.perf_counter()
            gw.endpoints.rebuild(lambda coro: coro.close(), None)  # as after a catalog change
            rebuilds.append(time.perf_counter() - t0)
        print(_row("re-selecting the 3 endpoints after a rebuild", rebuilds))

        whole = 0
        cursor = None
        while True:
            page = gw.catalog.list_page("tools/list", cursor)
            whole += len(json.dumps(page["tools"]))
            cursor = page.get("nextCursor")
            if not cursor:
                break
        small = len(json.dumps(search.view.list_page("tools/list", None)["tools"]))
        print(f"\ntools/list JSON: whole catalog {whole:,} bytes (~{whole // 4:,} tokens) vs search endpoint "
              f"{small:,} bytes (~{small // 4:,} tokens): {whole / small:,.0f}x smaller")
    finally:
        await gw.stop(grace_s=0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    asyncio.run(main(args.copies, args.calls))
