"""Splitting identifiers and prose into lower-case words.

``listPullRequests``, ``list_pull_requests``, ``list-pull-requests`` and ``pulls/list`` all become
ordinary words, so a name is searchable by the words it is made of. Stemming is FTS5's (porter);
this module only splits and lower-cases.
"""

from __future__ import annotations

import re

__all__ = ["split_words", "words_text"]

# camelCase / PascalCase / acronym boundaries: "getHTTPStatus" → get HTTP Status; an acronym's
# plural stays one word ("PRs", "APIs").
_CAMEL = re.compile(r"(?<=[a-z0-9])(?<![A-Z]s)(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])(?![A-Z]s\b)")
_NON_WORD = re.compile(r"[^0-9A-Za-z]+")


def split_words(text: str) -> list[str]:
    """The words of *text*, lower-cased, with identifiers split at case changes and punctuation."""
    out: list[str] = []
    for chunk in _NON_WORD.split(text):
        if chunk:
            out.extend(w.lower() for w in _CAMEL.split(chunk) if w)
    return out


def words_text(text: str) -> str:
    """:func:`split_words` joined by spaces (what goes into an index column)."""
    return " ".join(split_words(text))
