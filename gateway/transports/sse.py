"""Legacy HTTP+SSE transport (MCP 2024-11-05): ``GET /sse`` and ``POST /messages?session_id=``.

The GET stream opens a session (under the session cap of :mod:`.quota`, which it holds a place of
while open) and first sends the ``endpoint`` event naming where to POST. Every
server message, responses included, travels on that stream; a POST is acknowledged with
``202 Accepted`` at once and its requests run in the background. A POST that cannot be parsed is
refused with ``400`` and a JSON-RPC error body.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web

from gateway.config import HttpConfig
from gateway.context import Principal
from gateway.protocol import jsonrpc
from gateway.protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR
from gateway.session import Session

from .common import batch_refused, process_frame
from .host import SessionFactory
from .quota import SessionQuota
from .sse_writer import SSEWriter, open_sse
from .streamable_http import quota_refused, rpc_error

__all__ = ["LegacySSE"]

log = logging.getLogger("gateway.sse")


class _SSESession:
    __slots__ = ("session", "writer")

    def __init__(self, session: Session, writer: SSEWriter) -> None:
        self.session = session
        self.writer = writer


class LegacySSE:
    """The /sse and /messages endpoints: sessions from ``sessions``, keepalives from ``http``."""

    def __init__(self, sessions: SessionFactory, http: HttpConfig, messages_path: str = "/messages",
                 quota: SessionQuota | None = None) -> None:
        self.sessions = sessions
        self.http = http
        self.messages_path = messages_path
        self.quota = quota
        self.streams: dict[str, _SSESession] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def get(self, request: web.Request, principal: Principal) -> web.StreamResponse:
        if not self.sessions.accepting:
            return rpc_error(503, INTERNAL_ERROR, "Service Unavailable: the gateway is shutting down")
        quota = self.quota
        if quota is not None:
            refused = quota.acquire(principal)
            if refused is not None:
                return quota_refused(refused)
        try:
            return await self._serve(request, principal)
        finally:
            if quota is not None:
                quota.release(principal)

    async def _serve(self, request: web.Request, principal: Principal) -> web.StreamResponse:
        writer: SSEWriter | None = None

        async def send(message: dict[str, Any], related_request_id: object = None) -> None:
            assert writer is not None
            await writer.send(message)

        session = self.sessions.open_session("sse", send, principal)
        writer = await open_sse(request)
        self.streams[session.id] = _SSESession(session, writer)
        self.sessions.add_session(session)
        try:
            await writer.send_raw(f"event: endpoint\ndata: {self.messages_path}?session_id={session.id}\n\n".encode())
            await writer.wait_closed(keepalive_s=self.http.keepalive_s)
        except ConnectionResetError:
            pass
        finally:
            self.streams.pop(session.id, None)
            await session.close()
        return writer.response

    async def post(self, request: web.Request, principal: Principal) -> web.StreamResponse:
        session_id = request.query.get("session_id")
        if not session_id:
            return rpc_error(400, INVALID_REQUEST, "Bad Request: session_id query parameter is required")
        entry = self.streams.get(session_id)
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
        entry.session.caller_authorization = request.headers.get("Authorization")
        task = asyncio.create_task(self._process(entry, messages, was_batch, request.headers.get("traceparent")))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return web.Response(status=202, text="Accepted")

    async def _process(self, entry: _SSESession, messages: list[jsonrpc.Incoming], was_batch: bool,
                       traceparent: str | None) -> None:
        replies = await process_frame(entry.session, messages, traceparent)
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
