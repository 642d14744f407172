"""What the query reader knows about words: the general core plus the domain packs an endpoint enabled.

A :class:`Lexicon` is the vocabulary a query is read with (:func:`gateway.discovery.query.parse`):
the general core's map (:mod:`gateway.discovery.vocabulary`: English paraphrases true of any API,
"remove" → delete, "show all" → list) merged with the maps of the packs enabled (a pack's entry
wins over the core's), the soft hints, what each kind of value hints at, and the
:class:`SenseTables` the word-sense rules read. A :class:`Pack` is data plugged into the core
(docs/discovery.md, "Domain packs"): the core's rules stay the same, a pack only gives them words
and meanings. With no pack the tables are empty and the rules that need them do not fire.

:class:`Vocabulary` is a map being written (:meth:`Vocabulary.add`), one per pack and one for the
core. Map keys are found in an inflected form ("tickets" → ticket, "deploying" → deploy), but only
by undoing a whole inflection, never by stemming: a stemmer makes "findings" the search verb
"find". A key found through an -ed/-ing form or as the plural of a verb ("published",
"requests") names a thing or a state rather than asks the action.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace

from gateway.discovery.concepts import VERBS
from gateway.discovery.fillers import STOPWORDS
from gateway.discovery.words import split_words

__all__ = ["Alts", "Key", "Vocabulary", "SenseTables", "Pack", "Lexicon", "inflections", "BM25_SHARE"]

# How much the full-text score (BM25, normalised to the best candidate's) counts next to the
# coverage of the query's concepts in the re-rank (:func:`gateway.discovery.rank.rerank`), for the
# core alone: its vocabulary knows English, not the catalog's words, so the catalog's own text
# counts as much as the best coverage. A pack whose map knows its API's words may make coverage
# count more (:attr:`Pack.bm25_share`).
BM25_SHARE = 0.75

Key = tuple[str, ...]
Alts = tuple[tuple[str, ...], ...]


class Vocabulary:
    """A map of callers' words → the phrases specs use for them, written with :meth:`add`."""

    def __init__(self) -> None:
        self.entries: dict[Key, Alts] = {}

    def add(self, keys: str, alts: str) -> None:
        """``add("pr,prs", "pull request,pull")``: each key means any of the phrases. ``+`` joins
        concepts a key carries at once: ``add("ship", "release + create")`` (ship = create a release).
        A key is defined once: a second definition would silently replace the first (ValueError)."""
        groups = tuple(tuple(a.strip() for a in g.split(",") if a.strip()) for g in alts.split("+") if g.strip())
        for key in keys.split(","):
            words = tuple(split_words(key))
            if words in self.entries:
                raise ValueError(f"vocabulary key {key!r} is defined twice")
            self.entries[words] = groups


@dataclass(frozen=True, slots=True)
class SenseTables:
    """The domain's words and meanings the core's rules read: the sense rules (:mod:`.senses`,
    :mod:`.clause_senses`), the value reader (:mod:`.arguments`) and the name profiles (:mod:`.rank`).
    Each field is empty by default: a rule that needs it does not fire without a pack, and a word
    set adds to the core's own English words for the same rule."""

    # "who starred the repo": the people who did what the verb says (verb → their nouns).
    agents: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # (verb, object) → the verb's sense for that object: "lock main" protects a branch.
    object_senses: Mapping[tuple[str, str], Alts] = field(default_factory=dict)
    # Conventional names that name one thing after "on"/"to" ("commits on main", "deployed to prod").
    branch_names: frozenset[str] = frozenset()
    environment_names: frozenset[str] = frozenset()
    # Roles named after who gets them ("give the team write on the repo") and what a role is.
    roles: frozenset[str] = frozenset()
    role: Alts = ()
    # Reactions used as a verb at the start ("thumbs-up issue #12"), "+1" read as the word ``plus_one``.
    reactions: frozenset[str] = frozenset()
    reaction: Alts = ()
    plus_one: str = ""
    # "ask alice to look at my PR": the asking verb's and the looking verb's senses.
    review_request: Alts = ()
    review: Alts = ()
    # "why can't I push": what stops it.
    why_not: Alts = ()
    # "tell the reporter on issue 88 that ...": telling people on a thread.
    message: Alts = ()
    # "ping our chat server whenever someone opens an issue": being told when something happens.
    subscription: Alts = ()
    # "who can merge into main": verbs whose "who can" asks for a rule, and what the rule is.
    guarded: frozenset[str] = frozenset()
    guard: Alts = ()
    # With a version among the values, these words mean: ("tag" → a git ref).
    versioned: Mapping[str, Alts] = field(default_factory=dict)
    # "commit an updated package.json": a file path with a committing verb writes a file's contents.
    committed_file: tuple[str, ...] = ()
    # -- what the core's value and name rules read besides their own English words (added to them) --
    # Nouns followed by the thing's name ("workflow ci.yml", "repo acme-api": an identifier, not words).
    named: frozenset[str] = frozenset()
    # Nouns before which an identifier-like token is the thing's name ("the needs-review label").
    named_after: frozenset[str] = frozenset()
    # Nouns whose "#N" is their own number ("run #512", "alert #17"); any other "#N" is a ticket's.
    numbered: frozenset[str] = frozenset()
    # Prefixes of the platform's reserved variable names, read as words ("GITHUB_TOKEN").
    reserved_constants: tuple[str, ...] = ()
    # Words between a verb and its object that do not change the object's kind ("lock the *repo* main").
    object_skipped: frozenset[str] = frozenset()
    # Owners a tool name can be scoped to after "for" ("list-for-authenticated-user", "-for-repo").
    scopes: frozenset[str] = frozenset()
    # The API's own spec verbs besides English's (concepts.VERBS): "rerequest", "redeliver"; a
    # concept holding one asks for an action, a change.
    verbs: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Pack:
    """A domain pack: the knowledge of one API's world, enabled per endpoint (``search: {packs:
    [name]}``). Data only: map entries, soft hints, value hints and sense tables; the core reads
    queries the same way with or without it."""

    name: str
    summary: str
    vocabulary: Mapping[Key, Alts] = field(default_factory=dict)
    soft: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # word → hint phrases (replaces the core's)
    hints: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # value kind → hint phrases
    senses: SenseTables = field(default_factory=SenseTables)
    # The re-rank's weight of the full-text score with this pack (None: the core's BM25_SHARE).
    bm25_share: float | None = None


# Reading verbs the map leaves out as stop words: they still open a request.
_READING_OPENERS = frozenset("get give show retrieve obtain grab inspect describe display return fetch tell".split())


class Lexicon:
    """The core's knowledge merged with the enabled packs' (in order; a later pack wins)."""

    def __init__(self, vocabulary: Mapping[Key, Alts], soft: Mapping[str, tuple[str, ...]],
                 hints: Mapping[str, tuple[str, ...]], packs: tuple[Pack, ...] = (),
                 tables: SenseTables | None = None) -> None:
        synonyms = dict(vocabulary)
        soft_map = dict(soft)
        hint_map = dict(hints)
        tables = tables or SenseTables()  # the core's own (English), then each pack's merged in
        for pack in packs:
            synonyms.update(pack.vocabulary)
            soft_map.update(pack.soft)
            hint_map.update(pack.hints)
            tables = _merge(tables, pack.senses)
        self.packs = tuple(p.name for p in packs)
        # The last enabled pack that says how much the full-text score counts decides.
        self.bm25_share = next((p.bm25_share for p in reversed(packs) if p.bm25_share is not None), BM25_SHARE)
        self.synonyms: dict[Key, Alts] = synonyms
        self.soft: dict[str, tuple[str, ...]] = soft_map
        self.hints: dict[str, tuple[str, ...]] = hint_map
        self.tables = tables
        self.max_key = max((len(k) for k in synonyms), default=1)  # the longest key, in words
        self.verbs = VERBS | tables.verbs  # the spec verbs: English's and the packs' own
        verbs = self.verbs
        self.verb_forms = frozenset(k[0] for k in synonyms if len(k) == 1) | verbs
        self._first_words = frozenset(k[0] for k in synonyms)
        # Keys meaning an action ("read" → get, "write" → create): ordinary words in "read/write".
        self._verb_keys = frozenset(k[0] for k, alts in synonyms.items()
                                    if len(k) == 1 and any(a in verbs for g in alts for a in g))
        # Words that open a request: keys meaning an action, alone or as a phrasal verb's first word
        # ("take him off", "re-run"), the spec verbs and the reading verbs the map leaves out as stop words.
        self._openers = frozenset(k[0] for k, alts in synonyms.items()
                                  if any(a in verbs for g in alts for a in g)
                                  and (len(k) == 1 or k[0] not in STOPWORDS)) | verbs | _READING_OPENERS

    def lookup(self, key: Key) -> tuple[Alts | None, bool]:
        """The alternatives of *key* and whether they name a thing rather than ask an action: found
        through an -ed/-ing form ("published") or as the plural of a verb ("requests", "reports":
        requests ask in the imperative, "request a review")."""
        alts = self.synonyms.get(key)
        if alts is not None:
            return alts, False
        for form in inflections(key[-1]):
            alts = self.synonyms.get((*key[:-1], form))
            if alts is not None:
                return alts, key[-1].endswith(("ed", "ing", "s"))
        return None, False

    def known(self, word: str) -> bool:
        """Whether *word* is the vocabulary's: a stop word, a spec verb or (the start of) a map key."""
        return word in STOPWORDS or word in self.verbs or word in self._first_words or self.lookup((word,))[0] is not None

    def phrasal(self, key: Key) -> Alts | None:
        """The map's meaning of a two-word phrasal verb ("kick out", "turn off"), if it is one."""
        return self.synonyms.get(key)

    def ordinary(self, word: str) -> bool:
        """Whether *word* in ``x/y`` is an ordinary word (``read/write``, ``and/or``, ``ci/cd``),
        not part of an owner/name."""
        return len(word) <= 2 or word in STOPWORDS or word in self._verb_keys

    def imperative(self, word: str) -> bool:
        """Whether *word*, opening a clause, asks for an action ("rerun", "take", "list", "show")."""
        return word in self._openers


def _merge(tables: SenseTables, more: SenseTables) -> SenseTables:
    """*tables* with *more*'s words added: maps merged (a later pack's entry wins), sets joined, a
    meaning or a word set by *more* replacing the earlier one."""
    changes: dict[str, object] = {}
    for f in fields(SenseTables):
        old, new = getattr(tables, f.name), getattr(more, f.name)
        if not new:
            continue
        if isinstance(new, frozenset):
            changes[f.name] = old | new
        elif isinstance(new, Mapping):
            changes[f.name] = {**old, **new}
        else:
            changes[f.name] = new
    return replace(tables, **changes)  # type: ignore[arg-type]


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
