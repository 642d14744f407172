"""The contract of a state store (see :mod:`gateway.state`) and the replica id."""

from __future__ import annotations

import secrets
from collections.abc import Callable
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
