"""Parts of a query that are not the request: the context said before it.

People often say why before they say what: "the release build is broken again, *re-run the failed
jobs*", "bob is on parental leave; *take him off the reviewer list*", "new Django project, *what
ignore file does GitHub suggest*". The first clause sets the scene; its verbs ("is broken",
"left", "went green") are not asked for, and the request after the break decides the intent.
:func:`split_context` finds that break in the raw text (punctuation is gone once the query is
words): a comma, semicolon, colon or dash after which a clause opens with an imperative verb or a
question word, when the clause before it does not itself open with an imperative (then the query
is two requests, "open a ticket, assign it to bob") and is a statement or a condition ("if the
build fails, rerun it").
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gateway.discovery.words import split_words

__all__ = ["split_context"]

# A break between clauses: ";", ":", a dash between spaces, or a comma.
_BREAK = re.compile(r"\s*(?:;|:(?!//)|\s[-–—]{1,2}\s|,)\s*")
# Words that open a question: a request too ("..., what ignore file does GitHub suggest").
_QUESTION = frozenset("what which who whom whose how where when why is are does do did has have can could "
                      "should".split())
# Words that open a condition or a time, whose clause is context whatever its verb: "if the build
# fails, rerun it", "once CI is green, merge it".
_CONDITIONS = frozenset("if when once after since because as now".split())
# Openers of an event the request is about ("whenever a release is published, hit URL": a hook).
_EVENTS = frozenset("whenever every each anytime".split())
# Openers that are requests though no verb: "please rerun it", "then delete the branch".
_SOFTENERS = frozenset("please then and also so now".split())
# Adjectives a map key can be ("new" → create, "open" → create) that open a noun phrase at a
# clause's start ("new Django project, ...").
_ADJECTIVES = frozenset("new open last latest current old stale".split())


def split_context(query: str, imperative: Callable[[str], bool]) -> tuple[str, str]:
    """(context, request) of *query*; context is "" when the query says no scene before its
    request. *imperative* says whether a word, opening a clause, asks for an action ("rerun",
    "take", "list")."""
    for m in _BREAK.finditer(query):
        before, after = query[:m.start()], query[m.end():]
        head = split_words(before)
        tail = split_words(after)
        while tail and tail[0] in _SOFTENERS:
            tail = tail[1:]
        if len(head) < 2 or len(tail) < 2:
            continue
        if not (tail[0] in _QUESTION or _asks(tail, imperative)):
            continue
        if head[0] in _EVENTS:
            return "", query  # "whenever a release is published, hit URL": the event is the request's
        if head[0] in _CONDITIONS or not _asks(head, imperative) and head[0] not in _QUESTION:
            return before, after
        return "", query  # two requests, or a question then more: no scene
    return "", query


_ARTICLES = frozenset("a an the this that my our".split())


def _asks(words: list[str], imperative: Callable[[str], bool]) -> bool:
    """Whether a clause of *words* opens with an imperative: "open a ticket" does, "new Django
    project" and "open PRs pile up" do not (an adjective before a noun)."""
    return imperative(words[0]) and (words[0] not in _ADJECTIVES or words[1] in _ARTICLES)
