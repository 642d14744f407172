"""Streamable HTTP transport (MCP 2025-03-26 and later) on ``/mcp``: POST, GET and DELETE.

* POST carries client messages. A frame without requests gets ``202 Accepted``. A request is
  answered with ``application/json`` when nothing else is sent for it before its response, and
  switches to a ``text/event-stream`` as soon as a related message (progress, a log line, a
  sampling request) must go out first, so the common case costs no SSE framing. A request still
  running after ``gateway.http.keepalive_s`` switches too, and its stream carries comment lines
  at that interval: a long tool call is not cut by a proxy's idle timeout (nginx and cloud load
  balancers default to 60 s).
* ``initialize`` without ``Mcp-Session-Id`` creates a session and returns its id in that header;
  every later request must carry it (400 without it, 404 for an unknown or ended one).
* GET opens the session's stream for unrelated server messages (list_changed, resource updates);
  DELETE ends the session.
* ``MCP-Protocol-Version`` must name a supported revision when present.

Every HTTP-level refusal carries a JSON-RPC error body, so clients always get valid JSON-RPC.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from aiohttp import web

from gateway.protocol import jsonrpc
from gateway.protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR
from gateway.protocol.versions import is_supported
from gateway.session import Session

from .common import batch_refused, process_frame
from .sse_writer import SSEWriter, open_sse

__all__ = ["StreamableHTTP", "SESSION_HEADER", "VERSION_HEADER"]

log = logging.getLogger("gateway.http")

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"


def rpc_error(status: int, code: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=jsonrpc.dumps(jsonrpc.error_response(None, code, message)),
                        content_type="application/json", headers=headers)


class _PostStream:
    """The reply channel of one POSTed request: JSON unless something must be streamed first."""

    __slots__ = ("request", "sse", "can_stream", "_opening", "_keeper")

    def __init__(self, request: web.Request, can_stream: bool) -> None:
        self.request = request
        self.sse: SSEWriter | None = None
        self.can_stream = can_stream
        self._opening: asyncio.Future[SSEWriter] | None = None
        self._keeper: asyncio.Task[None] | None = None

    async def _stream(self) -> SSEWriter:
        """The SSE stream, opened once whoever asks first (a related message or the keepalive);
        the opening is shielded, so a cancelled asker never leaves the response half-started."""
        if self.sse is None:
            if self._opening is None:
                self._opening = asyncio.ensure_future(open_sse(self.request))
            self.sse = await asyncio.shield(self._opening)
        return self.sse

    async def send(self, message: dict[str, Any]) -> None:
        await (await self._stream()).send(message)

    def keep_alive(self, every_s: float) -> None:
        """The request is taking long: stream from now on, with a comment line every ``every_s``."""
        self._keeper = asyncio.ensure_future(self._keepalive(every_s))

    async def _keepalive(self, every_s: float) -> None:
        with contextlib.suppress(ConnectionResetError):
            sse = await self._stream()
            while True:
                await sse.send_raw(b": keepalive\n\n")
                await asyncio.sleep(every_s)

    async def settle(self) -> None:
        """Stop the keepalives; wait for a stream that is being opened, so the reply goes there."""
        if self._keeper is not None:
            self._keeper.cancel()
        if self._opening is not None:
            with contextlib.suppress(Exception):
                self.sse = await self._opening


class _Channel:
    """Where a session's outgoing messages go: the related POST's stream, else the GET stream."""

    __slots__ = ("session", "get_stream", "posts", "json_only")

    def __init__(self, json_only: bool) -> None:
        self.session: Session | None = None
        self.get_stream: SSEWriter | None = None
        self.posts: dict[str | int, _PostStream] = {}
        self.json_only = json_only

    async def send(self, message: dict[str, Any], related_request_id: str | int | None) -> None:
        post = self.posts.get(related_request_id) if related_request_id is not None else None
        if post is not None and post.can_stream:
            await post.send(message)
        elif self.get_stream is not None:
            await self.get_stream.send(message)
        else:
            log.debug("no stream open for %s; dropped", message.get("method", "response"))


class StreamableHTTP:
    """The /mcp endpoint for one gateway."""

    def __init__(self, gateway: Any) -> None:
        self.gateway = gateway
        self.channels: dict[str, _Channel] = {}

    # -- POST ---------------------------------------------------------------------------------
    async def post(self, request: web.Request, principal: Any) -> web.StreamResponse:
        version = request.headers.get(VERSION_HEADER)
        if version is not None and not is_supported(version):
            return rpc_error(400, INVALID_REQUEST, f"Bad Request: unsupported {VERSION_HEADER}: {version}")
        accept = request.headers.get("Accept", "")
        if accept and "application/json" not in accept and "text/event-stream" not in accept and "*/*" not in accept:
            return rpc_error(406, INVALID_REQUEST, "Not Acceptable: accept application/json and text/event-stream")
        body = await request.read()
        messages, was_batch = jsonrpc.parse(body)
        session_id = request.headers.get(SESSION_HEADER)
        channel: _Channel | None = None
        if session_id is None:
            # initialize must be sent alone: a batched one would get a non-batch reply.
            if was_batch or not (len(messages) == 1 and messages[0].kind == "request"
                                 and messages[0].method == "initialize"):
                if len(messages) == 1 and messages[0].error is not None and messages[0].error["error"]["code"] == PARSE_ERROR:
                    return web.Response(status=400, body=jsonrpc.dumps(messages[0].error), content_type="application/json")
                return rpc_error(400, INVALID_REQUEST, f"Bad Request: missing {SESSION_HEADER} header "
                                 "(send initialize first)")
            if self.gateway.draining:
                return rpc_error(503, INTERNAL_ERROR, "Service Unavailable: the gateway is shutting down")
            return await self._initialize(request, messages[0].message, principal)
        channel = self.channels.get(session_id)
        if channel is None or channel.session is None:
            return rpc_error(404, INVALID_REQUEST, "Not Found: unknown or expired session")
        session = channel.session
        if session.principal != principal:
            return rpc_error(403, INVALID_REQUEST, "Forbidden: the session belongs to another principal")
        # The trace context travels with each request (concurrent POSTs must not swap parents).
        traceparent = request.headers.get("traceparent")
        session.caller_authorization = request.headers.get("Authorization")
        refused = batch_refused(session, was_batch)
        if refused is not None:
            return web.Response(status=400, body=jsonrpc.dumps(refused), content_type="application/json")
        requests = [m for m in messages if m.kind == "request"]
        if not requests:
            replies = await process_frame(session, messages, traceparent)
            if replies:  # only invalid messages: answer them
                payload = replies if was_batch else replies[0]
                return web.Response(status=400, body=jsonrpc.dumps(payload), content_type="application/json")
            return web.Response(status=202)
        if was_batch or len(messages) > 1:
            replies = await process_frame(session, messages, traceparent)
            return web.Response(body=jsonrpc.dumps(replies), content_type="application/json")
        return await self._serve_request(request, channel, session, messages[0].message, traceparent)

    async def _serve_request(self, request: web.Request, channel: _Channel, session: Session,
                             message: dict[str, Any], traceparent: str | None) -> web.StreamResponse:
        rid = message["id"]
        can_stream = not channel.json_only and "text/event-stream" in request.headers.get("Accept", "")
        post = _PostStream(request, can_stream)
        channel.posts[rid] = post
        # A timer, not a task: most requests end long before it fires, and cost no task this way.
        keepalive_s = self.gateway.config.gateway.http.keepalive_s
        timer = asyncio.get_running_loop().call_later(keepalive_s, post.keep_alive, keepalive_s) if can_stream else None
        try:
            reply = await session.handle_request(message, traceparent)
        finally:
            channel.posts.pop(rid, None)
            if timer is not None:
                timer.cancel()
            await post.settle()
        if post.sse is None:
            if reply is None:  # cancelled by the client: no response, as the spec asks
                return web.Response(status=202)
            return web.Response(body=jsonrpc.dumps(reply), content_type="application/json")
        if reply is not None:
            await post.sse.send(reply)
        await post.sse.close()
        return post.sse.response

    async def _initialize(self, request: web.Request, message: dict[str, Any], principal: Any) -> web.StreamResponse:
        channel = _Channel(self.gateway.config.gateway.http.json_response)
        session = Session(self.gateway, "streamable_http", channel.send, principal)
        channel.session = session
        session.caller_authorization = request.headers.get("Authorization")
        reply = await session.handle_request(message, request.headers.get("traceparent"))
        headers = {}
        if reply is not None and "result" in reply:
            self.channels[session.id] = channel
            self.gateway.add_session(session)
            headers[SESSION_HEADER] = session.id
        return web.Response(body=jsonrpc.dumps(reply), content_type="application/json", headers=headers)

    # -- GET ----------------------------------------------------------------------------------
    async def get(self, request: web.Request, principal: Any) -> web.StreamResponse:
        if "text/event-stream" not in request.headers.get("Accept", ""):
            return rpc_error(406, INVALID_REQUEST, "Not Acceptable: GET needs Accept: text/event-stream")
        channel = self.channels.get(request.headers.get(SESSION_HEADER, ""))
        if channel is None or channel.session is None:
            if SESSION_HEADER not in request.headers:
                return rpc_error(400, INVALID_REQUEST, f"Bad Request: missing {SESSION_HEADER} header")
            return rpc_error(404, INVALID_REQUEST, "Not Found: unknown or expired session")
        if channel.session.principal != principal:
            return rpc_error(403, INVALID_REQUEST, "Forbidden: the session belongs to another principal")
        if channel.get_stream is not None and not channel.get_stream.closed:
            return rpc_error(409, INVALID_REQUEST, "Conflict: this session already has a GET stream")
        sse = await open_sse(request)
        channel.get_stream = sse
        try:
            await sse.wait_closed(keepalive_s=self.gateway.config.gateway.http.keepalive_s)
        finally:
            if channel.get_stream is sse:
                channel.get_stream = None
        return sse.response

    # -- DELETE -------------------------------------------------------------------------------
    async def delete(self, request: web.Request, principal: Any) -> web.StreamResponse:
        session_id = request.headers.get(SESSION_HEADER)
        if session_id is None:
            return rpc_error(400, INVALID_REQUEST, f"Bad Request: missing {SESSION_HEADER} header")
        channel = self.channels.get(session_id)
        if channel is None or channel.session is None:
            return rpc_error(404, INVALID_REQUEST, "Not Found: unknown or expired session")
        if channel.session.principal != principal:
            return rpc_error(403, INVALID_REQUEST, "Forbidden: the session belongs to another principal")
        await self.close_session(session_id)
        return web.Response(status=204)

    async def close_session(self, session_id: str) -> None:
        channel = self.channels.pop(session_id, None)
        if channel is None:
            return
        if channel.get_stream is not None:
            await channel.get_stream.close()
        if channel.session is not None:
            await channel.session.close()

    async def close_all(self) -> None:
        await asyncio.gather(*(self.close_session(sid) for sid in list(self.channels)), return_exceptions=True)

    def expire_idle(self, now: float, idle_s: float) -> None:
        """Close sessions idle for longer than ``idle_s`` with no GET stream open."""
        for sid, channel in list(self.channels.items()):
            session = channel.session
            if session is not None and channel.get_stream is None and not session.inflight() \
                    and now - session.last_active > idle_s:
                self.gateway.spawn(self.close_session(sid))
