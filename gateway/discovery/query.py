"""Reading a query: its concepts, soft hints and intent (:func:`parse`).

:func:`parse` takes out the values a caller will pass (:mod:`.arguments`), drops a frame that
asks nothing (:mod:`.fillers`), reads the words whose sense depends on their place
(:mod:`.senses`), then finds the longest known phrases of the vocabulary map
(:mod:`.vocabulary` and the endpoint's packs, through a :class:`~.lexicon.Lexicon`): each becomes a :class:`~.concepts.Concept`, the
caller's word plus the spec words meaning the same. It adds the soft hints (:mod:`.soft`; one item
or a list, a yes/no check, the values' hints) and the intent (:mod:`.intent`). :func:`expand` is
the concepts alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from gateway.discovery.arguments import tokens
from gateway.discovery.clauses import split_context
from gateway.discovery.concepts import Concept, Query
from gateway.discovery.fillers import ONE_ITEM, STOPWORDS, frame
from gateway.discovery.intent import READ, WRITE, Intent, is_question, query_intent
from gateway.discovery.lexicon import Lexicon, inflections
from gateway.discovery.packs import core
from gateway.discovery.senses import senses
from gateway.discovery.soft import NAME_HINT

__all__ = ["parse", "expand"]

# "+1", "+1'd", "-1": the thumbs-up (down) reaction; punctuation would leave the number alone.
_PLUS_ONE = re.compile(r"(?<![\w+-])[+-]1(?:'?d|'?s|ed|ing)?(?!\w)")


def parse(query: str, named: Callable[[str], bool] | None = None, lexicon: Lexicon | None = None,
          abbreviated: Callable[[str], str] | None = None) -> Query:
    """The concepts, soft hints and intent of *query*; *named* (optional) says whether the catalog
    names a tool with a word (no person is called "issue" or "webhook"). A scene set before the
    request ("CI went green on 1507, squash it in") keeps its things, which the request may point
    back to ("it"), but asks for none of its actions or states, and says nothing of the intent.
    *lexicon* is what the words are read with: the core and the endpoint's packs (default: the
    core alone, :func:`gateway.discovery.packs.core`). *abbreviated* (optional) gives the
    catalog's word a typed id's prefix stands for ("cus" of ``cus_P2x9``: customer), or ""."""
    lex = lexicon or core()
    context, request = split_context(query, lex.imperative)
    asked = _parse(request, named, lex, abbreviated)
    if not context:
        return asked
    scene = _parse(_LINKED.sub(r"\1", context), named, lex, abbreviated)
    said = {c.phrases for c in asked.concepts}
    things = tuple(c for c in scene.concepts if not c.verb and not c.participle and c.phrases not in said)
    hints = {c.phrases: c for c in asked.soft}
    for c in scene.soft:
        if c.said not in _COMPUTED:
            hints.setdefault(c.phrases, c)
    return replace(asked, concepts=asked.concepts + things, soft=tuple(hints.values()))


# The state a scene's subject is in ("CI *went green*", "staging *is down*", "the build is *broken*"):
# how things stand, not a thing the request is about.
_LINKED = re.compile(r"(?<!there\s)\b(is|are|was|were|went|got|turned|became|becomes|being|been|keeps|kept)"
                     r"(?:\s+(?:not|now|still|all|only|again|already))*\s+(?:a\s+|an\s+)?[\w-]+", re.IGNORECASE)
# Soft hints computed from the whole query's shape (a list, one item, a yes/no check): the
# request's own say what is asked, not the scene's.
_COMPUTED = frozenset({"(plural)", "(one)", "(yes/no)"})


def _parse(query: str, named: Callable[[str], bool] | None, lex: Lexicon,
           abbreviated: Callable[[str], str] | None = None) -> Query:
    tables = lex.tables
    if tables.plus_one:
        query = _PLUS_ONE.sub(f" {tables.plus_one} ", query)  # "+1'd", "-1": a reaction, not the number 1
    args = tokens(query, lex.ordinary, tables)
    words = [w for w in args.words if not w.isdigit()]  # a count left in ("top 10") asks nothing
    words = words[frame(words):]  # "how do I delete a branch" asks to delete a branch
    sense = senses(words, lex.known, lex.phrasal, named, tables)
    if "version" in args.kinds and tables.versioned:
        # "delete tag v3.0.0-rc1", "tag commit 9fceb02 as v0.9.1": with a version, what a word
        # means in the pack's world (a tag is git's: a ref); opening the request it makes one.
        sense.alts.update({k: tables.versioned[w] + (("create",),) if k == 0 else tables.versioned[w]
                           for k, w in enumerate(words)
                           if w in tables.versioned and k not in sense.alts and k not in sense.skip})
    special = sense.skip | sense.values | sense.states | sense.fields | set(sense.alts)
    out: list[Concept] = []
    hints: list[str] = []  # words that may carry a soft hint: not those of a phrase asking nothing
    values: list[str] = []  # new values and names: soft hints only
    i = 0
    while i < len(words):
        if i in sense.skip:
            i += 1
            continue
        if i in sense.values:
            values.append(words[i])
            i += 1
            continue
        if i in sense.fields:
            # "the title, body and state of issue 77": fields of the read, asked as they are.
            if words[i] not in STOPWORDS and len(words[i]) > 1:
                out.append(Concept(words[i], (words[i],), answer=True))
            hints.append(words[i])
            i += 1
            continue
        if i in sense.states:
            # "open" in "Retrieve open pull requests": the state, not "create".
            out.append(Concept(words[i], ("open" if words[i] == "opened" else words[i],), True))
            hints.append(words[i])
            i += 1
            continue
        if i in sense.alts:
            out.extend(Concept(words[i], group) for group in sense.alts[i])
            hints.append(words[i])
            i += 1
            continue
        undo = _undo(out, words, i, lex.verb_forms)
        if undo is not None:
            out.extend(undo)
            hints.append(words[i])
            i += 1
            continue
        longest = min(lex.max_key, len(words) - i)
        longest = next((n for n in range(1, longest) if i + n in special), longest)
        for n in range(longest, 0, -1):
            key = tuple(words[i:i + n])
            alts, participle = lex.lookup(key)
            participle = participle or i in sense.outcomes  # "so we can force push": a state to reach
            if alts is not None:
                said = " ".join(key)
                if participle:
                    # "published", "added": a state, not the action; the map's action words
                    # (create, update) would pull in every tool that does it.
                    alts = tuple(g for g in (tuple(a for a in group if a not in lex.verbs) for group in alts) if g) \
                        or ((),)
                for j, group in enumerate(alts):
                    # The caller's own word counts for the first concept it stands for.
                    keep = j == 0 and said not in STOPWORDS
                    out.append(Concept(said, (said, *[a for a in group if a != said]) if keep else group,
                                       participle))
                if alts:
                    hints.extend(key)
                i += n
                break
        else:
            hints.append(words[i])
            if words[i] not in STOPWORDS and len(words[i]) > 1:
                out.append(Concept(words[i], (words[i],), i in sense.outcomes))
            i += 1
    # "make a new repo": one action asked for once, not twice.
    seen: set[frozenset[str]] = set()
    kept = []
    for c in out:
        means = frozenset(p for p in c.phrases if p != c.said) or frozenset(c.phrases)
        if means and means not in seen:
            seen.add(means)
            # A pack's own spec verb ("rerequest") asks for an action as English's do.
            kept.append(replace(c, action=True) if tables.verbs and set(c.phrases) & tables.verbs else c)
    # "repositories owned by user sindresorhus": someone else's, not the caller's own.
    others = {w for k, w in enumerate(words[:-2]) if w in ("own", "owned") and words[k + 1] == "by"
              and words[k + 2] not in ("me", "us", "myself", "i")}
    soft = {lex.soft[w]: w for w in hints if w in lex.soft and w not in others}
    soft.update({(v,): v for v in values})
    for prefix in args.prefixes:
        # "cancel sub_1Oa9": an id's type prefix abbreviates the thing it names (the catalog's word).
        word = abbreviated(prefix) if abbreviated else ""
        if word and not any(word in c.phrases for c in kept):
            kept.append(Concept(f"({prefix}_)", (word,)))
    if tables.committed_file and "path" in args.kinds and words and words[0] in _COMMITTING:
        # "commit an updated package.json to main", "push README.md": a file's contents written.
        kept.append(Concept("(file)", tables.committed_file))
    if not any(not c.verb and not c.answer for c in kept):
        # "details of GHSA-jfh8-c2jp-5v3q", "the severity and affected versions of CVE-2024-3094":
        # no thing but a value, so what the value is (an advisory, a commit) is what is asked about.
        kept.extend(Concept(f"({k})", lex.hints[k]) for k in dict.fromkeys(args.kinds) if k != "one" and k in lex.hints)
    if sense.names and not any(set(c.phrases) & set(NAME_HINT) for c in kept):
        # "what repos does octocat have": the name stands for a user, a thing the tool is about.
        kept.append(Concept("(name)", NAME_HINT))
    intent = query_intent(words, (c.phrases for c in kept if c.verb), tables.verbs)
    if sense.yes_no and not intent.strong:
        intent = Intent(READ, True)
    if not intent.strong and len(words) > 2 and words[1] in _ARTICLES and words[0] not in STOPWORDS \
            and not _plural(words[0]):
        # "tag a release", "pin the issue": a sentence that opens "WORD a/the ..." is an
        # imperative, and a verb no reading word the map knows asks for a change.
        intent = Intent(WRITE, False)
    if intent.kind != READ:
        # "update the title and body of issue 5": a write's fields are what it sets, not answers.
        kept = [replace(c, answer=False) if c.answer else c for c in kept]
    soft.update({lex.hints[k]: k for k in args.kinds if k != "one" and k in lex.hints})
    # "who starred", "who are ..." ask for people (several; "who is" for one); a plural thing asks
    # for a collection.
    plural = sense.people or words[:2] == ["who", "are"] or any(_plural(c.said) for c in kept if not c.verb and not c.answer) \
        or any(w in ("every", "all", "each") for w in words)  # "every label we use"
    # "this PR" is one item, but in "who has been asked to review this PR" the answer is people.
    one = "one" in args.kinds or (sense.this and (words[:1] != ["who"] or words[1:2] in (["is"], ["was"])))
    if intent.kind == READ and (sense.yes_no or (words and words[0] in _YES_NO)):
        # "is alice a member of the org", "has this PR been merged": a yes/no question is what
        # APIs answer with a check (204 or 404), not with a list.
        soft[("check",)] = "(yes/no)"
    elif intent.kind == READ and (any(w in ONE_ITEM for w in words) or (one and not plural)):
        # "details of ...", "workflow run 123": that one thing, not a list ("PR 12's comments" is).
        soft[lex.hints["one"]] = "(one)"
    elif intent.kind == READ and plural:
        # A read of plural things ("the PRs still open", "recent commits") asks for a collection.
        soft[("list",)] = "(plural)"
    lead = hints[0] if hints and hints[0] not in STOPWORDS else ""
    # A question, or a read listing what it wants to see ("... including bio and follower count"),
    # asks for facts: the fields a read answers with.
    facts = is_question(words) or sense.yes_no or (intent.kind == READ and "including" in words)
    return Query(tuple(kept), tuple(Concept(w, p) for p, w in soft.items()), intent, lead, facts)


_YES_NO = frozenset("is are was were does do did has have can".split())
_COMMITTING = frozenset("commit push upload save write put add".split())
_ARTICLES = frozenset("a an the this that".split())
_STOP_DOING = frozenset({"stop", "quit", "cease"})


def _undo(out: list[Concept], words: list[str], i: int, verb_forms: frozenset[str]) -> list[Concept] | None:
    """"stop following", "quit watching": the un-action of the -ing verb after "stop" (unfollow,
    delete the subscription), replacing the "cancel" that "stop" alone means (edits *out*)."""
    if i == 0 or words[i - 1] not in _STOP_DOING or not words[i].endswith("ing") or len(words[i]) < 6:
        return None
    if out and out[-1].said == words[i - 1]:
        out.pop()
    forms = list(inflections(words[i]))
    base = next((f for f in forms if f in verb_forms), forms[0] if forms else words[i])
    said = f"{words[i - 1]} {words[i]}"
    return [Concept(said, ("un" + base, "delete", "remove", "disable")), Concept(words[i], (words[i], base))]


def _plural(word: str) -> bool:
    return len(word) > 2 and word.endswith("s") and not word.endswith(("ss", "us", "is"))


def expand(query: str, lexicon: Lexicon | None = None) -> list[Concept]:
    """The concepts of *query*: longest synonym keys first, stop words dropped, order kept."""
    return list(parse(query, lexicon=lexicon).concepts)
