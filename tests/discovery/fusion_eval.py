"""In-process evaluation of lexical, dense and fused tool search on the labelled catalogs (issue 28).

Shared by ``tests/discovery/test_fusion_recall.py`` and ``bench/discovery_vectors.py``; not part
of the wheel. One gateway is started with every catalog of ``bench/discovery_catalogs.py`` (its
``CATALOGS`` without ``github-core``) behind a ``discovery: search`` endpoint with the catalog's
packs, so tool names and texts are those served. Per labelled task it records:

* ``bm25``: the top 5 of :class:`PlainBM25` (the bench's plain baseline);
* ``lexical``: ``SearchIndex.search(query, 5)`` of the endpoint's :class:`CatalogSearch`, as
  ``find_tools`` ranks without embeddings;
* ``dense``: the top 5 by cosine over the committed vectors (``tests/data/discovery/vectors``),
  through :meth:`Semantic.rank` (the same visibility and ``min_similarity`` rules as served);
* ``fused``: :meth:`CatalogSearch.find` given the query's committed vector, i.e. the served
  hybrid path (candidates, :func:`gateway.discovery.hybrid.fuse`, back-fill);
* the inputs of the fusion (the lexical top 50 without fill and the dense top 50, with scores),
  so another fusion can be replayed on them without the gateway (:func:`replay`).

Vectors are keyed by served tool name and a hash of the exact texts embedded (its views,
:func:`gateway.discovery.hybrid.tool_texts`: one vector each); a tool whose text changed since they
were made is *stale* (:class:`StaleVectors`), and the message says how to regenerate them. Queries
are keyed by their text; what was embedded for one (:func:`gateway.discovery.hybrid.query_text`) is
kept with it, and a query whose embedded text changed is stale too.

Measurement-only sets (``box``, ``digitalocean``, ``slack``, ``sendgrid``, GitHub's ``blind5``)
are evaluated like the others, but callers must only ever report aggregates for them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from gateway.discovery.index import SearchHit

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "discovery"
VECTORS = DATA / "vectors"
CANDIDATES = 50
LIMIT = 5
REGENERATE = ("regenerate: PYTHONPATH=$PWD .venv/bin/python bench/discovery_vectors.py dump && "
              "PYTHONPATH=$PWD .venv/bin/python bench/discovery_vectors.py embed --local "
              "(all-MiniLM-L6-v2 through the gateway's numpy encoder; `embed` without --local in a "
              "sentence-transformers venv gives the same vectors to 1e-7)")
MODEL = "all-MiniLM-L6-v2"


def bench() -> ModuleType:
    """``bench/discovery_catalogs.py`` as a module (the catalogs, labels and plain BM25)."""
    name = "bench_discovery_catalogs"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "bench" / "discovery_catalogs.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def catalogs() -> list[Any]:
    """The catalogs evaluated: the bench's, without ``github-core`` (the same tools, no pack)."""
    return [c for c in bench().CATALOGS if c.name != "github-core"]


def task_files(catalog: Any) -> list[str]:
    """The labelled sets over a catalog: every ``github-tasks*.yaml`` for GitHub."""
    if catalog.name == "github":
        return sorted(p.name for p in DATA.glob("github-tasks*.yaml"))
    return [catalog.tasks]


def measurement_only(catalog: Any, tasks_file: str) -> bool:
    return bool(catalog.measurement_only) and (catalog.name != "github" or "blind5" in tasks_file)


def views_hash(views: str | Sequence[str]) -> str:
    """The hash of what is embedded for a tool: its text, or its views (joined by NUL)."""
    return text_hash(views if isinstance(views, str) else "\0".join(views))


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class StaleVectors(AssertionError):
    """The committed vectors do not match what the gateway embeds now."""


@dataclass
class Vectors:
    """One catalog's committed vectors (float16 on disk, float32 here, rows normalised)."""

    tools: dict[str, np.ndarray[Any, Any]]  # served name → vector, or one per view (views × dimension)
    hashes: dict[str, str]  # served name → hash of the text (views) embedded (views_hash)
    queries: dict[str, np.ndarray[Any, Any]]  # query text → vector
    query_texts: dict[str, str] = field(default_factory=dict)  # query → what was embedded (else itself)

    @classmethod
    def load(cls, name: str) -> Vectors:
        path = VECTORS / f"{name}.npz"
        if not path.exists():
            raise StaleVectors(f"{path} is missing; {REGENERATE}")
        with np.load(path, allow_pickle=False) as z:
            tool_rows = _normalised(z["tool_vectors"])
            query_rows = _normalised(z["query_vectors"])
            names, hashes, queries = list(z["tool_names"]), list(z["tool_hashes"]), list(z["queries"])
            embedded = list(z["query_texts"]) if "query_texts" in z.files else queries
        return cls({n: tool_rows[i] for i, n in enumerate(names)}, dict(zip(names, hashes, strict=True)),
                   {q: query_rows[i] for i, q in enumerate(queries)}, dict(zip(queries, embedded, strict=True)))

    def check(self, name: str, texts: Mapping[str, str | Sequence[str]],
              queries: Sequence[str] | Mapping[str, str]) -> None:
        """Raise :class:`StaleVectors` unless every served tool (*texts*: name → text or views) and
        query (or query → the text embedded for it) has a current vector."""
        changed = [n for n, t in texts.items() if self.hashes.get(n) != views_hash(t)]
        embedded = queries if isinstance(queries, Mapping) else {q: q for q in queries}
        missing_q = [q for q, e in embedded.items() if q not in self.queries or self.query_texts.get(q, q) != e]
        if changed or missing_q:
            raise StaleVectors(f"{name}: {len(changed)} tool text(s) changed or new since the vectors were made "
                               f"(e.g. {changed[:3]}), {len(missing_q)} query(ies) without a vector; {REGENERATE}")


def _normalised(rows: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    out = rows.astype(np.float32)
    norms = np.linalg.norm(out, axis=-1, keepdims=True)
    return out / np.where(norms == 0, 1, norms)


@dataclass
class Task:
    query: str
    by: str  # person | model | "" (a set without wordings)
    want: set[str]
    bm25: list[str] = field(default_factory=list)
    lexical: list[str] = field(default_factory=list)
    dense: list[str] = field(default_factory=list)
    fused: list[str] = field(default_factory=list)
    lex_candidates: list[SearchHit] = field(default_factory=list)  # the fusion's lexical input
    dense_candidates: list[SearchHit] = field(default_factory=list)  # the fusion's semantic input
    backfill: list[str] = field(default_factory=list)  # the lexical ranking with fill (after fusion)
    domain_pack: bool = False  # whether the endpoint's lexical reading has a domain pack (fuse's input)


@dataclass
class Evaluated:
    catalog: Any
    tasks_file: str
    measurement_only: bool
    tasks: list[Task]


def recall(tasks: Sequence[Task], ranking: Callable[[Task], list[str]]) -> tuple[float, float]:
    """(recall@1, recall@5) of *ranking* over *tasks* (a task counts when any label is found)."""
    n = len(tasks) or 1
    at1 = at5 = 0
    for task in tasks:
        top = ranking(task)[:LIMIT]
        at1 += bool(top) and top[0] in task.want
        at5 += bool(task.want & set(top))
    return at1 / n, at5 / n


def wordings(tasks: Sequence[Task]) -> dict[str, list[Task]]:
    """The tasks per wording (``person``, ``model``) and ``all``."""
    out: dict[str, list[Task]] = {}
    for by in ("person", "model"):
        chosen = [t for t in tasks if t.by == by]
        if chosen:
            out[by] = chosen
    out["all"] = list(tasks)
    return out


def replay(task: Task, fuse: Callable[..., list[SearchHit]], limit: int = LIMIT, **options: Any) -> list[str]:
    """The served hybrid answer with another *fuse* (given *options*, e.g. the served fuse's
    ``domain_pack=task.domain_pack``): its hits, then the lexical back-fill."""
    hits = [h.name for h in fuse(task.lex_candidates, task.dense_candidates, limit, **options)]
    if len(hits) < limit:
        hits += [n for n in task.backfill if n not in hits][:limit - len(hits)]
    return hits


def config_text(cats: Sequence[Any]) -> str:
    b = bench()
    with tempfile.TemporaryDirectory() as tmp:
        return str(b.config_text(cats, b.spec_files(cats, Path(tmp))))


def _host(gw: Any, name: str) -> Any:
    """The running gateway's endpoint *name* (every catalog is served as one)."""
    host = gw.gateway.endpoints.get(name)
    assert host is not None, f"the bench's config serves no endpoint {name!r}"
    return host


async def served_texts(cats: Sequence[Any] | None = None) -> dict[str, dict[str, Any]]:
    """Per catalog: the served tools' views (``tool_texts``), every labelled query and what is
    embedded for it (``query_texts``, :func:`~gateway.discovery.hybrid.query_text`)."""
    from gateway.discovery.catalog_search import CatalogSearch
    from gateway.discovery.hybrid import query_text, tool_texts
    from tests.support import running_gateway

    cats = list(cats or catalogs())
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        async with running_gateway(config_text(cats), base_dir=tmp) as gw:
            for cat in cats:
                search = CatalogSearch(_host(gw, cat.name).view, packs=cat.packs)
                search.refresh()
                texts = {name: list(tool_texts(doc)) for name, (_, doc) in search._docs.items()}
                queries = list(dict.fromkeys(t["query"] for f in task_files(cat) for t in bench().load_set(cat, f)[1]))
                out[cat.name] = {"tools": texts, "queries": queries,
                                 "query_texts": [query_text(q, search.index.lexicon) for q in queries]}
    return out


async def evaluate(cats: Sequence[Any] | None = None) -> list[Evaluated]:
    """Every labelled set of *cats* (default: all), ranked four ways (see the module doc)."""
    from gateway.discovery.catalog_search import CatalogSearch
    from gateway.discovery.hybrid import Semantic, query_text, tool_texts
    from gateway.endpoints.config import EmbeddingsConfig
    from tests.support import running_gateway

    b = bench()
    cats = list(cats or catalogs())
    results: list[Evaluated] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with running_gateway(config_text(cats), base_dir=tmp) as gw:
            for cat in cats:
                view = _host(gw, cat.name).view
                # The offline vectors stand in for the embeddings URL (never asked: the store is full).
                semantic = Semantic(EmbeddingsConfig(url="http://127.0.0.1:9/v1/embeddings", model=MODEL),
                                    cat.name)
                search = CatalogSearch(view, semantic=semantic, packs=cat.packs)
                search.refresh()
                texts = {name: tool_texts(doc) for name, (_, doc) in search._docs.items()}
                files = task_files(cat)
                sets = {f: b.load_set(cat, f)[1] for f in files}
                vectors = Vectors.load(cat.name)
                vectors.check(cat.name, texts, {t["query"]: query_text(t["query"], search.index.lexicon)
                                                for ts in sets.values() for t in ts})
                names = list(search.prints)
                semantic.store.put([search.prints[n] for n in names], np.stack([vectors.tools[n] for n in names]))
                semantic.complete_for = search.prints
                bm25 = b.PlainBM25((e.key, e.local, e.wire) for e in view.snapshot("tools").entries)
                for f in files:
                    wants, unresolved = b.resolve_labels(cat, view, f)
                    assert not unresolved, f"{cat.name} {f}: {len(unresolved)} label(s) name no served tool"
                    tasks = []
                    for raw, want in zip(sets[f], wants, strict=True):
                        q = raw["query"]
                        vec = vectors.queries[q]
                        task = Task(q, raw.get("by", ""), want, domain_pack=bool(search.index.lexicon.packs))
                        task.bm25 = b.PlainBM25.search(bm25, q, LIMIT)
                        task.lexical = [h.name for h in search.index.search(q, LIMIT)]
                        task.dense_candidates = semantic.rank(vec, search.prints, CANDIDATES, None)
                        task.dense = [h.name for h in task.dense_candidates[:LIMIT]]
                        task.lex_candidates = search.index.search(q, CANDIDATES, None, fill=False)
                        task.backfill = [h.name for h in search.index.search(q, LIMIT)]
                        task.fused = [t["name"] for t in search.find(q, LIMIT, vector=vec)["structuredContent"]["tools"]]
                        tasks.append(task)
                    results.append(Evaluated(cat, f, measurement_only(cat, f), tasks))
    return results


__all__ = ["Evaluated", "Task", "Vectors", "StaleVectors", "evaluate", "served_texts", "recall", "wordings",
           "replay", "catalogs", "task_files", "measurement_only", "text_hash", "views_hash"]
