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
  copy apply it; DELETE drops the record and closes every copy;
* the events of a resumable request stream (older revisions) are logged in the store (bounded,
  expiring: :data:`EVENT_LOG_TTL_S`); a ``Last-Event-ID`` naming another replica's stream is
  resumed here: what the log holds after it is replayed, then the log is followed until the
  response. When the replica running the request is gone, the stream ends with an error response
  saying so (the client does not wait for an answer that cannot come).

An endpoint's sessions (``/mcp/{name}``, :mod:`gateway.endpoints`) are shared the same way by
the endpoint's own transport: its records name the endpoint, and a :class:`SharedSessions` serves
only the records of its own endpoint (``endpoint=None``: ``/mcp``), so a session id is unknown
(404) on any other path, on every replica.

With the memory store none of this exists: :class:`StreamableHTTP` has no :class:`SharedSessions`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.context import Principal
from gateway.protocol import jsonrpc
from gateway.protocol.errors import INTERNAL_ERROR
from gateway.protocol.jsonrpc import Incoming
from gateway.session import Session
from gateway.state import StateStore
from gateway.state.records import principal_of

from .quota import SessionQuota

__all__ = ["SharedSessions", "BROADCASTS", "RECORD_METHODS", "EVENT_LOG_TTL_S"]

log = logging.getLogger("gateway.replicas")

# Sent by every replica to its own copy of each session: never routed.
BROADCASTS = frozenset({"notifications/tools/list_changed", "notifications/resources/list_changed",
                        "notifications/prompts/list_changed", "notifications/message"})
# Requests that change the session's record.
RECORD_METHODS = frozenset({"logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
# A stream's event log lives this long after its last event (longer than post_stream's
# UNCOLLECTED_S: a resumption may come a while after the break), at most MAX_EVENTS events.
EVENT_LOG_TTL_S = 300.0
EVENT_LOG_MAX = 1000


def owner_of(request_id: Any) -> str | None:
    """The replica named in a server→client request id ``gw.<replica>.<n>``, else None."""
    if not isinstance(request_id, str) or not request_id.startswith("gw."):
        return None
    parts = request_id.split(".")
    return parts[1] if len(parts) == 3 and parts[1] else None


class SharedSessions:
    """The store side of shared sessions: records, TTLs and routed messages."""

    def __init__(self, store: StateStore, record_of: Callable[[Session], dict[str, Any]],
                 ttl_s: Callable[[], float], quota: SessionQuota | None = None,
                 endpoint: str | None = None) -> None:
        self.store = store
        self.endpoint = endpoint  # the endpoint whose sessions these are (None: /mcp)
        self._record_of = record_of
        self._ttl_s = ttl_s
        self.quota = quota  # its places live as long as the records (:mod:`.quota`)
        self._touched: dict[str, float] = {}

    @property
    def replica(self) -> str:
        return self.store.replica

    # -- records ----------------------------------------------------------------------------------
    async def load(self, session_id: str) -> tuple[dict[str, Any], Principal] | None:
        record = await self.store.load_session(session_id)
        principal = principal_of(record) if record is not None else None
        if record is None or principal is None or record.get("endpoint") != self.endpoint:
            return None
        self._touched[session_id] = time.monotonic()
        return record, principal

    async def save(self, session: Session) -> None:
        await self.store.save_session(session.id, self._record_of(session), self._ttl_s())
        self._touched[session.id] = time.monotonic()

    async def touch(self, session: Session) -> None:
        """Keep the record (and the session's place under the cap) alive while the session is used:
        at most one write per tenth of the TTL."""
        ttl = self._ttl_s()
        now = time.monotonic()
        if now - self._touched.get(session.id, 0.0) > ttl / 10:
            self._touched[session.id] = now
            await self.store.touch_session(session.id, ttl)
            if self.quota is not None:
                await self.quota.refresh(session.principal, session.id)

    async def changed(self, session: Session) -> None:
        """The record changed here (log level, subscriptions): save it, tell the other copies."""
        await self.save(session)
        await self.store.route(None, {"t": "refresh", "sid": session.id, "log_level": session.log_level})

    async def ended(self, session: Session) -> None:
        """DELETE: the session ends everywhere, and frees its place under the cap."""
        self._touched.pop(session.id, None)
        await self.store.drop_session(session.id)
        if self.quota is not None:
            await self.quota.end(session.principal, session.id)
        await self.store.route(None, {"t": "closed", "sid": session.id})

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

    # -- resumable streams -----------------------------------------------------------------------------
    def journal(self, session_id: str, stream: str, request_id: str | int) -> Callable[[int, bytes, bool], Awaitable[None]]:
        """The event log writer of one request stream (:class:`~.post_stream.PostStream`'s ``journal``).
        A store that fails loses resumability elsewhere, never the call: the error is logged."""
        key = f"{session_id}:{stream}"
        rid = json.dumps(request_id)

        async def write(seq: int, frame: bytes, final: bool) -> None:
            fields = {"f": frame.decode(), "r": rid, "d": "1" if final else ""}
            try:  # entry ids are 0-(seq+1): Redis refuses 0-0, and the priming event is seq 0
                await self.store.append_event(key, seq + 1, fields, EVENT_LOG_MAX, EVENT_LOG_TTL_S)
            except Exception as exc:
                log.warning("stream %s of session %s: the event log failed: %r", stream, session_id, exc)
        return write

    async def request_of(self, session_id: str, stream: str) -> str | int | None | bool:
        """The request id a logged stream answers; False when nothing of the stream is logged."""
        last = await self.store.last_event(f"{session_id}:{stream}")
        if last is None:
            return False
        rid = json.loads(last[1].get("r", "null"))
        return rid if isinstance(rid, (str, int)) else None

    async def follow(self, session_id: str, stream: str, after: int, request_id: str | int | None,
                     send: Callable[[bytes], Awaitable[None]], keepalive_s: float) -> None:
        """Send what the stream's log holds after event ``after``, then what is logged next, until
        the response; end with an error response when the replica running the request is gone."""
        key = f"{session_id}:{stream}"
        owner = stream.partition(".")[0]
        seen = after
        quiet = 0.0
        while quiet < EVENT_LOG_TTL_S:
            entries = await self.store.read_events(key, seen + 1, block_s=1.0)
            for entry, fields in entries:
                seq = entry - 1
                seen = max(seen, seq)
                if seq == 0:
                    continue  # the priming event: nothing to replay
                await send(fields.get("f", "").encode())
                if fields.get("d"):
                    return
            if entries:
                quiet = 0.0
                continue
            if not await self.store.replica_alive(owner):
                error = jsonrpc.error_response(request_id, INTERNAL_ERROR, "The replica running this request "
                                               "stopped before answering it; send the request again")
                await send(f"id: {stream}:{seen + 1}\nevent: message\ndata: ".encode() + jsonrpc.dumps(error) + b"\n\n")
                return
            quiet += 1.0
            if quiet % max(1.0, round(keepalive_s)) < 1.0:
                await send(b": keepalive\n\n")
