"""Tool search: a full-text index over a catalog's tools, ranked for how people and models ask.

* :mod:`.words` -- splitting names and text into words (``listPullRequests`` → list pull requests).
* :mod:`.vocabulary` -- the words callers use mapped to the words API descriptions use, true of
  any API ("remove" → delete, "show all" → list); :mod:`.packs` -- domain packs an endpoint
  enables (``github``: "PR" → pull request, "ticket" → issue, ...), merged with the core into a
  :class:`~.lexicon.Lexicon`;
  :mod:`.query` reads a query with it (:mod:`.arguments`, :mod:`.senses`, :mod:`.fillers`,
  :mod:`.soft`) into a :class:`~.concepts.Query`; :mod:`.synonyms` re-exports them.
* :mod:`.index` -- :class:`SearchIndex`, SQLite FTS5 (BM25) in memory, updated incrementally,
  searched with a per-principal visibility filter applied before the top *k* are taken.
"""

from gateway.discovery.index import SearchHit, SearchIndex, ToolDoc, doc_from_tool

__all__ = ["SearchIndex", "SearchHit", "ToolDoc", "doc_from_tool"]
