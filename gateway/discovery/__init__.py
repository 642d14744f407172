"""Tool search: a full-text index over a catalog's tools, ranked for how people and models ask.

* :mod:`.words` -- splitting names and text into words (``listPullRequests`` → list pull requests).
* :mod:`.vocabulary` -- the words callers use mapped to the words API descriptions use ("PR" →
  pull request, "ticket" → issue, "pipeline" → workflow run, "ship" → release, ...), by domain;
  :mod:`.query` reads a query with it (:mod:`.arguments`, :mod:`.senses`, :mod:`.fillers`,
  :mod:`.lookup`, :mod:`.soft`) into a :class:`~.concepts.Query`; :mod:`.synonyms` re-exports them.
* :mod:`.index` -- :class:`SearchIndex`, SQLite FTS5 (BM25) in memory, updated incrementally,
  searched with a per-principal visibility filter applied before the top *k* are taken.
"""

from gateway.discovery.index import SearchHit, SearchIndex, ToolDoc, doc_from_tool

__all__ = ["SearchIndex", "SearchHit", "ToolDoc", "doc_from_tool"]
