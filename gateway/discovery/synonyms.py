"""How people ask → how API descriptions say it: the vocabulary's public face.

The pieces live in their own modules: the map by domain (:mod:`.vocabulary`), the words and
frames that ask nothing (:mod:`.fillers`), the soft hints (:mod:`.soft`), what a parsed query is
(:mod:`.concepts`), finding words in the map (:mod:`.lexicon`) and reading a query with all of it
(:mod:`.query`). This module re-exports them under the names callers have used: the general
core's (:data:`SYNONYMS`, :data:`SOFT`; :func:`parse` reads with the core unless given a
lexicon). A domain pack's words are in :mod:`.packs`, merged by :func:`.packs.lexicon`.
"""

from __future__ import annotations

from gateway.discovery.concepts import VERBS, Concept, Query
from gateway.discovery.fillers import STOPWORDS
from gateway.discovery.query import expand, parse
from gateway.discovery.soft import SOFT
from gateway.discovery.vocabulary import SYNONYMS

__all__ = ["Concept", "Query", "parse", "expand", "STOPWORDS", "SYNONYMS", "SOFT", "VERBS"]
