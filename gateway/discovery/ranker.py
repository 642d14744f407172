"""The :class:`Ranker` contract: what any ranking of a catalog's tools takes and returns.

A ranker is asked for the best tools for a query among those a caller may see; it answers with
hits, best first. The lexical core (:class:`~gateway.discovery.index.SearchIndex`: FTS5 BM25
re-ranked by generic signals) is one; the fusion (:func:`gateway.discovery.hybrid.fuse`) takes
the hits of one and of the embeddings' ranking and merges them, so it depends on this contract
only, never on how a ranker scores.

Contract of :meth:`Ranker.search`:

* at most *limit* hits, names unique, each one *visible* allows (*visible* is applied before the
  best *limit* are taken, so a hidden tool never takes a visible one's place);
* ordered best first; scores never rise down the list (their scale is the ranker's own: only the
  order is comparable across rankers);
* with *fill* (the default) a ranker may pad its answer with weaker matches up to *limit*, so a
  caller always has a second choice; ``fill=False`` asks for only the tools it matched (what a
  fusion wants: a padded tail would outrank the other side's real candidates).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from gateway.discovery.index import SearchHit

__all__ = ["Ranker"]


@runtime_checkable
class Ranker(Protocol):
    """Ranks a catalog's tools for a query (see the module doc for the contract)."""

    def search(self, query: str, limit: int = 8, visible: Callable[[str], bool] | None = None,
               fill: bool = True) -> list[SearchHit]:
        """The best *limit* tools for *query* among those *visible* allows, best first."""
        ...
