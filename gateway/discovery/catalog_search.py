"""Tool search over a live :class:`~gateway.catalog.Catalog`: the seam ``discovery: search`` uses.

:class:`CatalogSearch` keeps one :class:`SearchIndex` in step with the catalog's ``tools`` snapshot.
It re-syncs lazily, on the first search after a rebuild produced a new snapshot, and only the tools
whose wire object changed are re-read (the rest are recognised by identity, then by fingerprint), so
a catalog that changes one tool costs one row. :meth:`find` answers ``find_tools`` with the caller's
visibility applied before the top *k* (see :meth:`SearchIndex.search`). The catalog may be an
endpoint's view (:class:`gateway.endpoints.view.EndpointView`): tools are indexed by the listing's
key, the name callers use there, with the OpenAPI tags and path of their operation when known.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gateway.discovery.index import SearchIndex, ToolDoc, doc_from_tool
from gateway.discovery.tools import DEFAULT_LIMIT, find_result

if TYPE_CHECKING:
    from gateway.catalog import Catalog, Snapshot

__all__ = ["CatalogSearch"]


class CatalogSearch:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.index = SearchIndex()
        self._seen: Snapshot | None = None
        self._docs: dict[str, tuple[dict[str, Any], ToolDoc]] = {}  # name → (wire it was made from, doc)

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
        return counts

    def find(self, query: str, limit: int = DEFAULT_LIMIT,
             visible: Callable[[str], bool] | None = None) -> dict[str, Any]:
        """The ``find_tools`` result for *query*: full Tool objects of the best visible tools."""
        self.refresh()
        snap = self.catalog.snapshot("tools")
        hits = self.index.search(query, limit, visible)
        return find_result(hits, {h.name: snap.by_key[h.name].wire for h in hits if h.name in snap.by_key})
