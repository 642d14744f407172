"""The vocabulary map itself: :data:`SYNONYMS` and :func:`add`, which the domain modules call.

Keys and alternatives are lower-case word sequences as :func:`gateway.discovery.words.split_words`
yields them; alternatives are phrases; ``+`` joins concepts a key carries at once.
"""

from __future__ import annotations

from gateway.discovery.words import split_words

__all__ = ["SYNONYMS", "add"]

# Verbs are mapped to the CRUD words specs use; nouns to the spec's nouns. "get", "show", "give"
# are stop words (:mod:`gateway.discovery.fillers`): every read operation says "get"/"list", so
# they rank nothing.
SYNONYMS: dict[tuple[str, ...], tuple[tuple[str, ...], ...]] = {}


def add(keys: str, alts: str) -> None:
    """``add("pr,prs", "pull request,pull")``: each key means any of the phrases. ``+`` joins
    concepts a key carries at once: ``add("ship", "release + create")`` (ship = create a release).
    A key is defined once: a second definition would silently replace the first (ValueError)."""
    groups = tuple(tuple(a.strip() for a in g.split(",") if a.strip()) for g in alts.split("+") if g.strip())
    for key in keys.split(","):
        words = tuple(split_words(key))
        if words in SYNONYMS:
            raise ValueError(f"vocabulary key {key!r} is defined twice")
        SYNONYMS[words] = groups
