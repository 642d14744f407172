"""The contract of a state store (see :mod:`gateway.state`) and the replica id."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any, Protocol

__all__ = ["StateStore", "Deliver", "new_replica_id"]

# A routed message arriving at this replica (already decoded; sent by another replica).
Deliver = Callable[[dict[str, Any]], None]


def new_replica_id() -> str:
    """A short random id for this process (no dots or dashes: it is embedded in request ids)."""
    return secrets.token_hex(5)


class StateStore(Protocol):
    """Session records and routing between replicas."""

    replica: str
    shared: bool  # False: one process, the transports keep everything local
    ops: int  # store commands sent so far (readiness detail; bench/scale.py reports them per call)

    async def start(self, deliver: Deliver) -> None:
        """Start receiving messages routed to this replica (or to all)."""

    async def close(self) -> None: ...

    async def ping(self) -> None:
        """Raises when the store cannot be reached (readiness)."""

    async def save_session(self, session_id: str, record: dict[str, Any], ttl_s: float) -> None: ...

    async def load_session(self, session_id: str) -> dict[str, Any] | None: ...

    async def touch_session(self, session_id: str, ttl_s: float) -> None:
        """Extend a record's TTL (a session in use does not expire)."""

    async def drop_session(self, session_id: str) -> None: ...

    async def append_event(self, key: str, seq: int, fields: dict[str, str], max_len: int, ttl_s: float) -> None:
        """Append event ``seq`` of a resumable stream to its bounded, expiring log."""

    async def read_events(self, key: str, after: int, block_s: float = 0.0) -> list[tuple[int, dict[str, str]]]:
        """The logged events after ``after``, waiting up to ``block_s`` for one when there is none."""

    async def last_event(self, key: str) -> tuple[int, dict[str, str]] | None:
        """The newest logged event of a stream; None when nothing of it is kept."""

    async def replica_alive(self, replica: str) -> bool:
        """Whether a replica still listens for routed messages."""

    async def route(self, replica: str | None, message: dict[str, Any]) -> int:
        """Send ``message`` to one replica (None: to every other one); returns how many replicas
        received it (0: the one named is gone)."""

    # -- tool vectors shared by replicas (:mod:`gateway.discovery.shared_vectors`) ------------------
    async def load_vectors(self, keys: Sequence[str], ttl_s: float) -> list[bytes | None]:
        """The values stored under *keys*, in order (None where none is kept); each one read
        expires ``ttl_s`` from now."""

    async def save_vectors(self, items: Sequence[tuple[str, bytes]], ttl_s: float) -> None:
        """Store each (key, value), expiring after ``ttl_s``, and end the keys' claims."""

    async def claim_vectors(self, keys: Sequence[str], owner: str, ttl_s: float) -> list[bool]:
        """Claim each key for *owner* unless another claim of it is alive (each claim expires after
        ``ttl_s``); True where this call claimed it."""

    # -- places under a cap shared by replicas (gateway.http.max_sessions; :mod:`gateway.transports.quota`)
    async def claim_place(self, scopes: Sequence[tuple[str, int]], member: str, ttl_s: float) -> tuple[int, int] | None:
        """Atomically give ``member`` a place in every scope (a name, and the most places it has),
        each place expiring after ``ttl_s`` unless refreshed; None when taken, else the index of the
        first full scope and how many places it holds (then nothing is taken)."""

    async def refresh_place(self, scopes: Sequence[str], member: str, ttl_s: float) -> None:
        """Push a held place's expiry ``ttl_s`` ahead (a place nobody holds is not created)."""

    async def release_place(self, scopes: Sequence[str], member: str) -> None: ...

    async def count_places(self, scope: str) -> int:
        """The unexpired places of a scope."""

    # -- upstream resource subscriptions held for sessions (:mod:`gateway.subscriptions`) ------------
    async def hold(self, entries: Sequence[str], held: bool) -> None:
        """Record that this replica holds (``held``) or no longer holds these subscription entries."""

    async def held_here(self) -> set[str]:
        """The entries the store says this replica holds (another may have taken some over)."""

    async def take_over(self) -> list[str]:
        """Move to this replica the entries held by replicas that are gone; the entries moved."""
