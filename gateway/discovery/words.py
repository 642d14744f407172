"""Splitting identifiers and prose into lower-case words, and stemming them.

``listPullRequests``, ``list_pull_requests``, ``list-pull-requests`` and ``pulls/list`` all become
ordinary words, so a name is searchable by the words it is made of. :func:`stem` folds inflections
(Snowball's English stemmer: starred/stars → star, reviewers → review, merged/merging → merg) so
the re-rank compares a caller's "starred" with a spec's "stars" the way FTS5's own porter
tokenizer does for BM25. Stems are cached (bounded): a catalog has a few thousand distinct words.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import snowballstemmer

__all__ = ["split_words", "words_text", "stem", "stems"]

# camelCase / PascalCase / acronym boundaries: "getHTTPStatus" → get HTTP Status; an acronym's
# plural stays one word ("PRs", "APIs").
_CAMEL = re.compile(r"(?<=[a-z0-9])(?<![A-Z]s)(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])(?![A-Z]s\b)")
_NON_WORD = re.compile(r"[^0-9A-Za-z]+")
# A Snowball stemmer keeps the word it works on in the object: one per thread (search endpoints
# build their indexes in worker threads at once; a shared one raised IndexError mid-word).
_LOCAL = threading.local()


def split_words(text: str) -> list[str]:
    """The words of *text*, lower-cased, with identifiers split at case changes and punctuation."""
    out: list[str] = []
    for chunk in _NON_WORD.split(text):
        if not chunk:
            continue
        if chunk.islower() or chunk.isdigit():
            # No capital: no camel boundary (each needs one) and nothing to lower-case. Most of a
            # description's words; the regex per word was most of indexing a tool's stems.
            out.append(chunk)
        else:
            out.extend(w.lower() for w in _CAMEL.split(chunk) if w)
    return out


def words_text(text: str) -> str:
    """:func:`split_words` joined by spaces (what goes into an index column)."""
    return " ".join(split_words(text))


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The stem of one lower-case word ("repositories" → "repositori", "stars" → "star")."""
    stemmer = getattr(_LOCAL, "stemmer", None)
    if stemmer is None:
        stemmer = _LOCAL.stemmer = snowballstemmer.stemmer("english")
    return str(stemmer.stemWord(word))


def stems(text: str) -> list[str]:
    """The stems of the words of *text*, in order."""
    return [stem(w) for w in split_words(text)]
