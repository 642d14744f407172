"""The second ranking stage: re-scoring BM25's best candidates by what they cover.

BM25 (stage one, in :mod:`.index`) finds candidates; it rewards a word repeated in a long
description as much as a word in the name, and a common word ("repository") nearly as much as the
one word that says what the caller wants ("stargazers"). This stage scores each candidate by:

* **coverage**: for each concept of the query, the best field it occurs in (name 1.0, title 0.9,
  tags and path 0.5, description 0.3, parameter names 0.2), weighted by the concept's IDF over
  the catalog, as a share of what full coverage would score. A concept no tool has (a person's
  name, a version number) weighs nothing; a rare one weighs most. Words are compared as stems
  (:func:`~gateway.discovery.words.stem`), a concept's phrase matches a field when all its stems
  occur in it;
* **BM25**, normalised to the best candidate, as a tie-breaker with half coverage's weight;
* **extra name words**: the tool's name content words no concept asked for, over the name's
  length + 1, the namespace counting half and function words (by, for) not at all
  (``issues_create`` beats ``issues_create-for-org-and-enterprise`` when nobody said "org");
* **deprecated** tools lose a little to current ones doing the same;
* **intent** (:mod:`.intent`): the query's kind of operation against the tool's annotations;
* **soft hints**: "my" → authenticated user, "who" → user/member, a plural read → list: a small
  bonus when the name or title matches, never a cost.

:class:`HeadIndex` (tools by name and title stems) supplies the candidates BM25 ranks too low
(including a namespace's plain operation, ``repos_update`` for "rename the repo"), the catalog's
own verbs (first words of names, with the kinds of the tools they start) and whether the catalog
names tools with a word (no person is called "webhook").

Each tool's stems are computed once, when it is indexed (:func:`profile`), as one dict: stem →
the fields it occurs in (bits). A phrase's fields are one look-up per stem (a substring test per
field and phrase before: ~2.5x the re-rank's CPU); the stem strings are shared, and 6,000 profiles
stay a few MB (~6 MB, ~2 MB more than a space-joined string per field).
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from gateway.discovery.arguments import KINDS
from gateway.discovery.concepts import Concept, Query
from gateway.discovery.intent import agreement
from gateway.discovery.lexicon import BM25_SHARE
from gateway.discovery.words import split_words, stem

__all__ = ["Profile", "profile", "rerank", "HeadIndex", "FIELD_WEIGHTS", "SCOPES"]

# Field order of a Profile and how much a concept found there says about the tool.
# A read's answer fields (``archived`` of the repository ``repos_get`` returns) say what it answers;
# they say most when the caller asks a question ("is acme/web archived", "how many stars ...").
FIELD_WEIGHTS = (1.0, 0.9, 0.5, 0.5, 0.3, 0.3, 0.2)  # name, title, tags, path, description, answers, params
_QUESTION_WEIGHTS = (1.0, 0.9, 0.5, 0.5, 0.3, 0.5, 0.2)
# A state asked about in a question ("is acme/web *archived*") is a field of the thing's read.
_STATE_WEIGHTS = (1.0, 0.9, 0.5, 0.5, 0.3, 1.0, 0.2)
# A field asked for by name ("the *title*, *body* and *state* of issue 77") is what a read answers;
# a tool named for it ("list-assignees") is another operation.
_ANSWER_WEIGHTS = (0.5, 0.45, 0.25, 0.25, 0.15, 1.0, 0.1)
_SCOPE_SHARE = 0.9
_EXTRA_PENALTY = 0.6
_SOFT_BONUS = 0.1
_HEAD_CAP = 400
_NAMESPACE_SHARE = 0.5
_DEPRECATED_PENALTY = 0.1
VALUE_KINDS = KINDS - {"one", "repository"}  # soft hints that name what a value is
# The plain verbs of each kind, for a query whose verb says only its kind ("get the org").
_PLAIN = {"read": ("get", "list"), "write": ("creat", "updat"), "delete": ("delet",)}
# The owners an operation can be scoped to in its name ("list-for-user", "list-for-org"); a pack
# adds its world's (SenseTables.scopes: GitHub's "-for-authenticated-user", "-for-repo").
SCOPES = frozenset("user org organization enterprise team".split())
_FUNCTION_WORDS = frozenset("a an the for in on at by with from to of and or into onto as".split())


@dataclass(frozen=True, slots=True)
class Profile:
    """A tool's stems with the fields they occur in, its name's stems (namespace apart) and its
    kind."""

    # Stem → the fields it occurs in, as bits: bit *k* for the *k*-th of :data:`FIELD_WEIGHTS`'
    # fields (name, title, tags, path, description, answers, params), :data:`HEAD_BIT` for the
    # name up to its scope ("reactions create" of ``reactions_create-for-release``: what the tool
    # acts on; a word only in the scope, "release", is where it acts, not what it makes). A
    # phrase's fields are those all its stems have: one dict look-up per stem.
    stems: dict[str, int] = field(hash=False, compare=True)
    name: tuple[str, ...]
    kind: str
    namespace: tuple[str, ...] = ()
    deprecated: bool = False
    headed: bool = False  # whether the name has a scope that is no owner's (then HEAD_BIT is set)


HEAD_BIT = 1 << len(FIELD_WEIGHTS)


def _stems(texts: Sequence[str]) -> dict[str, int]:
    """Each stem of *texts* with the bits of the texts it occurs in (the stem strings shared)."""
    out: dict[str, int] = {}
    for k, text in enumerate(texts):
        bit = 1 << k
        for w in split_words(text):
            s = sys.intern(stem(w))
            out[s] = out.get(s, 0) | bit
    return out


@lru_cache(maxsize=64)
def _scope_stems(scopes: frozenset[str]) -> frozenset[str]:
    return frozenset(stem(w) for w in scopes)


def profile(name: str, title: str, tags: str, path: str, description: str, param_names: str,
            kind: str, deprecated: bool = False, answers: str = "", scopes: frozenset[str] = SCOPES) -> Profile:
    """The :class:`Profile` of one tool; *name* is its local name (no connector prefix). Its
    namespace (``issues`` of ``issues_remove-label``) is matched like any name word and counts
    half as an extra word nobody asked for (``enterprise-teams_delete`` when nobody said
    "enterprise"). *scopes* are the owner words a name can be scoped to after "for"."""
    head, sep, rest = name.partition("_")
    own, space = (rest, head) if sep and rest else (name, "")
    words = split_words(name)
    cut = words.index("for") if "for" in words[1:] else len(words)
    # An owner scope ("-for-org", "-for-authenticated-user") says whose, as the query's "org" does:
    # only a thing's scope ("-for-release", "-for-commit-comment") is no object of the tool.
    owner_stems = _scope_stems(scopes)
    owner = all(stem(w) in owner_stems for w in words[cut + 1:])
    acted = "" if owner else " ".join(words[:cut])
    return Profile(_stems((name, title, tags, path, description, answers, param_names, acted)), _content(own), kind,
                   _content(space), deprecated, bool(acted))


def _content(text: str) -> tuple[str, ...]:
    # The stems of a name's content words: "list-repos-starred-by-user" has no extra word "by".
    return tuple(stem(w) for w in split_words(text) if w not in _FUNCTION_WORDS)


@lru_cache(maxsize=4096)
def _phrase(phrase: str) -> tuple[str, ...]:
    return tuple(stem(w) for w in split_words(phrase))


def _match(prof: Profile, phrases: Sequence[tuple[str, ...]],
           weights: tuple[float, ...] = FIELD_WEIGHTS, scoped: bool = False) -> float:
    """The weight of the best field in which any of *phrases* occurs (0 when none does); *scoped*:
    a phrase found only in the name's scope ("-for-release") counts :data:`_SCOPE_SHARE` of it (a
    soft hint is about scopes: "my" → ``-for-authenticated-user``)."""
    best = 0.0
    stems = prof.stems
    for k, weight in enumerate(weights):
        if weight <= best:
            continue
        bit = 1 << k
        for words in phrases:
            if words and all(stems.get(w, 0) & bit for w in words):
                if scoped and k == 0 and prof.headed and not all(stems.get(w, 0) & HEAD_BIT for w in words):
                    # Only in the name's scope ("-for-release"): where the tool acts, not what on.
                    if weight * _SCOPE_SHARE > best:
                        best = weight * _SCOPE_SHARE
                    continue
                best = weight
                break
    return best


class HeadIndex:
    """Tools by the stems of their name and title, for the candidates BM25 ranks too low: a tool
    whose name says what was asked ("markdown render") can sit below sixty long descriptions that
    mention the word. Only stems in at most :data:`_HEAD_CAP` tools are looked up ("list", "repo"
    pick nothing out of a catalog); a few MB at 6,000 tools."""

    def __init__(self, scopes: frozenset[str] = SCOPES) -> None:
        self._scopes = _scope_stems(scopes)  # the owner words a name can be scoped to
        self._tools: dict[str, set[str]] = {}
        # The catalog's own verbs: the first word of each name (namespace apart) with the kinds of
        # the tools it starts ("star" → write, "unstar" → delete, "list" → read), and namespaces.
        self._leads: dict[str, Counter[str]] = {}
        self._spaces: Counter[str] = Counter()
        # Tools named by their namespace and one verb ("repos_update", "issues_get"): the plain
        # operation on the namespace's thing, by (namespace stem, verb stem).
        self._bare: dict[tuple[str, str], set[str]] = {}
        # The same operation scoped to an owner ("repos_list-for-user", "repos_list-for-org"): by
        # (namespace stem, verb stem), with the stems of the rest of the name.
        self._scoped: dict[tuple[str, str], dict[str, tuple[str, ...]]] = {}

    def add(self, name: str, prof: Profile) -> None:
        for word, bits in prof.stems.items():
            if bits & 3:  # in the name or the title
                self._tools.setdefault(word, set()).add(name)
        if prof.name and prof.kind:
            self._leads.setdefault(prof.name[0], Counter())[prof.kind] += 1
        self._spaces.update(prof.namespace)
        if len(prof.name) == 1 and len(prof.namespace) == 1:
            self._bare.setdefault((prof.namespace[0], prof.name[0]), set()).add(name)
        elif len(prof.namespace) == 1 and len(prof.name) in (2, 3) and self._scopes.issuperset(prof.name[1:]):
            self._scoped.setdefault((prof.namespace[0], prof.name[0]), {})[name] = prof.name[1:]

    def remove(self, name: str, prof: Profile) -> None:
        for word in [w for w, bits in prof.stems.items() if bits & 3]:
            tools = self._tools.get(word)
            if tools is not None:
                tools.discard(name)
                if not tools:
                    del self._tools[word]
        if prof.name and prof.kind and prof.name[0] in self._leads:
            self._leads[prof.name[0]][prof.kind] -= 1
            if self._leads[prof.name[0]].total() <= 0:
                del self._leads[prof.name[0]]
        self._spaces.subtract(prof.namespace)
        if len(prof.name) == 1 and len(prof.namespace) == 1:
            self._bare.get((prof.namespace[0], prof.name[0]), set()).discard(name)
        elif len(prof.namespace) == 1 and prof.name:
            self._scoped.get((prof.namespace[0], prof.name[0]), {}).pop(name, None)

    def names(self, word: str) -> bool:
        """Whether some tool's name or title has *word* (a plain word; compared by its stem)."""
        return stem(word) in self._tools

    def abbreviated(self, prefix: str) -> str:
        """The name or title stem a typed id's *prefix* abbreviates ("cus" of ``cus_P2x9`` →
        custom(er), "sub" → subscript(ion)): of the stems that start with it, the one in most
        tools; "" for a prefix under 3 letters (too many words start with it) or none."""
        if len(prefix) < 3:
            return ""
        found = [(len(tools), word) for word, tools in self._tools.items()
                 if word.startswith(prefix) and word != prefix]
        return max(found)[1] if found else ""

    def verb_kind(self, word: str) -> str:
        """The kind of operation the catalog's names mean by the verb *word* (a stem): the kind of
        at least 3/4 of the two or more tools whose names start with it; "" if it is no verb of
        the catalog (or a namespace: "copilot ...", "repos ..." start names without being verbs)."""
        kinds = self._leads.get(word)
        if not kinds or self._spaces[word] > 0:
            return ""
        kind, n = kinds.most_common(1)[0]
        total = kinds.total()
        return kind if total >= 2 and n >= 0.75 * total else ""

    def candidates(self, query: Query, df: Callable[[str], int], total: int) -> list[str]:
        """Tools whose name or title holds a concept's phrase, most IDF-weighted concepts first."""
        score: dict[str, float] = {}
        # "rename the repo", "make the repository private": the namespace's plain operation.
        verbs = {w for c in query.concepts if c.verb for p in c.phrases for w in _phrase(p)} \
            or set(_PLAIN.get(query.intent.kind, ()))  # "Get the organization acme": get or list
        things = {w for c in query.concepts if not c.verb for p in c.phrases for w in _phrase(p)}
        # "is acme/web archived": the thing a value names ("acme/web", a repository) is asked about.
        things |= {w for c in query.soft if c.said == "repository" for p in c.phrases for w in _phrase(p)}
        # "public repositories owned by user X": the plain operation scoped to the owner named.
        owners = things | {w for c in query.soft for p in c.phrases for w in _phrase(p)}
        for thing in things:
            for verb in verbs:
                for name in self._bare.get((thing, verb), ()):
                    score[name] = math.inf
                for name, scope in self._scoped.get((thing, verb), {}).items():
                    if owners.issuperset(scope):
                        score[name] = math.inf
        # The hints of argument values ("the user 'octocat'" → username) count half a concept.
        valued = [(c, 0.5) for c in query.soft if c.said in VALUE_KINDS]
        for concept, share in [(c, 1.0) for c in query.concepts] + valued:
            if concept.verb:
                continue
            weight = share * _idf(concept, df, total)
            found: set[str] = set()
            for phrase in concept.phrases:
                sets = sorted((self._tools.get(w, set()) for w in _phrase(phrase)), key=len)
                if sets and 0 < len(sets[0]) <= _HEAD_CAP:
                    found |= sets[0].intersection(*sets[1:])
            for name in found:
                score[name] = score.get(name, 0.0) + weight
        # Best score first, equal scores by name: a stable sort by score after one by name.
        names = sorted(score)
        names.sort(key=score.__getitem__, reverse=True)
        return names


def rerank(pool: Sequence[tuple[str, float]], query: Query, profiles: dict[str, Profile],
           df: Callable[[str], int], total: int, bm25_share: float = BM25_SHARE) -> list[tuple[str, float]]:
    """*pool* (name, BM25 score; higher is better) re-scored for *query*, best first. *df* counts
    the tools a phrase occurs in, *total* is the number of tools indexed; *bm25_share* is how much
    the full-text score (normalised to the pool's best) counts next to the concepts' coverage.

    Each concept's best field per candidate is :func:`_match`'s, computed for all candidates at
    once (:func:`_best_fields`)."""
    if not pool:
        return []
    top = max(s for _, s in pool) or 1.0
    concepts = [[_phrase(p) for p in c.phrases] for c in query.concepts]
    weights = [_idf(c, df, total) for c in query.concepts]
    full = sum(weights) or 1.0
    soft = [[_phrase(p) for p in c.phrases] for c in query.soft]
    asked = {w for c in concepts + soft for words in c for w in words}
    fields = _QUESTION_WEIGHTS if query.question else FIELD_WEIGHTS
    per = [_ANSWER_WEIGHTS if c.answer else _STATE_WEIGHTS if query.question and c.participle else fields
           for c in query.concepts]
    profs = [profiles[name] for name, _ in pool]
    # Per concept, each candidate's _match (0.0 for a concept the catalog lacks: its weight is 0).
    matched = [_best_fields(profs, c, f, True) if w else None for c, w, f in zip(concepts, weights, per, strict=True)]
    hinted = [_best_fields(profs, c, FIELD_WEIGHTS, False) for c in soft]
    agree = {kind: agreement(query.intent, kind) for kind in {p.kind for p in profs}}
    out = []
    for i, (name, score) in enumerate(pool):
        prof = profs[i]
        covered = sum([w * m[i] if m is not None else w * 0.0 for m, w in zip(matched, weights, strict=True)]) / full
        hint = sum([m for m in (h[i] for h in hinted) if m >= FIELD_WEIGHTS[1]])
        # Smoothed share: a one-word name ("render") is not wholly unexplained for lacking one word.
        extra = (sum(1 for w in prof.name if w not in asked)
                 + _NAMESPACE_SHARE * sum(1 for w in prof.namespace if w not in asked)) / (len(prof.name) + 1)
        out.append((name, bm25_share * score / top + covered - _EXTRA_PENALTY * extra
                    + agree[prof.kind] + _SOFT_BONUS * hint
                    - (_DEPRECATED_PENALTY if prof.deprecated else 0.0)))
    out.sort(key=lambda h: -h[1])
    return out


@lru_cache(maxsize=16)
def _rest(weights: tuple[float, ...]) -> tuple[float, ...]:
    """The weight of the best field among fields[1:] a mask (without bit 0, shifted) holds; 0.0 for none."""
    n = len(weights) - 1
    return tuple(max([weights[k + 1] for k in range(n) if bits >> k & 1], default=0.0) for bits in range(1 << n))


def _best_fields(profs: Sequence[Profile], phrases: Sequence[tuple[str, ...]], weights: tuple[float, ...],
                 scoped: bool) -> list[float]:
    """:func:`_match` of *phrases* for each of *profs* (the same values, from the fields' bits)."""
    rest = _rest(weights)
    low = (1 << (len(weights) - 1)) - 1
    first, scope = weights[0], weights[0] * _SCOPE_SHARE
    phrases = [words for words in phrases if words]  # a phrase of no word is nowhere
    out = []
    for prof in profs:
        get = prof.stems.get
        union = 0
        whole = False  # found in the name, not only in its scope ("-for-release")
        for words in phrases:
            if len(words) == 1:
                m = get(words[0], 0)
            else:
                m = -1
                for w in words:
                    m &= get(w, 0)
            union |= m
            if m & 1 and (m & HEAD_BIT or not scoped or not prof.headed):
                whole = True
        best = rest[(union >> 1) & low]
        if union & 1:
            top = first if whole else scope
            if top > best:
                best = top
        out.append(best)
    return out


def _idf(concept: Concept, df: Callable[[str], int], total: int) -> float:
    # The concept is as informative as its most specific phrase the catalog has; absent → nothing.
    counts = [n for n in (df(p) for p in concept.phrases) if n > 0]
    if not counts:
        return 0.0
    return math.log(1.0 + total / min(counts))
