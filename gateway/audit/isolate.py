"""What the audit store refused, and why: its content (isolate the culprit) or its absence (spill).

A store refuses a batch either because it is away (a refused connection, a dropped session: the
writer spills and retries) or because of what a row holds (an encoding it cannot take, a value
too long, a wrong type: retrying would fail forever). :func:`insert_isolating` tells them apart
(:func:`refused_content`) and, for content, splits the batch in halves until the culprit is
alone: the other events are stored, the culprit is stored in its strong escaped form
(:func:`~gateway.audit.escape.escape_event`), or, refused even so, appended to the rejected file
with an error logged. So one bad event never takes its batch with it, and a spill replay never
stalls on one.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import gateway.audit.spill as spill

from .escape import escape_event
from .store import AuditStore

__all__ = ["insert_isolating", "refused_content", "reason"]

log = logging.getLogger("gateway.audit")

# SQLSTATE classes that refuse what a row holds, not the connection: data exception, integrity
# constraint, program limit exceeded (an index entry too large).
CONTENT_CLASSES = ("22", "23", "54")




async def insert_isolating(store: AuditStore, events: list[dict[str, Any]], rejected: Path) -> tuple[int, int]:
    """Insert ``events``; returns how many culprits were stored escaped and how many went to the
    ``rejected`` file. Raises what the store raised when it is unavailable."""
    try:
        await store.write(events)
        return 0, 0
    except Exception as exc:
        if not refused_content(exc):
            raise
        if len(events) > 1:
            mid = len(events) // 2
            first_half = await insert_isolating(store, events[:mid], rejected)
            second_half = await insert_isolating(store, events[mid:], rejected)
            return first_half[0] + second_half[0], first_half[1] + second_half[1]
        first = exc
    event = escape_event(dict(events[0]), strong=True)
    try:
        await store.write([event])
    except Exception as exc:
        if not refused_content(exc):
            raise
        spill.append(rejected, spill.line(event))
        log.error("audit event %s refused by the store even escaped, kept in %s: %s",
                  event.get("event_id"), rejected, reason(exc))
        return 0, 1
    log.warning("audit event %s written escaped: the store refused it (%s)", event.get("event_id"), reason(first))
    return 1, 0


def reason(exc: BaseException) -> str:
    """What went wrong with the store, as the driver said it, on one bounded line.

    SQLAlchemy's own message carries the statement (a batch's INSERT runs to kilobytes) and, but
    for the store's ``hide_parameters``, the rows: principals, session ids, arguments. The log
    gets neither.
    """
    orig = getattr(exc, "orig", None)
    cause = orig if isinstance(orig, BaseException) else exc
    text = " ".join(str(cause).split()) or "no detail"
    return f"{type(cause).__name__}: {text}"[:300]


def refused_content(exc: BaseException) -> bool:
    """Whether the store refused what the rows hold (split the batch, escape the culprit) rather
    than being unavailable (spill and retry): an encoding error, a driver error whose SQLSTATE is
    of :data:`CONTENT_CLASSES` (PostgreSQL), or SQLite's DataError/IntegrityError. Anything in
    the chain that speaks of the connection (an OSError, a timeout, SQLAlchemy's
    ``connection_invalidated``) makes it unavailability: an outage must never reject events."""
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and len(chain) < 8:
        chain.append(cur)
        orig = getattr(cur, "orig", None)
        cur = orig if isinstance(orig, BaseException) and orig is not cur else cur.__cause__
    if any(isinstance(e, OSError | TimeoutError) or getattr(e, "connection_invalidated", False) for e in chain):
        return False
    for e in chain:
        state = getattr(e, "sqlstate", None)
        if isinstance(e, UnicodeError | ValueError | TypeError) or \
                isinstance(state, str) and state[:2] in CONTENT_CLASSES or \
                type(e).__module__ == "sqlite3" and type(e).__name__ in ("DataError", "IntegrityError"):
            return True
    return False
