"""Tool search over a live :class:`~gateway.catalog.Catalog`: the seam ``discovery: search`` uses.

:class:`CatalogSearch` keeps one :class:`SearchIndex` in step with the catalog's ``tools`` snapshot.
It re-syncs lazily, on the first search after a rebuild produced a new snapshot, and only the tools
whose wire object changed are re-read (the rest are recognised by identity, then by fingerprint), so
a catalog that changes one tool costs one row. :meth:`find` answers ``find_tools`` with the caller's
visibility applied before the top *k* (see :meth:`SearchIndex.search`). The catalog may be an
endpoint's view (:class:`gateway.endpoints.view.EndpointView`): tools are indexed by the listing's
key, the name callers use there, with the OpenAPI tags and path of their operation when known.

With a :class:`~gateway.discovery.hybrid.Semantic` (an endpoint's ``search.embeddings``),
:meth:`embed` brings the tool vectors up to the index (only tools whose fingerprint has none) and
:meth:`find` given a query vector fuses the lexical top *n* with the embedding top *n*, both over
the caller's visible tools only; without a vector (the URL failed, or none is configured) it ranks
lexically alone, exactly as without embeddings. Either way it answers ``min(limit, visible tools)``
tools (:meth:`SearchIndex.search` back-fills; after a fusion, what is still missing comes from the
lexical back-fill, below everything fused).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from gateway.discovery.index import SearchHit, SearchIndex, ToolDoc, doc_from_tool
from gateway.discovery.tools import DEFAULT_LIMIT, MAX_LIMIT, find_result

if TYPE_CHECKING:
    from gateway.catalog import Catalog, Snapshot
    from gateway.discovery.embeddings import Matrix
    from gateway.discovery.hybrid import Semantic

__all__ = ["CatalogSearch"]


class CatalogSearch:
    def __init__(self, catalog: Catalog, semantic: Semantic | None = None, packs: Iterable[str] = ()) -> None:
        self.catalog = catalog
        self.index = SearchIndex(packs)  # packs: the domain packs the endpoint enabled (search.packs)
        self.semantic = semantic  # replaceable (a reload that changes the endpoint's embeddings)
        self._seen: Snapshot | None = None
        self._docs: dict[str, tuple[dict[str, Any], ToolDoc]] = {}  # name → (wire it was made from, doc)
        # name → the doc's fingerprint; a new object whenever the tools changed (the vector store
        # compiles its matrix once per object).
        self.prints: dict[str, str] = {}

    def stale(self) -> bool:
        """Whether the catalog's tools changed since the last :meth:`refresh`."""
        return self.catalog.snapshot("tools") is not self._seen

    def refresh(self) -> tuple[int, int]:
        """Bring the index up to the catalog's current tools; (rows written, rows deleted)."""
        snap = self.catalog.snapshot("tools")
        if snap is self._seen:
            return 0, 0
        docs: dict[str, tuple[dict[str, Any], ToolDoc]] = {}
        for entry in snap.entries:
            # By the listing's key: the name callers use (an endpoint's, after its renames).
            cached = self._docs.get(entry.key)
            if cached is not None and cached[0] is entry.wire:
                docs[entry.key] = cached
            else:
                prefix = self.catalog.prefixes.get(entry.connector.name, "")
                origin = getattr(entry.connector, "tool_origin", None)  # OpenAPI: the operation's tags, path
                tags, path = origin(entry.local) if origin is not None else ((), "")
                docs[entry.key] = (entry.wire, doc_from_tool(entry.wire, tags=tags, path=path, prefix=prefix))
        counts = self.index.sync(doc for _, doc in docs.values())
        self._docs, self._seen = docs, snap
        if counts != (0, 0):  # the index's fingerprints changed: a new object for the vector store
            self.prints = dict(self.index.fingerprints)
        return counts

    def pending(self) -> bool:
        """Whether :meth:`embed` has tools to embed now (none without embeddings)."""
        return self.semantic is not None and self.semantic.pending(self.prints)

    async def embed(self) -> int:
        """Embed the tools that have no vector yet (see :meth:`Semantic.sync`); how many were."""
        semantic, prints, docs = self.semantic, self.prints, self._docs
        if semantic is None:
            return 0
        from gateway.discovery.hybrid import tool_texts  # numpy & co. only load where embeddings are set
        return await semantic.sync(prints, lambda name: tool_texts(docs[name][1]))

    async def query_vector(self, query: str) -> Matrix | None:
        """The vector of *query* for :meth:`find`, or None (no embeddings, or they failed: lexical).
        What is embedded is :func:`~gateway.discovery.hybrid.query_text` (the values taken out)."""
        if self.semantic is None:
            return None
        from gateway.discovery.hybrid import query_text
        return await self.semantic.query(query_text(query, self.index.lexicon))

    def find(self, query: str, limit: int = DEFAULT_LIMIT, visible: Callable[[str], bool] | None = None,
             vector: Matrix | None = None) -> dict[str, Any]:
        """The ``find_tools`` result for *query*: full Tool objects of the best visible tools
        (hybrid when *vector*, the query's embedding from :meth:`query_vector`, is given)."""
        self.refresh()
        snap = self.catalog.snapshot("tools")
        semantic = self.semantic
        if vector is None or semantic is None:
            hits = self.index.search(query, limit, visible)
        else:
            from gateway.discovery.hybrid import CANDIDATES, fuse
            n = min(max(limit, CANDIDATES), MAX_LIMIT)
            # Tools that share no word with the query are no lexical candidates: they must not
            # outrank what the embeddings found. They only fill what the fusion leaves empty.
            lexical = self.index.search(query, n, visible, fill=False)
            nearest = semantic.rank(vector, self.prints, n, visible)
            hits = fuse(lexical, nearest, limit, semantic.config.weight, domain_pack=bool(self.index.lexicon.packs))
            if len(hits) < limit:
                found = {h.name for h in hits}
                floor = min((h.score for h in hits), default=0.0)
                hits += [SearchHit(h.name, floor) for h in self.index.search(query, limit, visible)
                         if h.name not in found][:limit - len(hits)]
        return find_result(hits, {h.name: snap.by_key[h.name].wire for h in hits if h.name in snap.by_key})
