"""Legacy HTTP+SSE transport (MCP 2024-11-05): ``GET /sse`` and ``POST /messages?session_id=``.

The GET stream opens a session (under the session cap of :mod:`.quota`, which it holds a place of
while open) and first sends the ``endpoint`` event naming where to POST. Every
server message, responses included, travels on that stream; a POST is acknowledged with
``202 Accepted`` at once and its requests run in the background. A POST that cannot be parsed is
refused with ``400`` and a JSON-RPC error body.

Across replicas (``state.store`` shared): the GET stream lives on the replica that opened it (its
owner), which keeps a small record ``sse.<session id>`` (owner, principal) alive in the store while
the stream is open. A POST reaching another replica is checked there (record, principal, JSON) and
routed to the owner over the bus (``sse_post``); the owner runs it and writes the replies on the
stream, as for a local POST. When the owner is gone (the stream broke with it) the POST gets
``404``: the client opens a new stream. A batch the session's revision refuses is answered on
the stream (not with ``400``) when the POST was routed: only the owner knows the revision.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any

from aiohttp import web

from gateway.config import HttpConfig
from gateway.context import Principal
from gateway.protocol import jsonrpc
from gateway.protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR
from gateway.session import Session
from gateway.state import StateStore
from gateway.state.records import principal_of, session_record

from .common import batch_refused, process_frame
from .host import SessionFactory
from .quota import SessionQuota
from .sse_writer import SSEWriter, open_sse
from .streamable_http import quota_refused, rpc_error

__all__ = ["LegacySSE", "ROUTED_KIND"]

# The bus message kind of a POST routed to the replica holding the session's stream.
ROUTED_KIND = "sse_post"

log = logging.getLogger("gateway.sse")


class _SSESession:
    __slots__ = ("session", "writer")

    def __init__(self, session: Session, writer: SSEWriter) -> None:
        self.session = session
        self.writer = writer


class LegacySSE:
    """The /sse and /messages endpoints: sessions from ``sessions``, keepalives from ``http``."""

    def __init__(self, sessions: SessionFactory, http: HttpConfig, messages_path: str = "/messages",
                 quota: SessionQuota | None = None, store: StateStore | None = None,
                 record_ttl_s: float = 3600.0) -> None:
        self.sessions = sessions
        self.http = http
        self.messages_path = messages_path
        self.quota = quota
        # Set only when replicas share sessions: then POSTs are routed to the stream's owner.
        self.store = store if store is not None and store.shared else None
        self.record_ttl_s = record_ttl_s
        self.streams: dict[str, _SSESession] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def get(self, request: web.Request, principal: Principal) -> web.StreamResponse:
        if not self.sessions.accepting:
            return rpc_error(503, INTERNAL_ERROR, "Service Unavailable: the gateway is shutting down")
        quota = self.quota
        place = secrets.token_urlsafe(16)  # the stream's place under a cap shared by replicas
        if quota is not None:
            refused = await quota.acquire(principal, place)
            if refused is not None:
                return quota_refused(refused)
        try:
            return await self._serve(request, principal, place)
        finally:
            if quota is not None:
                quota.release(principal)
                await quota.end(principal, place)

    async def _serve(self, request: web.Request, principal: Principal, place: str) -> web.StreamResponse:
        writer: SSEWriter | None = None

        async def send(message: dict[str, Any], related_request_id: object = None) -> None:
            assert writer is not None
            await writer.send(message)

        session = self.sessions.open_session("sse", send, principal)
        writer = await open_sse(request)
        self.streams[session.id] = _SSESession(session, writer)
        self.sessions.add_session(session)
        keeper: asyncio.Task[None] | None = None
        try:
            if self.store is not None:
                keeper = asyncio.create_task(self._keep_record(session, place))
            await writer.send_raw(f"event: endpoint\ndata: {self.messages_path}?session_id={session.id}\n\n".encode())
            await writer.wait_closed(keepalive_s=self.http.keepalive_s)
        except ConnectionResetError:
            pass
        finally:
            self.streams.pop(session.id, None)
            if keeper is not None:
                keeper.cancel()
                await self._drop_record(session.id)
            await session.close()
        return writer.response

    # -- the record other replicas route POSTs by ------------------------------------------------
    async def _keep_record(self, session: Session, place: str) -> None:
        """Save the stream's record, and again every third of its TTL while the stream is open, with
        its place under the session cap (a crashed owner's record and place expire; a store error is
        retried at the next beat)."""
        assert self.store is not None
        record = {**session_record(session), "owner": self.store.replica}
        while True:
            try:
                await self.store.save_session(f"sse.{session.id}", record, self.record_ttl_s)
                if self.quota is not None:
                    await self.quota.refresh(session.principal, place)
            except Exception as exc:
                log.warning("sse session %s: saving its record failed: %r", session.id, exc)
            await asyncio.sleep(self.record_ttl_s / 3)

    async def _drop_record(self, session_id: str) -> None:
        assert self.store is not None
        try:
            await self.store.drop_session(f"sse.{session_id}")
        except Exception as exc:  # it expires anyway
            log.warning("sse session %s: dropping its record failed: %r", session_id, exc)

    async def _post_elsewhere(self, request: web.Request, principal: Principal, session_id: str) -> web.StreamResponse:
        """A POST for a stream this replica does not hold: route it to the owner."""
        assert self.store is not None
        record = await self.store.load_session(f"sse.{session_id}")
        owner = record.get("owner") if record is not None else None
        if record is None or not isinstance(owner, str):
            return rpc_error(404, INVALID_REQUEST, "Not Found: unknown or expired session")
        if principal_of(record) != principal:
            return rpc_error(403, INVALID_REQUEST, "Forbidden: the session belongs to another principal")
        body = await request.read()
        messages, _ = jsonrpc.parse(body)
        if len(messages) == 1 and messages[0].error is not None and messages[0].error["error"]["code"] == PARSE_ERROR:
            return web.Response(status=400, body=jsonrpc.dumps(messages[0].error), content_type="application/json")
        reached = await self.store.route(owner, {
            "t": ROUTED_KIND, "sid": session_id, "body": body.decode("utf-8", "replace"),
            "auth": request.headers.get("Authorization"), "tp": request.headers.get("traceparent")})
        if not reached:
            return rpc_error(404, INVALID_REQUEST, "Not Found: the replica holding this session's stream is gone; "
                             "open a new /sse stream")
        return web.Response(status=202, text="Accepted")

    def deliver(self, message: dict[str, Any]) -> None:
        """A POST another replica routed here (checked there: record, principal, JSON)."""
        entry = self.streams.get(str(message.get("sid")))
        body = message.get("body")
        if entry is None or not isinstance(body, str):
            log.info("routed POST for sse session %s, whose stream is not open here: dropped", message.get("sid"))
            return
        messages, was_batch = jsonrpc.parse(body.encode())
        refused = batch_refused(entry.session, was_batch)
        if refused is not None:
            self._spawn(self._send(entry, [refused], False))
            return
        auth, traceparent = message.get("auth"), message.get("tp")
        self._spawn(self._process(entry, messages, was_batch, traceparent if isinstance(traceparent, str) else None,
                                  auth if isinstance(auth, str) else None))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def post(self, request: web.Request, principal: Principal) -> web.StreamResponse:
        session_id = request.query.get("session_id")
        if not session_id:
            return rpc_error(400, INVALID_REQUEST, "Bad Request: session_id query parameter is required")
        entry = self.streams.get(session_id)
        if entry is None and self.store is not None:
            return await self._post_elsewhere(request, principal, session_id)
        if entry is None:
            return rpc_error(404, INVALID_REQUEST, "Not Found: unknown or expired session")
        if entry.session.principal != principal:
            return rpc_error(403, INVALID_REQUEST, "Forbidden: the session belongs to another principal")
        messages, was_batch = jsonrpc.parse(await request.read())
        if len(messages) == 1 and messages[0].error is not None and messages[0].error["error"]["code"] == PARSE_ERROR:
            return web.Response(status=400, body=jsonrpc.dumps(messages[0].error), content_type="application/json")
        refused = batch_refused(entry.session, was_batch)
        if refused is not None:
            return web.Response(status=400, body=jsonrpc.dumps(refused), content_type="application/json")
        # Each POST's own credentials, never the session's: concurrent POSTs may carry different ones.
        self._spawn(self._process(entry, messages, was_batch, request.headers.get("traceparent"),
                                  request.headers.get("Authorization")))
        return web.Response(status=202, text="Accepted")

    async def _process(self, entry: _SSESession, messages: list[jsonrpc.Incoming], was_batch: bool,
                       traceparent: str | None, authorization: str | None) -> None:
        await self._send(entry, await process_frame(entry.session, messages, traceparent, authorization), was_batch)

    async def _send(self, entry: _SSESession, replies: list[dict[str, Any]], was_batch: bool) -> None:
        if not replies:
            return
        try:
            if was_batch:
                await entry.writer.send(replies)
            else:
                for reply in replies:
                    await entry.writer.send(reply)
        except ConnectionResetError:
            log.debug("session %s went away before its reply", entry.session.id)

    async def close_all(self) -> None:
        for entry in list(self.streams.values()):
            await entry.writer.close()
