"""Benchmark: tool search on catalogs the ranker never saw (issue 28), next to plain BM25.

One gateway is started in this process from a config (``CONFIG`` below): one OpenAPI connector
per public spec of ``tests/data/openapi`` (the six of issue 28 and GitHub's), each behind its own
``discovery: search`` endpoint. Every task of ``tests/data/discovery/<name>-tasks.yaml`` (for
GitHub the set kept apart, ``github-tasks-blind5.yaml``) is asked as ``tools/call find_tools
{query, limit: 5}`` over Streamable HTTP on 127.0.0.1 (a real socket, client and server in this
process), so the answer is ``find_tools`` as served: the endpoint's view, its names, its
:class:`~gateway.discovery.catalog_search.CatalogSearch`, the filter chain.

Labels are operations (``key: operationId``, or ``key: method path``); each is mapped to the tool
the connector serves for it through the connector's own table of tools (``METHOD path`` of the
operation each tool calls, read from the running connector), never by guessing a name from an
operationId: :func:`resolve_labels`, also used by ``tests/discovery/test_catalog_labels.py``.

Beside it, a plain BM25 (:class:`PlainBM25`): SQLite FTS5, ``tokenize='porter unicode61'``, one
row per served tool with four columns of equal weight (``bm25()`` with no weights): the tool's
local name and each input property's name split at ``_ - . /`` and at lower→upper case changes,
the title (``title``, else ``annotations.title``) and the whole description; the query is its
``[A-Za-z0-9]+`` runs, each quoted, ORed; ties by row order. Nothing else: no stop words, no
synonyms, no re-rank. Porter stems both sides (FTS5's own).

Printed, per catalog and per wording (``by: person``, ``by: model``, all): recall@1 and @5 of
the ranker and of BM25, how many ``find_tools`` answers held fewer than 5 tools; per catalog the
tool count, the index build time (a fresh ``CatalogSearch`` over the endpoint's view, i.e. what
the endpoint's first search or warm-up does) and ``find_tools`` p50 latency, both as the HTTP
round trip (wall) and as the endpoint's ranking call alone (``CatalogSearch.find``, CPU time).
Measurement-only sets (box, digitalocean, slack, sendgrid, GitHub's blind-5) are marked ``M``; nothing per query
is ever printed for them. Domain packs (docs/discovery.md): the GitHub endpoint enables its pack
(``search: {packs: [github]}``); ``github-core`` is the same catalog and set without it (what the
pack adds); the six other catalogs are served with the general core alone, as any API is. ``--misses`` prints the misses at 5 of the tuning sets only.

With ``--semantic local`` the endpoints rank with the offline model (issue 28's default where it is
installed), and with ``--embeddings URL`` with an embeddings service, e.g. the real model served by
``bench/embeddings_server.py``; each endpoint's tool vectors are made before it is measured, and the
CPU time then includes encoding each query (the query LRU is emptied between calls).

Run: ``PYTHONPATH=$PWD .venv/bin/python bench/discovery_catalogs.py [--repeat 3] [--misses]
[--semantic local | --embeddings http://127.0.0.1:8765/v1/embeddings]``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gzip
import json
import os
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gateway.discovery.catalog_search import CatalogSearch  # noqa: E402

DATA = REPO / "tests" / "data"
LIMIT = 5
KEY = "bench-key-0123456789"
LEGACY = "2025-06-18"
METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


@dataclass(frozen=True)
class Catalog:
    name: str  # endpoint name (and connector name, unless *connector*)
    spec: str  # file under tests/data/openapi
    tasks: str  # file under tests/data/discovery
    measurement_only: bool
    packs: tuple[str, ...] = ()  # the endpoint's search.packs (domain packs; none: the general core)
    connector: str = ""  # the connector served, when another row already loads its spec

    @property
    def source(self) -> str:
        return self.connector or self.name


CATALOGS = (
    Catalog("stripe", "stripe.json.gz", "stripe-tasks.yaml", False),
    Catalog("twilio", "twilio-api.json.gz", "twilio-api-tasks.yaml", False),
    Catalog("opsgenie", "opsgenie.json.gz", "opsgenie-tasks.yaml", False),
    Catalog("vikunja", "vikunja.json.gz", "vikunja-tasks.yaml", False),
    Catalog("digitalocean", "digitalocean.json.gz", "digitalocean-tasks.yaml", True),
    Catalog("box", "box.json.gz", "box-tasks.yaml", True),
    Catalog("slack", "slack.json.gz", "slack-tasks.yaml", True),
    Catalog("sendgrid", "sendgrid.json.gz", "sendgrid-tasks.yaml", True),
    Catalog("github", "github-api.json.gz", "github-tasks-blind5.yaml", True, packs=("github",)),
    # The same GitHub endpoint without its pack: what the pack adds (the general core alone).
    Catalog("github-core", "github-api.json.gz", "github-tasks-blind5.yaml", True, connector="github"),
)

CONFIG = """
audit: {{store: none}}
telemetry: {{metrics: false}}
gateway: {{name: bench-catalogs}}
auth:
  api_keys: [{{name: bench, key: {key}}}]
connectors:
{connectors}
endpoints:
{endpoints}
"""


def spec_files(catalogs: Iterable[Catalog], tmp: Path) -> dict[str, Path]:
    """The file each connector loads: the spec as published (Swagger 2.0 ones too: the connector
    converts them, connectors/openapi/swagger2.py). ``tmp`` is unused, kept for the callers."""
    del tmp
    return {c.source: DATA / "openapi" / c.spec for c in catalogs}


def config_text(catalogs: Iterable[Catalog], files: Mapping[str, Path], discovery: str = "search",
                semantic: str = "semantic: off") -> str:
    """The gateway's config: one connector per spec, one endpoint per catalog. *semantic* is the
    endpoints' semantic side as ``search:`` keys: ``semantic: off`` by default (the lexical ranker is
    what is measured; with the local model on, what an answer holds would depend on whether its
    background indexing had finished), ``semantic: local`` or ``embeddings: {url: ..., model: ...}``
    with ``--semantic``/``--embeddings`` (:func:`measure` then waits for every tool's vector)."""
    cats = list(catalogs)
    sources = list(dict.fromkeys(c.source for c in cats))
    connectors = "\n".join(f"  - {{name: {n}, type: openapi, spec: \"{files[n]}\"}}" for n in sources)
    endpoints = "\n".join(f"  - {{name: {c.name}, discovery: {discovery}, select: [{{connector: {c.source}}}]"
                          + (f", search: {{{semantic}, packs: [{', '.join(c.packs)}]}}" if discovery == "search"
                             else "")
                          + "}" for c in cats)
    return CONFIG.format(key=KEY, connectors=connectors, endpoints=endpoints)


# -- labels → served tools ---------------------------------------------------------------------

def load_set(catalog: Catalog, tasks: str | None = None) -> tuple[str, list[dict[str, Any]]]:
    """(key, tasks) of the catalog's set, or of another set over the same spec (*tasks*, a file name)."""
    data = yaml.safe_load((DATA / "discovery" / (tasks or catalog.tasks)).read_text())
    return data.get("key", "operationId"), data["tasks"]


@functools.cache
def spec_operations(catalog: Catalog) -> dict[str, str]:
    """operationId → ``METHOD path`` of the spec as published."""
    with gzip.open(DATA / "openapi" / catalog.spec) as f:
        doc = json.load(f)
    out = {}
    for path, item in (doc.get("paths") or {}).items():
        for method, op in (item or {}).items():
            if method in METHODS and isinstance(op, dict) and op.get("operationId"):
                out[op["operationId"]] = f"{method.upper()} {path}"
    return out


def served_operations(view: Any) -> dict[str, str]:
    """``METHOD path`` → the name an endpoint serves the tool under, read from the running
    connector: each listed tool's operation (the connector's tool → operation table)."""
    out = {}
    for entry in view.snapshot("tools").entries:
        state = entry.connector._state  # the operation plan each tool calls (connectors.openapi.mapping)
        op = state.tools[entry.local]
        assert entry.connector.tool_origin(entry.local)[1] == op.path
        out[f"{op.method.upper()} {op.path}"] = entry.key
    return out


def resolve_labels(catalog: Catalog, view: Any, tasks_file: str | None = None
                   ) -> tuple[list[set[str]], list[str]]:
    """Per task the set of served tool names its labels name, and the labels that name none."""
    key, tasks = load_set(catalog, tasks_file)
    served = served_operations(view)
    by_id = spec_operations(catalog) if key == "operationId" else {}
    wants, unresolved = [], []
    for task in tasks:
        want = set()
        for label in task["ops"]:
            op = by_id.get(label) if key == "operationId" else label
            name = served.get(op) if op else None
            if name is None:
                unresolved.append(label)
            else:
                want.add(name)
        wants.append(want)
    return wants, unresolved


# -- plain BM25 ----------------------------------------------------------------------------------

_SPLIT = re.compile(r"[_\-./\s]+|(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[A-Za-z0-9]+")


def words(name: str) -> str:
    return " ".join(w for w in _SPLIT.split(name) if w)


class PlainBM25:
    """SQLite FTS5 BM25 over name, title, description and parameter names (see the module doc)."""

    def __init__(self, tools: Iterable[tuple[str, str, dict[str, Any]]]) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE t USING fts5(name, title, description, params, "
                        "tokenize='porter unicode61')")
        self.names: list[str] = []
        for public, local, wire in tools:
            props = (wire.get("inputSchema") or {}).get("properties") or {}
            title = wire.get("title") or (wire.get("annotations") or {}).get("title") or ""
            self.db.execute("INSERT INTO t(rowid, name, title, description, params) VALUES (?, ?, ?, ?, ?)",
                            (len(self.names), words(local), title, wire.get("description") or "",
                             " ".join(words(p) for p in props)))
            self.names.append(public)

    def search(self, query: str, limit: int = LIMIT) -> list[str]:
        terms = _WORD.findall(query)
        if not terms:
            return []
        match = " OR ".join(f'"{w}"' for w in terms)
        rows = self.db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t), rowid LIMIT ?", (match, limit))
        return [self.names[r[0]] for r in rows]


# -- measuring -------------------------------------------------------------------------------------

@dataclass
class Result:
    catalog: Catalog
    tools: int
    build_ms: float
    http_p50_ms: float
    cpu_p50_ms: float
    answer_kb: float  # p50 size of a find_tools answer (JSON)
    rows: dict[str, dict[str, float]] = field(default_factory=dict)  # wording → measures
    misses: list[tuple[str, str, list[str]]] = field(default_factory=list)  # tuning sets only


class Client:
    """A Streamable HTTP client for one endpoint: initialize once, then ``find_tools`` calls."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http, self.url, self.session = http, url, ""
        self.next_id = 1
        self.sizes: list[int] = []  # bytes of each find_tools answer

    async def post(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {KEY}"}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        async with self.http.post(self.url, json=body, headers=headers) as resp:
            text = await resp.text()
            assert resp.status in (200, 202), (resp.status, text[:300])
            self.session = self.session or resp.headers.get("Mcp-Session-Id", "")
            if resp.content_type == "text/event-stream":
                text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
            return json.loads(text) if text else {}

    async def start(self) -> None:
        await self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def find(self, query: str, limit: int = LIMIT) -> list[str]:
        self.next_id += 1
        reply = await self.post({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                                 "params": {"name": "find_tools", "arguments": {"query": query, "limit": limit}}})
        result = reply["result"]
        self.sizes.append(len(json.dumps(result)))
        assert not result.get("isError"), result
        return [t["name"] for t in result["structuredContent"]["tools"]]


def score(wants: list[set[str]], tops: list[list[str]]) -> tuple[float, float]:
    n = len(wants) or 1
    at1 = sum(bool(top) and top[0] in want for want, top in zip(wants, tops, strict=True))
    at5 = sum(bool(want & set(top[:LIMIT])) for want, top in zip(wants, tops, strict=True))
    return at1 / n, at5 / n


async def measure(gw: Any, http: aiohttp.ClientSession, catalog: Catalog, repeat: int) -> Result:
    host = gw.gateway.endpoints.get(catalog.name)
    view = host.view
    await host.search.warm()  # the background warm-up done: nothing else competes for the index
    _, tasks = load_set(catalog)
    wants, unresolved = resolve_labels(catalog, view)
    if unresolved:
        raise SystemExit(f"{catalog.name}: {len(unresolved)} label(s) name no served tool"
                         + ("" if catalog.measurement_only else f": {unresolved}"))
    queries = [t["query"] for t in tasks]

    client = Client(http, f"{gw.url}/mcp/{catalog.name}")
    await client.start()
    tops, wall = [], []
    for q in queries:
        t0 = time.perf_counter()
        tops.append(await client.find(q))
        wall.append((time.perf_counter() - t0) * 1000)
    index: CatalogSearch = host.search._index
    cpu = []
    for _ in range(repeat):
        for q in queries:
            c0 = time.process_time()
            if index.semantic is None:
                index.find(q, LIMIT)
            else:  # the query's vector as served (not from the LRU: each pass encodes it again)
                index.semantic._queries.clear()
                index.find(q, LIMIT, vector=await index.query_vector(q))
            cpu.append((time.process_time() - c0) * 1000)

    fresh = CatalogSearch(view, packs=catalog.packs)
    t0 = time.perf_counter()
    fresh.refresh()
    build_ms = (time.perf_counter() - t0) * 1000

    snap = view.snapshot("tools").entries
    bm25 = PlainBM25((e.key, e.local, e.wire) for e in snap)
    plain = [bm25.search(q) for q in queries]

    result = Result(catalog, len(snap), build_ms, statistics.median(wall), statistics.median(cpu),
                    statistics.median(client.sizes) / 1000)
    for wording in ("person", "model", "all"):
        idx = [i for i, t in enumerate(tasks) if wording == "all" or t.get("by") == wording]
        if not idx:
            continue
        w = [wants[i] for i in idx]
        r1, r5 = score(w, [tops[i] for i in idx])
        b1, b5 = score(w, [plain[i] for i in idx])
        short = sum(len(tops[i]) < LIMIT for i in idx)
        result.rows[wording] = {"n": len(idx), "r1": r1, "r5": r5, "b1": b1, "b5": b5, "short": short}
    if not catalog.measurement_only:  # per-query detail exists for tuning sets only
        result.misses = [(t.get("by", ""), t["query"], top) for t, want, top in zip(tasks, wants, tops, strict=True)
                         if not want & set(top)]
    return result


def report(results: list[Result], misses: bool, elapsed: float) -> None:
    print(f"find_tools {{query, limit: {LIMIT}}} over Streamable HTTP (in process, 127.0.0.1) vs plain FTS5 BM25 "
          f"(porter unicode61, equal column weights); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'catalog':14}{'M':>2}{'tools':>6}{'wording':>8}{'n':>4}{'ranker @1':>10}{'@5':>7}{'BM25 @1':>9}"
          f"{'@5':>7}{'short':>6}")
    for r in results:
        for wording, m in r.rows.items():
            print(f"{r.catalog.name:14}{'M' if r.catalog.measurement_only else '':>2}{r.tools:>6}{wording:>8}"
                  f"{m['n']:>4}{m['r1']:>10.3f}{m['r5']:>7.3f}{m['b1']:>9.3f}{m['b5']:>7.3f}{m['short']:>6}")
    print("M: measurement-only set (aggregates only); short: find_tools answers with fewer than "
          f"{LIMIT} tools; github: github-tasks-blind5.yaml (the set kept apart), packs: [github]; "
          "github-core: the same without the pack")
    print()
    print(f"{'catalog':14}{'tools':>6}{'index build':>13}{'find_tools p50 HTTP':>21}{'rank p50 CPU':>14}"
          f"{'answer p50':>12}")
    for r in results:
        print(f"{r.catalog.name:14}{r.tools:>6}{r.build_ms:>10.0f} ms{r.http_p50_ms:>18.2f} ms{r.cpu_p50_ms:>11.2f} ms"
              f"{r.answer_kb:>9.0f} kB")
    print("index build: a fresh CatalogSearch over the endpoint's view (wall); HTTP: the tools/call round trip "
          "(wall, client in this process); rank: CatalogSearch.find (CPU)")
    if misses:
        for r in results:
            if r.catalog.measurement_only or not r.misses:
                continue
            print(f"\n{r.catalog.name}: not found at {LIMIT} ({len(r.misses)})")
            for by, query, top in r.misses:
                print(f"  [{by}] {query!r} → {', '.join(top) or '(nothing)'}")
    print(f"\n({elapsed:.0f} s)")


async def run(args: argparse.Namespace) -> int:
    from tests.support import running_gateway

    t0 = time.perf_counter()
    catalogs = [c for c in CATALOGS if not args.only or c.name in args.only.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        semantic = (f"embeddings: {{url: {args.embeddings}, model: {args.model}}}" if args.embeddings
                    else f"semantic: {args.semantic}")
        text = config_text(catalogs, spec_files(catalogs, Path(tmp)), semantic=semantic)
        print(f"search: {{{semantic}}}")
        async with running_gateway(text, base_dir=tmp) as gw, aiohttp.ClientSession() as http:
            results = [await measure(gw, http, c, args.repeat) for c in catalogs]
    report(results, args.misses, time.perf_counter() - t0)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="passes over the queries for the CPU timing")
    parser.add_argument("--only", help="comma-separated catalogs (default: all)")
    parser.add_argument("--misses", action="store_true", help="print the tuning sets' misses at 5")
    parser.add_argument("--semantic", choices=("off", "local"), default="off",
                        help="the endpoints' semantic side: off (the lexical ranker alone) or the local model")
    parser.add_argument("--embeddings", metavar="URL", help="an OpenAI-compatible /v1/embeddings URL instead "
                        "(e.g. bench/embeddings_server.py serving the real model)")
    parser.add_argument("--model", default="all-MiniLM-L6-v2", help="the model name sent with --embeddings")
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
