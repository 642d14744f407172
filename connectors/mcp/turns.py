"""Turns between downstream sessions on one shared upstream session (``shared_calls: queued``).

Over stdio and legacy SSE nothing relates an upstream's sampling, elicitation or roots request to
the call that caused it, so the connector can attribute it only while every call in flight on that
upstream belongs to one downstream session (:func:`connectors.mcp.relay.sole_owner`). A shared
session therefore serves the calls of one downstream session at a time: any number of that
session's calls run together, other sessions' calls wait, first come first served by session.
The holder's new calls join its turn even while others wait: one of its calls may be waiting on
the client, whose answer may need another call (a sampling handler calling a tool), and making
that call queue would deadlock both sessions until their deadlines. The price: a session that
never lets its calls drain keeps the others waiting, each wait bounded by the caller's own
deadline (the timeout filter cancels it).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["SessionTurns"]


class SessionTurns:
    """Admits the calls of one downstream session (by id) at a time, FIFO between sessions."""

    def __init__(self) -> None:
        self._holder: str | None = None
        self._active = 0  # calls of the holder admitted and not yet released
        self._waiting: OrderedDict[str, list[asyncio.Future[None]]] = OrderedDict()

    @property
    def holder(self) -> str | None:
        """The session whose calls may run now (None: nobody's call runs)."""
        return self._holder

    def waiting(self) -> int:
        """Calls waiting for their session's turn."""
        return sum(len(futs) for futs in self._waiting.values())

    @asynccontextmanager
    async def turn(self, session_id: str) -> AsyncIterator[None]:
        """Wait for ``session_id``'s turn (at once when nobody's or its own calls run), run the body."""
        await self._acquire(session_id)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, sid: str) -> None:
        if self._holder is None or self._holder == sid:
            self._holder = sid
            self._active += 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(sid, []).append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release()  # admitted just as the caller gave up: pass the turn on
            else:
                futs = self._waiting.get(sid, [])
                if fut in futs:
                    futs.remove(fut)
                if not futs:
                    self._waiting.pop(sid, None)
            raise

    def _release(self) -> None:
        self._active -= 1
        if self._active > 0:
            return
        self._holder = None
        while self._waiting:
            sid, futs = self._waiting.popitem(last=False)
            live = [f for f in futs if not f.done()]
            if live:
                self._holder, self._active = sid, len(live)
                for fut in live:
                    fut.set_result(None)
                return
