"""The core vocabulary map itself: :data:`CORE` and :func:`add`, which the core's modules call.

Keys and alternatives are lower-case word sequences as :func:`gateway.discovery.words.split_words`
yields them; alternatives are phrases; ``+`` joins concepts a key carries at once.
"""

from __future__ import annotations

from gateway.discovery.lexicon import Vocabulary

__all__ = ["CORE", "SYNONYMS", "add"]

# Verbs are mapped to the CRUD words specs use. "get", "show", "give" are stop words
# (:mod:`gateway.discovery.fillers`): every read operation says "get"/"list", so they rank nothing.
CORE = Vocabulary()
SYNONYMS = CORE.entries
add = CORE.add
