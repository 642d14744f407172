"""Round 6's sense rules: the clauses around a request and the words they make asked or not.

"... *so it can merge*" (a purpose: a state to reach), "*tell* the reporter on issue 88 *that* ..."
(a comment whose message is no word of the request), "for *24 hours*" (a length of time), "the
*title, body and state* of issue 77" (the fields of one item's read), "ping our chat server
*whenever someone opens an issue*" (a hook to set up), "put *her* on the on-call team" (a member
added), "stop repo X *from reading* secret Y" (access taken away), "who *can merge*" (a rule).
:func:`gateway.discovery.senses.senses` calls each where it may apply; each says itself whether it
does and records what it finds in a :class:`~gateway.discovery.sense_words.Senses`.
"""

from __future__ import annotations

from collections.abc import Callable

from gateway.discovery.lexicon import Alts
from gateway.discovery.sense_words import (
    CLAUSE_END,
    DETERMINERS,
    GROUPS,
    MODALS,
    NEWCOMERS,
    PREPOSITIONS,
    READING,
    SUBJECTS,
    Senses,
    clause,
    plural,
)

__all__ = ["purpose", "message", "duration", "field_list", "event", "joining", "revoke", "permission"]


def purpose(words: list[str], i: int, out: Senses) -> bool:
    """"... so it can merge", "so they show as alerts", "so the status turns green": a purpose
    clause says what the request is for. Its subject and modal are not asked for, its verb is the
    state to reach (a word, not an action: no intent), its other words still say where ("as
    alerts"). False when *words*[i] is no "so" opening such a clause ("so far")."""
    if i < 2 or words[i] != "so":
        return False
    j = i + 1 + (words[i + 1:i + 2] == ["that"])
    if j >= len(words):
        return False
    if words[j] in SUBJECTS or words[j] in ("it", "they"):
        skip = [j]
        j += 1
    elif words[j] in DETERMINERS and j + 2 < len(words):
        skip = [j]
        j += 2  # "so the status turns green": the subject's noun is kept
    else:
        return False
    while j < len(words) and (words[j] in MODALS or words[j] in ("be", "not", "t")):
        skip.append(j)
        j += 1
    if j >= len(words) or words[j] in DETERMINERS or words[j] in PREPOSITIONS:
        return False
    out.skip.update((i, i + 1, *skip) if words[i + 1] == "that" else (i, *skip))
    out.outcomes.add(j)  # the outcome, a state to reach ("so it stops billing"), not an act asked for
    return True


# Verbs that pass a message to someone: "tell the reporter that ...", "let bob know that ...".
_MESSAGING = frozenset("tell inform notify remind let".split())


def message(words: list[str], i: int, out: Senses, alts: Alts) -> bool:
    """"tell the reporter on issue 88 that 2.4.1 ships the fix", "let the author of PR 8 know that
    the tests need a fixture": telling people something on a thread is posting a comment there.
    The verb asks for a comment; what it says (the "that" clause) is no word of the request; the
    words between say where. False without "that" ("tell bob to review it" asks for a review)."""
    if not alts or words[i] not in _MESSAGING or words[i + 1:i + 2] in (["me"], ["us"]):
        return False
    know = None
    for j in range(i + 2, min(len(words), i + 10)):
        if words[i] == "let" and words[j] == "know" and know is None:
            know = j  # "let bob know (on PR 19) that ...": "know" is part of the verb
        elif words[j] == "that" and (words[i] != "let" or know is not None):
            out.alts[i] = alts
            out.skip.update(range(j, clause(words, j + 1).stop))
            if know is not None:
                out.skip.add(know)
            return True
        elif words[j] in CLAUSE_END:
            return False
    return False


# Words before a time unit that make it a length of time: "for 24 hours", "within a day".
_DURING = frozenset("for within over during".split())
_UNITS = frozenset("second seconds minute minutes hour hours day days week weeks month months year years".split())


def duration(words: list[str], i: int, out: Senses) -> bool:
    """"for 24 hours", "for a day", "within the next two weeks": a length of time (its count, a
    number, was taken out before) says for how long, not what; False when no time unit follows."""
    if words[i] not in _DURING:
        return False
    j = i + 1
    while j < len(words) and j - i <= 3 and (words[j] in DETERMINERS or words[j] in _COUNT_WORDS):
        j += 1
    if j >= len(words) or words[j] not in _UNITS:
        return False
    out.skip.update(range(i, j + 1))
    return True


_COUNT_WORDS = frozenset("one two three four five six seven ten twelve next few couple of another".split())


# Words that end a list of fields read backwards from its "of": "Retrieve *the* title, body ...".
_FIELDS_FROM = DETERMINERS | READING | frozenset("is are was were what which me us".split())


def _list_start(words: list[str], k: int) -> bool:
    """Whether *words*[k] opens what precedes a list of fields: a determiner, or a reading verb
    that is not a noun inside the list ("show the ...", not "star *count*")."""
    if words[k] in DETERMINERS or words[k] in _FIELDS_FROM and words[k] not in READING:
        return True
    return words[k] in READING and (k == 0 or words[k - 1] in _FIELDS_FROM or words[k - 1] == "please")


def field_list(words: list[str], j: int) -> range:
    """"Retrieve the title, body, state and assignees of issue 77", "the mergeability status and
    head SHA of PR 4521": a list joined by "and" right before "of" and one item after it names
    the fields of that item's read (what it answers), not things to look for by name. Empty when
    the words before *j* (an "of") are not such a list."""
    k = j - 1
    joined = False
    while k >= 0 and j - k <= 9 and not _list_start(words, k):
        if words[k] == "and":
            joined = True
        elif words[k] in PREPOSITIONS or words[k] in CLAUSE_END:
            return range(0)
        k -= 1
    start = k + 1
    if not joined or j - start < 3 or "and" in (words[start], words[j - 1]):
        return range(0)
    thing = j + 1
    while thing < len(words) and words[thing] in DETERMINERS:
        thing += 1
    if thing < len(words) and plural(words[thing]):
        return range(0)  # "the names and emails of the members": each member's, a list
    # Nothing after "of" (or a preposition right after it): the item was a value, taken out
    # ("... of GHSA-jfh8-c2jp-5v3q", "... of acme/api in ...").
    return range(start, j)


_ABLE = frozenset("can may could".split())


# Verbs that tell someone or something that a thing happened: "ping", "email me", "notify".
_NOTIFYING = frozenset("ping email notify alert tell message post send call hit page text warn".split())
_WHENEVER = frozenset("when whenever every each anytime".split())


def event(words: list[str], out: Senses, alts: Alts) -> None:
    """"ping our chat server whenever someone opens an issue", "email me when a new release comes
    out": being told each time something happens is a webhook or a subscription. The clause after
    "when"/"whenever"/"every time" names the event: its words are soft hints (which event), none
    of them is asked for ("opens" asks to create nothing)."""
    if not alts or not words or (words[0] not in _NOTIFYING and words[0] not in _WHENEVER):
        return
    for i in range(len(words) - 2):
        if words[i] not in _WHENEVER or words[i] in ("every", "each") and words[i + 1] != "time":
            continue
        start = i + 2 if words[i] in ("every", "each") else i + 1
        # The telling verb: first ("ping X whenever ...") or after the event ("whenever ..., hit URL").
        tell = 0 if i else next((k for k in range(start, len(words)) if words[k] in _NOTIFYING), None)
        if tell is None or (i == 0 and words[0] == "when"):
            return  # "when was acme/api last pushed to": a question, no event
        # Being told from now on is set up once: a hook or a subscription created; the verb of
        # telling ("ping", "email") is how, not what ("ping a webhook" is another operation).
        out.alts[i] = alts
        out.skip.update((tell, *range(i + 1, start)))
        out.values.update(k for k in clause(words, start) if k != tell and (i or k < tell))
        return


_ADDING = frozenset("add move put bring".split())
_PRONOUNS = frozenset("her him them me us someone somebody".split())
_INTO = frozenset("to on onto in into".split())
_GROUPINGS = frozenset("team teams org organization squad group crew rotation".split())


def joining(words: list[str], i: int, common: Callable[[str], bool], out: Senses) -> bool:
    """"put her on the on-call team", "add bob to the platform team": placing a person (a pronoun,
    a name, someone) in a team or an org adds them to it (as a member: the person is a soft hint),
    whatever the placing verb ("put" alone stores something)."""
    if words[i] not in _ADDING:
        return False
    j = i + 1
    if j >= len(words) or not (words[j] in _PRONOUNS or words[j] in NEWCOMERS or not common(words[j])):
        return False
    if j + 1 >= len(words) or words[j + 1] not in _INTO:
        return False
    if not any(w in _GROUPINGS for w in words[j + 2:j + 6]):
        return False
    out.alts[i] = (("add",),)
    out.names += 1  # the person: a soft hint at users and members
    if words[j] not in _PRONOUNS and words[j] not in NEWCOMERS:
        out.values.add(j)
    return True


_PREVENTING = frozenset("stop prevent keep block".split())
_ACCESSING = frozenset("reading using accessing seeing getting pulling cloning".split())


def revoke(words: list[str], i: int, out: Senses) -> bool:
    """"stop repo acme/old from reading the org secret", "keep the bot from accessing acme/api":
    stopping a named thing from reaching something takes its access away (remove it from what it
    may use). Not when the thing is people at large ("stop anyone from ...": a rule)."""
    if words[i] not in _PREVENTING:
        return False
    for j in range(i + 1, min(len(words) - 1, i + 5)):
        if words[j] in GROUPS or words[j] in ("anyone", "anybody", "people", "everyone", "someone"):
            return False
        if words[j] == "from":
            if words[j + 1] not in _ACCESSING:
                return False
            out.alts[i] = (("remove", "delete"),)
            out.skip.update((j, j + 1))
            return True
    return False


def permission(words: list[str], i: int, out: Senses, guarded: frozenset[str], alts: Alts) -> None:
    """"who can merge into main", "who may approve PRs on acme/api": who is allowed to is a rule
    (a protection, a restriction) or a permission, not the act itself. "who can push" needs no
    rule: the map reads "push" as the permission already. *i* is the modal's index."""
    if words[i] not in _ABLE or not i or words[i - 1] not in ("who", "whom"):
        return
    i += 1
    if alts and i < len(words) and words[i] in guarded and i not in out.alts:
        out.alts[i] = alts
