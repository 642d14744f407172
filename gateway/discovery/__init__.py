"""Tool search: a full-text index over a catalog's tools, ranked for how people and models ask.

* :mod:`.words` -- splitting names and text into words (``listPullRequests`` → list pull requests).
* :mod:`.vocabulary` -- the words callers use mapped to the words API descriptions use, true of
  any API ("remove" → delete, "show all" → list); :mod:`.packs` -- domain packs an endpoint
  enables (``github``: "PR" → pull request, "ticket" → issue, ...), merged with the core into a
  :class:`~.lexicon.Lexicon`;
  :mod:`.query` reads a query with it (:mod:`.arguments`, :mod:`.senses`, :mod:`.fillers`,
  :mod:`.soft`) into a :class:`~.concepts.Query`; :mod:`.synonyms` re-exports them.
* :mod:`.index` -- :class:`SearchIndex`, SQLite FTS5 (BM25) in memory, updated incrementally,
  searched with a per-principal visibility filter applied before the top *k* are taken: the
  lexical :class:`~.ranker.Ranker` (:mod:`.ranker`: the contract a fusion consumes).

Importing the package loads none of them: the names below are looked up on first use (PEP 562),
so a gateway whose endpoints never search (it still names ``find_tools`` through :mod:`.tools`)
never loads the ranker, its stemmer or its vocabulary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.discovery.index import SearchHit, SearchIndex, ToolDoc, doc_from_tool
    from gateway.discovery.ranker import Ranker

__all__ = ["SearchIndex", "SearchHit", "ToolDoc", "doc_from_tool", "Ranker"]


def __getattr__(name: str) -> Any:
    if name == "Ranker":
        from gateway.discovery import ranker
        return ranker.Ranker
    if name in __all__:
        from gateway.discovery import index
        return getattr(index, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
