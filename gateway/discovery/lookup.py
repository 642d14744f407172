"""Finding a query's words in the vocabulary map: inflected forms, phrasal verbs, known words.

A map key is also found in an inflected form ("tickets" → ticket, "deploying" → deploy), but only
by undoing a whole inflection, never by stemming: a stemmer makes "findings" the search verb
"find". A key found through an -ed/-ing form or as the plural of a verb ("published",
"requests") names a thing or a state rather than asks the action.
"""

from __future__ import annotations

from collections.abc import Iterator

from gateway.discovery.concepts import VERBS
from gateway.discovery.fillers import STOPWORDS
from gateway.discovery.vocabulary import SYNONYMS

__all__ = ["MAX_KEY", "VERB_FORMS", "inflections", "lookup", "known", "phrasal", "ordinary", "imperative"]

MAX_KEY = max(len(k) for k in SYNONYMS)  # the longest key, in words
VERB_FORMS = frozenset(k[0] for k in SYNONYMS if len(k) == 1) | VERBS
_FIRST_WORDS = frozenset(k[0] for k in SYNONYMS)
# Keys meaning an action ("read" → get, "write" → create): ordinary words in "read/write".
_VERB_KEYS = frozenset(k[0] for k, alts in SYNONYMS.items() if len(k) == 1 and any(a in VERBS for g in alts for a in g))
# Words that open a request: keys meaning an action, alone or as a phrasal verb's first word ("take
# him off", "re-run"), the spec verbs and the reading verbs the map leaves out as stop words.
_OPENERS = frozenset(k[0] for k, alts in SYNONYMS.items()
                     if any(a in VERBS for g in alts for a in g) and (len(k) == 1 or k[0] not in STOPWORDS)) | VERBS \
    | frozenset("get give show retrieve obtain grab inspect describe display return fetch tell".split())


def inflections(word: str) -> Iterator[str]:
    """The forms a map key may have for an inflected *word*: one suffix off ("tickets" → ticket,
    "deploying" → deploy, "merged" → merge). Deliberately lighter than a stemmer, which would
    also turn "findings" into "find" (a search verb): only whole inflections are undone."""
    if len(word) <= 4:
        return
    if word.endswith("ies"):
        yield word[:-3] + "y"
    if word.endswith("es"):
        yield word[:-2]
    if word.endswith("s") and not word.endswith("ss"):
        yield word[:-1]
    for suffix in ("ed", "ing"):
        if word.endswith(suffix):
            base = word[:-len(suffix)]
            yield from (base, base + "e")
            if len(base) > 2 and base[-1] == base[-2]:
                yield base[:-1]  # "starred" → star, "shipping" → ship


def lookup(key: tuple[str, ...]) -> tuple[tuple[tuple[str, ...], ...] | None, bool]:
    """The alternatives of *key* and whether they name a thing rather than ask an action: found
    through an -ed/-ing form ("published") or as the plural of a verb ("requests", "reports":
    requests ask in the imperative, "request a review")."""
    alts = SYNONYMS.get(key)
    if alts is not None:
        return alts, False
    for form in inflections(key[-1]):
        alts = SYNONYMS.get((*key[:-1], form))
        if alts is not None:
            return alts, key[-1].endswith(("ed", "ing", "s"))
    return None, False


def known(word: str) -> bool:
    """Whether *word* is the vocabulary's: a stop word, a spec verb or (the start of) a map key."""
    return word in STOPWORDS or word in VERBS or word in _FIRST_WORDS or lookup((word,))[0] is not None


def phrasal(key: tuple[str, ...]) -> tuple[tuple[str, ...], ...] | None:
    """The map's meaning of a two-word phrasal verb ("kick out", "turn off"), if it is one."""
    return SYNONYMS.get(key)


def ordinary(word: str) -> bool:
    """Whether *word* in ``x/y`` is an ordinary word (``read/write``, ``and/or``, ``ci/cd``),
    not part of an owner/name."""
    return len(word) <= 2 or word in STOPWORDS or word in _VERB_KEYS


def imperative(word: str) -> bool:
    """Whether *word*, opening a clause, asks for an action ("rerun", "take", "list", "show")."""
    return word in _OPENERS
