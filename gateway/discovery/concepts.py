"""What a parsed query is: :class:`Concept` (one thing asked for) and :class:`Query`.

A concept is the caller's word or phrase plus the spec phrases that mean the same; the ranker
(:mod:`.rank`) scores a tool by the concepts it covers. :data:`VERBS` are the action words specs
name operations with: a concept holding one asks for an action rather than names a thing.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.discovery.intent import Intent

__all__ = ["Concept", "Query", "VERBS"]

# The action words specs name operations with (English; a pack adds its API's own coinages:
# SenseTables.verbs, GitHub's "rerequest", "redeliver").
VERBS = frozenset({"create", "list", "get", "delete", "remove", "update", "cancel", "re run", "rerun",
                   "dispatch", "download", "search", "transfer", "disable",
                   "enable", "approve", "merge", "set", "add", "dismiss", "lock", "unlock", "mark", "assign",
                   "block", "unblock", "revoke", "upload", "convert", "regenerate", "request"})


@dataclass(frozen=True, slots=True)
class Concept:
    """One thing the caller asked for: their words plus the spec phrases meaning the same.
    ``verb`` marks an action (create, list, delete, ...) rather than a thing."""

    said: str
    phrases: tuple[str, ...]
    participle: bool = False  # "added", "deleted", "failing": describes a thing, asks no action
    answer: bool = False  # "the *title* and *body* of issue 77": a field the read answers with
    action: bool = False  # holds a pack's own spec verb (SenseTables.verbs): an action like VERBS'

    @property
    def verb(self) -> bool:
        return not self.participle and not self.answer and (self.action or any(p in VERBS for p in self.phrases))


@dataclass(frozen=True, slots=True)
class Query:
    """A parsed query: the concepts it asks for (each counts toward a tool's coverage), the soft
    hints (a small bonus, never a cost) and the kind of operation it asks for."""

    concepts: tuple[Concept, ...]
    soft: tuple[Concept, ...]
    intent: Intent
    lead: str = ""  # the query's first word when it may be an imperative verb ("star the repo")
    question: bool = False  # "is the repo archived": asks for a fact, which a read's fields hold
