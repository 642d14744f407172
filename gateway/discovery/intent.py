"""What kind of operation a query asks for, and what kind a tool is.

A caller who asks "who can push to the repo" wants a read; "drop bob from the team" a delete;
"open a ticket" a write. Tools say what they are in their MCP annotations (``readOnlyHint``,
``destructiveHint``; the OpenAPI connector sets them from the HTTP method: GET → read, DELETE →
destructive, POST/PUT/PATCH → write). :func:`query_intent` reads the query's verbs and question
form; :func:`tool_kind` the annotations; the ranker adds :func:`agreement` to a tool's score.

The rules are about English and HTTP, not about any one API:

* a question ("who ...", "what ...", "is ...", "has ...") asks for a read, whatever its verbs say
  ("has this PR been merged" is a read, not a merge);
* otherwise an action verb decides: delete/remove → delete; create/update/cancel/... → write;
  list/get/search/download → read;
* a noun phrase with no verb ("open tickets in the repo", "my unread notifications") is most often
  a read: a weak read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Intent", "query_intent", "is_question", "tool_kind", "agreement", "READ", "WRITE", "DELETE"]

READ, WRITE, DELETE = "read", "write", "delete"

# A query that opens with one of these is a question: it asks to see something.
_QUESTION = frozenset("who whom whose what which how is are was were does do did has have when where why "
                      "whats whos".split())
# "At what hours ...", "in which repos ...": a question too.
_PREPOSITIONS = frozenset("at in on for from to by with of since until".split())
_WH = frozenset("who whom whose what which how when where why".split())
# Spec verbs (as query.expand yields them) by the kind of operation they name.
_DELETE_VERBS = frozenset({"delete", "remove"})
_WRITE_VERBS = frozenset({"create", "update", "cancel", "re run", "rerun", "dispatch",
                          "transfer", "disable", "enable", "approve", "merge", "set", "add",
                          "assign", "dismiss", "lock", "unlock", "rename", "replace", "upload", "star",
                          "follow", "block", "convert", "accept", "mark", "submit", "request"})
_READ_VERBS = frozenset({"list", "get", "search", "download", "check"})
# Plain reading words that are stop words for matching ("show me ...") but still say "a read".
_READ_CUES = frozenset("show list get see view display fetch read look find tell retrieve obtain grab inspect "
                       "describe return details info".split())

_STRONG, _WEAK = 0.15, 0.05


@dataclass(frozen=True, slots=True)
class Intent:
    """The kind of operation asked for (``READ``/``WRITE``/``DELETE``) and how sure we are."""

    kind: str
    strong: bool


def is_question(words: list[str]) -> bool:
    """Whether *words* ask a question ("is the repo archived", "at what hours ...")."""
    return bool(words) and (words[0] in _QUESTION or (words[0] in _PREPOSITIONS and words[1:2] != []
                                                      and words[1] in _WH))


def query_intent(words: list[str], verb_phrases: Iterable[tuple[str, ...]],
                 writes: frozenset[str] = frozenset()) -> Intent:
    """The intent of a query from its words (:func:`~gateway.discovery.words.split_words`) and the
    spec phrases of its action concepts, in order; *writes* are the enabled packs' own spec verbs
    (each asks for a change)."""
    if is_question(words):
        return Intent(READ, True)
    for phrases in verb_phrases:
        said = set(phrases)
        if said & _DELETE_VERBS:
            return Intent(DELETE, True)
        if said & _WRITE_VERBS or said & writes:
            return Intent(WRITE, True)
        if said & _READ_VERBS:
            return Intent(READ, True)
    if any(w in _READ_CUES for w in words):
        return Intent(READ, True)
    return Intent(READ, False)


def tool_kind(annotations: Mapping[str, Any] | None) -> str:
    """``READ``, ``WRITE`` or ``DELETE`` from a tool's MCP annotations; ``""`` when they say nothing."""
    if not annotations:
        return ""
    if annotations.get("readOnlyHint") is True:
        return READ
    if annotations.get("destructiveHint") is True:
        return DELETE
    if annotations.get("readOnlyHint") is False:
        return WRITE
    return ""


def agreement(intent: Intent, kind: str) -> float:
    """Score adjustment for a tool of *kind* under *intent*: a bonus when they agree, a penalty when
    they do not (half of it between a write and a delete, which callers and specs mix up:
    "cancel", "remove a label" can be either), nothing when the tool's kind is unknown."""
    if not kind:
        return 0.0
    step = _STRONG if intent.strong else _WEAK
    if kind == intent.kind:
        return step
    if READ in (kind, intent.kind):
        return -step
    return -step / 2
