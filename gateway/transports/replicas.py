"""Streamable HTTP sessions shared by replicas (``state.store: redis://...``).

Any replica serves any request of any session: a replica that does not know a session loads its
record from the store and rebuilds it (:mod:`gateway.state.records`; the principal binding is
checked as on the replica that started it). What lives in one process is reached by routing:

* a client's answer to a server→client request goes to the replica named in the request's id
  (``gw.<replica>.<n>``); when that replica is gone the answer is dropped and logged (the call
  that asked died with it, and its client got an error on that call's own stream);
* ``notifications/cancelled`` goes to every replica (whichever runs the request cancels it);
* a notification for the session unrelated to a request (a resource update) goes to every
  replica, and the one holding the session's GET stream delivers it. Broadcasts every replica
  makes by itself (``list_changed``, connector log lines) are not routed: each replica's own copy
  of the session sends them, so the GET stream gets each once;
* a change of the record (log level, subscriptions) is saved and announced, so replicas holding a
  copy apply it; DELETE drops the record and closes every copy.

With the memory store none of this exists: :class:`StreamableHTTP` has no :class:`SharedSessions`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from gateway.context import Principal
from gateway.protocol.jsonrpc import Incoming
from gateway.session import Session
from gateway.state import StateStore
from gateway.state.records import principal_of

__all__ = ["SharedSessions", "BROADCASTS", "RECORD_METHODS"]

log = logging.getLogger("gateway.replicas")

# Sent by every replica to its own copy of each session: never routed.
BROADCASTS = frozenset({"notifications/tools/list_changed", "notifications/resources/list_changed",
                        "notifications/prompts/list_changed", "notifications/message"})
# Requests that change the session's record.
RECORD_METHODS = frozenset({"logging/setLevel", "resources/subscribe", "resources/unsubscribe"})


def owner_of(request_id: Any) -> str | None:
    """The replica named in a server→client request id ``gw.<replica>.<n>``, else None."""
    if not isinstance(request_id, str) or not request_id.startswith("gw."):
        return None
    parts = request_id.split(".")
    return parts[1] if len(parts) == 3 and parts[1] else None


class SharedSessions:
    """The store side of shared sessions: records, TTLs and routed messages."""

    def __init__(self, store: StateStore, record_of: Callable[[Session], dict[str, Any]],
                 ttl_s: Callable[[], float]) -> None:
        self.store = store
        self._record_of = record_of
        self._ttl_s = ttl_s
        self._touched: dict[str, float] = {}

    @property
    def replica(self) -> str:
        return self.store.replica

    # -- records ----------------------------------------------------------------------------------
    async def load(self, session_id: str) -> tuple[dict[str, Any], Principal] | None:
        record = await self.store.load_session(session_id)
        principal = principal_of(record) if record is not None else None
        if record is None or principal is None:
            return None
        self._touched[session_id] = time.monotonic()
        return record, principal

    async def save(self, session: Session) -> None:
        await self.store.save_session(session.id, self._record_of(session), self._ttl_s())
        self._touched[session.id] = time.monotonic()

    async def touch(self, session_id: str) -> None:
        """Keep the record alive while the session is used (at most one write per tenth of the TTL)."""
        ttl = self._ttl_s()
        now = time.monotonic()
        if now - self._touched.get(session_id, 0.0) > ttl / 10:
            self._touched[session_id] = now
            await self.store.touch_session(session_id, ttl)

    async def changed(self, session: Session) -> None:
        """The record changed here (log level, subscriptions): save it, tell the other copies."""
        await self.save(session)
        await self.store.route(None, {"t": "refresh", "sid": session.id, "log_level": session.log_level})

    async def ended(self, session_id: str) -> None:
        """DELETE: the session ends everywhere."""
        self._touched.pop(session_id, None)
        await self.store.drop_session(session_id)
        await self.store.route(None, {"t": "closed", "sid": session_id})

    def forget(self, session_id: str) -> None:
        self._touched.pop(session_id, None)

    # -- routing ------------------------------------------------------------------------------------
    async def route_frame(self, session: Session, messages: list[Incoming]) -> list[Incoming]:
        """Route what belongs to other replicas; returns the messages to handle here."""
        local: list[Incoming] = []
        for inc in messages:
            if inc.kind == "response":
                owner = owner_of(inc.message.get("id"))
                if owner is not None and owner != self.replica and not session.awaits(inc.message.get("id")):
                    reached = await self.store.route(owner, {"t": "response", "sid": session.id, "msg": inc.message})
                    if not reached:
                        log.warning("answer %r of session %s is for replica %s, which is gone: dropped",
                                    inc.message.get("id"), session.id, owner)
                    continue
            elif inc.kind == "notification" and inc.message.get("method") == "notifications/cancelled":
                await self.store.route(None, {"t": "cancel", "sid": session.id, "msg": inc.message})
            local.append(inc)
        return local

    async def notify_elsewhere(self, session_id: str, message: dict[str, Any]) -> None:
        """A message for the session's GET stream, which is not open here."""
        if message.get("method") in BROADCASTS:
            return
        await self.store.route(None, {"t": "notify", "sid": session_id, "msg": message})
