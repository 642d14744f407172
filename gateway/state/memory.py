"""``state.store: memory``: one process, nothing shared.

Records are kept in a dict (with their expiry) so code written against the store behaves the same
in one process; routing has nobody to reach. The transports do not consult this store on the hot
path (``shared`` is False): a single replica costs exactly what it did before the seam existed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from .base import Deliver

__all__ = ["MemoryStore"]


class MemoryStore:
    shared = False
    ops = 0

    def __init__(self, replica: str) -> None:
        self.replica = replica
        self._records: dict[str, tuple[float, dict[str, Any]]] = {}

    async def start(self, deliver: Deliver) -> None:
        return None

    async def close(self) -> None:
        self._records.clear()

    async def ping(self) -> None:
        return None

    async def save_session(self, session_id: str, record: dict[str, Any], ttl_s: float) -> None:
        self._records[session_id] = (time.monotonic() + ttl_s, record)

    async def load_session(self, session_id: str) -> dict[str, Any] | None:
        entry = self._records.get(session_id)
        if entry is None:
            return None
        if entry[0] < time.monotonic():
            del self._records[session_id]
            return None
        return entry[1]

    async def touch_session(self, session_id: str, ttl_s: float) -> None:
        entry = self._records.get(session_id)
        if entry is not None:
            self._records[session_id] = (time.monotonic() + ttl_s, entry[1])

    async def drop_session(self, session_id: str) -> None:
        self._records.pop(session_id, None)

    # A single process resumes its streams from memory (post_stream.py): no event log here.
    async def append_event(self, key: str, seq: int, fields: dict[str, str], max_len: int, ttl_s: float) -> None:
        return None

    async def read_events(self, key: str, after: int, block_s: float = 0.0) -> list[tuple[int, dict[str, str]]]:
        return []

    async def last_event(self, key: str) -> tuple[int, dict[str, str]] | None:
        return None

    async def replica_alive(self, replica: str) -> bool:
        return replica == self.replica

    async def route(self, replica: str | None, message: dict[str, Any]) -> int:
        return 0  # there is no other replica

    # The in-process session cap (quota.py) and subscriptions count in memory: never asked here.
    async def claim_place(self, scopes: Sequence[tuple[str, int]], member: str, ttl_s: float) -> tuple[int, int] | None:
        return None

    async def refresh_place(self, scopes: Sequence[str], member: str, ttl_s: float) -> None:
        return None

    async def release_place(self, scopes: Sequence[str], member: str) -> None:
        return None

    async def count_places(self, scope: str) -> int:
        return 0

    async def load_vectors(self, keys: Sequence[str], ttl_s: float) -> list[bytes | None]:
        return [None] * len(keys)  # one process: the encoder's own caches keep its vectors

    async def save_vectors(self, items: Sequence[tuple[str, bytes]], ttl_s: float) -> None:
        return None

    async def claim_vectors(self, keys: Sequence[str], owner: str, ttl_s: float) -> list[bool]:
        return [True] * len(keys)

    async def hold(self, entries: Sequence[str], held: bool) -> None:
        return None

    async def held_here(self) -> set[str]:
        return set()

    async def take_over(self) -> list[str]:
        return []
