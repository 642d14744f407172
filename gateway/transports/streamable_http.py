"""Streamable HTTP transport (MCP 2025-03-26 and later) on ``/mcp``: POST, GET and DELETE.

* POST carries client messages. A frame without requests gets ``202 Accepted``. A request is
  answered with ``application/json`` when nothing else is sent for it before its response, and
  switches to a ``text/event-stream`` as soon as a related message (progress, a log line, a
  sampling request) must go out first, so the common case costs no SSE framing. A request still
  running after ``gateway.http.keepalive_s`` switches too, and its stream carries comment lines
  at that interval: a long tool call is not cut by a proxy's idle timeout (nginx and cloud load
  balancers default to 60 s). Its events carry ids, so a client whose connection broke resumes it
  with GET + ``Last-Event-ID`` (``post_stream.py``).
* ``initialize`` without ``Mcp-Session-Id`` creates a session and returns its id in that header;
  every later request must carry it (400 without it, 404 for an unknown or ended one). Past the
  session cap (:mod:`.quota`) it is answered 503 or 429 with an error naming the limit.
* GET opens the session's stream for unrelated server messages (list_changed, resource updates),
  or with ``Last-Event-ID`` resumes a request's stream; DELETE ends the session.
* ``MCP-Protocol-Version`` must name a supported revision when present.
* Revision 2026-07-28 is served on the same endpoint, statelessly: a POST whose
  ``MCP-Protocol-Version`` header or body ``_meta`` names it goes to :mod:`.modern_http`
  (no session is created or required; an ``Mcp-Session-Id`` it carries is ignored).

Every HTTP-level refusal carries a JSON-RPC error body, so clients always get valid JSON-RPC.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from aiohttp import web

from gateway.config import HttpConfig
from gateway.context import Principal
from gateway.protocol import jsonrpc
from gateway.protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR, UnsupportedProtocolVersion
from gateway.protocol.meta import PROTOCOL_VERSION
from gateway.protocol.versions import is_modern, is_supported
from gateway.session import Session

from .common import batch_refused, process_frame
from .host import SessionFactory
from .modern_http import ModernHTTP
from .post_stream import PostStream, parse_event_id
from .quota import QuotaRefusal, SessionQuota
from .replicas import RECORD_METHODS, SharedSessions
from .sse_writer import SSEWriter, open_sse

__all__ = ["StreamableHTTP", "SESSION_HEADER", "VERSION_HEADER"]

log = logging.getLogger("gateway.http")

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"


def rpc_error(status: int, code: int, message: str, headers: dict[str, str] | None = None,
              request_id: str | int | None = None) -> web.Response:
    return web.Response(status=status, body=jsonrpc.dumps(jsonrpc.error_response(request_id, code, message)),
                        content_type="application/json", headers=headers)


def quota_refused(refusal: QuotaRefusal, request_id: str | int | None = None) -> web.Response:
    """The answer to a session the cap refuses (the limit named; ``Retry-After`` on 503)."""
    headers = {"Retry-After": "1"} if refusal.status == 503 else None
    return rpc_error(refusal.status, refusal.code, refusal.message, headers, request_id)


def _names_modern(messages: list[jsonrpc.Incoming]) -> bool:
    """Whether a POST without a modern version header still speaks 2026-07-28 in its body (it is
    then refused for the missing header, rather than mistaken for a legacy request)."""
    if len(messages) != 1 or messages[0].kind != "request":
        return False
    params = messages[0].message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION in meta


class _Channel:
    """Where a session's outgoing messages go: the related POST's stream, else the GET stream."""

    __slots__ = ("session", "get_stream", "posts", "streams", "json_only", "shared", "adopted", "_stream_ids")

    def __init__(self, json_only: bool, shared: SharedSessions | None = None) -> None:
        self.session: Session | None = None
        self.shared = shared  # with replicas: where a message goes when this one has no stream for it
        self.adopted = False  # started by another replica (which holds its place under the session cap)
        self.get_stream: SSEWriter | None = None
        self.posts: dict[str | int, PostStream] = {}  # by request id, while the request runs
        self.streams: dict[str, PostStream] = {}  # by stream id, while it can be resumed
        self.json_only = json_only
        self._stream_ids = itertools.count(1)

    def new_stream_id(self) -> str:
        # With replicas, a stream id names its replica, so a resumption elsewhere knows whose it is.
        n = next(self._stream_ids)
        return f"{self.shared.replica}.{n}" if self.shared is not None else str(n)

    def forget(self, post: PostStream) -> None:
        self.streams.pop(post.id, None)

    async def send(self, message: dict[str, Any], related_request_id: str | int | None) -> None:
        post = self.posts.get(related_request_id) if related_request_id is not None else None
        if post is not None and post.can_stream:
            await post.send(message)
        elif self.get_stream is not None:
            await self.get_stream.send(message)
        elif self.shared is not None and self.session is not None:
            await self.shared.notify_elsewhere(self.session.id, message)
        else:
            log.debug("no stream open for %s; dropped", message.get("method", "response"))


class StreamableHTTP:
    """The /mcp endpoint: sessions from ``sessions``, framing options from ``http``."""

    def __init__(self, sessions: SessionFactory, http: HttpConfig, modern: ModernHTTP | None = None,
                 quota: SessionQuota | None = None, shared: SharedSessions | None = None) -> None:
        self.sessions = sessions
        self.http = http
        self.modern = modern
        self.quota = quota
        self.channels: dict[str, _Channel] = {}
        self._closing: set[asyncio.Task[Any]] = set()
        # Replicas sharing sessions (state.store); None with one process.
        self.shared = shared
        self._adopting: dict[str, asyncio.Future[_Channel | None]] = {}

    # -- POST ---------------------------------------------------------------------------------
    async def post(self, request: web.Request, principal: Principal) -> web.StreamResponse:
        version = request.headers.get(VERSION_HEADER)
        accept = request.headers.get("Accept", "")
        if accept and "application/json" not in accept and "text/event-stream" not in accept and "*/*" not in accept:
            return rpc_error(406, INVALID_REQUEST, "Not Acceptable: accept application/json and text/event-stream")
        body = await request.read()
        messages, was_batch = jsonrpc.parse(body)
        if self.modern is not None and (is_modern(version or "") or _names_modern(messages)):
            if not self.sessions.accepting:
                return rpc_error(503, INTERNAL_ERROR, "Service Unavailable: the gateway is shutting down")
            return await self.modern.post(request, principal, messages, was_batch)
        if version is not None and not is_supported(version):
            rid = messages[0].message.get("id") if len(messages) == 1 and messages[0].kind == "request" else None
            error = jsonrpc.error_from_exception(rid, UnsupportedProtocolVersion(version))
            return web.Response(status=400, body=jsonrpc.dumps(error), content_type="application/json")
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
            if not self.sessions.accepting:
                return rpc_error(503, INTERNAL_ERROR, "Service Unavailable: the gateway is shutting down")
            return await self._initialize(request, messages[0].message, principal)
        channel = self.channels.get(session_id)
        if channel is None and self.shared is not None:
            adopted = await self._adopt(session_id, principal)
            if isinstance(adopted, web.Response):
                return adopted
            channel = adopted
        if channel is None or channel.session is None:
            return rpc_error(404, INVALID_REQUEST, "Not Found: unknown or expired session")
        session = channel.session
        if session.principal != principal:
            return rpc_error(403, INVALID_REQUEST, "Forbidden: the session belongs to another principal")
        if self.shared is not None:
            await self.shared.touch(session)
            messages = await self.shared.route_frame(session, messages)
        # The trace context and the caller's credentials travel with each request, never on the
        # session: concurrent POSTs of one session must not swap parents or forward each other's token.
        traceparent = request.headers.get("traceparent")
        authorization = request.headers.get("Authorization")
        refused = batch_refused(session, was_batch)
        if refused is not None:
            return web.Response(status=400, body=jsonrpc.dumps(refused), content_type="application/json")
        requests = [m for m in messages if m.kind == "request"]
        if not requests:
            replies = await process_frame(session, messages, traceparent, authorization)
            if replies:  # only invalid messages: answer them
                payload = replies if was_batch else replies[0]
                return web.Response(status=400, body=jsonrpc.dumps(payload), content_type="application/json")
            return web.Response(status=202)
        if was_batch or len(messages) > 1:
            replies = await process_frame(session, messages, traceparent, authorization)
            return web.Response(body=jsonrpc.dumps(replies), content_type="application/json")
        return await self._serve_request(request, channel, session, messages[0].message, traceparent, authorization)

    async def _serve_request(self, request: web.Request, channel: _Channel, session: Session,
                             message: dict[str, Any], traceparent: str | None,
                             authorization: str | None) -> web.StreamResponse:
        rid = message["id"]
        can_stream = not channel.json_only and "text/event-stream" in request.headers.get("Accept", "")
        stream_id = channel.new_stream_id()
        journal = self.shared.journal(session.id, stream_id, rid) if self.shared is not None and can_stream else None
        post = PostStream(request, stream_id, can_stream, session.protocol_version, channel.forget, journal=journal)
        channel.posts[rid] = post
        channel.streams[post.id] = post
        # A timer, not a task: most requests end long before it fires, and cost no task this way.
        keepalive_s = self.http.keepalive_s
        timer = asyncio.get_running_loop().call_later(keepalive_s, post.keep_alive, keepalive_s) if can_stream else None
        try:
            reply = await session.handle_request(message, traceparent, authorization)
            if self.shared is not None and message["method"] in RECORD_METHODS and reply is not None \
                    and "result" in reply:
                await self.shared.changed(session)
        finally:
            channel.posts.pop(rid, None)
            if timer is not None:
                timer.cancel()
            post.stop_keepalive()
        return await post.finish(reply)

    async def _initialize(self, request: web.Request, message: dict[str, Any], principal: Principal) -> web.StreamResponse:
        quota = self.quota
        channel = _Channel(self.http.json_response, self.shared)
        session = self.sessions.open_session("streamable_http", channel.send, principal)
        if quota is not None:
            refused = await quota.acquire(principal, session.id)
            if refused is not None:
                return quota_refused(refused, message.get("id"))
        headers = {}
        try:
            channel.session = session
            reply = await session.handle_request(message, request.headers.get("traceparent"),
                                                 request.headers.get("Authorization"))
            if reply is not None and "result" in reply:
                if self.shared is not None:  # every replica can serve it from now on
                    await self.shared.save(session)
                self.channels[session.id] = channel
                self.sessions.add_session(session)
                headers[SESSION_HEADER] = session.id
        finally:
            if quota is not None and not headers:  # not established: its place is free again
                quota.release(principal)
                await quota.end(principal, session.id)
        return web.Response(body=jsonrpc.dumps(reply), content_type="application/json", headers=headers)

    # -- replicas -------------------------------------------------------------------------------
    async def _adopt(self, session_id: str, principal: Principal) -> _Channel | web.Response | None:
        """This replica's copy of a session another one started (None: no such session). Concurrent
        requests of one session share one load."""
        pending = self._adopting.get(session_id)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._adopting[session_id] = pending
            try:
                pending.set_result(await self._load(session_id))
            except Exception as exc:  # the store is unreachable: this request fails, others go on
                log.warning("session %s: the state store failed: %r", session_id, exc)
                pending.set_result(None)
                return rpc_error(503, INTERNAL_ERROR, "Service Unavailable: the session store cannot be reached",
                                 {"Retry-After": "1"})
            finally:
                self._adopting.pop(session_id, None)
        channel = await asyncio.shield(pending)
        return self.channels.get(session_id, channel) if channel is not None else None

    async def _load(self, session_id: str) -> _Channel | None:
        assert self.shared is not None
        loaded = await self.shared.load(session_id)
        if loaded is None:
            return None
        existing = self.channels.get(session_id)
        if existing is not None:
            return existing
        record, owner = loaded
        channel = _Channel(self.http.json_response, self.shared)
        channel.adopted = True
        channel.session = self.sessions.adopt_session("streamable_http", channel.send, session_id, record, owner)
        self.channels[session_id] = channel
        return channel

    def deliver(self, message: dict[str, Any]) -> None:
        """A message another replica routed here (:mod:`.replicas`)."""
        channel = self.channels.get(str(message.get("sid")))
        session = channel.session if channel is not None else None
        if channel is None or session is None:
            return
        kind, msg = message.get("t"), message.get("msg")
        if kind == "response" and isinstance(msg, dict):
            session.handle_response(msg)
        elif kind == "cancel" and isinstance(msg, dict):
            self._spawn(session.handle_notification(msg))
        elif kind == "notify" and isinstance(msg, dict) and channel.get_stream is not None:
            self._spawn(channel.get_stream.send(msg))
        elif kind == "refresh" and isinstance(message.get("log_level"), str):
            session.log_level = message["log_level"]
        elif kind == "closed":
            self._spawn(self.close_session(session.id))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    # -- GET ----------------------------------------------------------------------------------
    async def get(self, request: web.Request, principal: Principal) -> web.StreamResponse:
        if "text/event-stream" not in request.headers.get("Accept", ""):
            return rpc_error(406, INVALID_REQUEST, "Not Acceptable: GET needs Accept: text/event-stream")
        channel = self.channels.get(request.headers.get(SESSION_HEADER, ""))
        if channel is None and self.shared is not None and SESSION_HEADER in request.headers:
            adopted = await self._adopt(request.headers[SESSION_HEADER], principal)
            if isinstance(adopted, web.Response):
                return adopted
            channel = adopted
        if channel is None or channel.session is None:
            if SESSION_HEADER not in request.headers:
                return rpc_error(400, INVALID_REQUEST, f"Bad Request: missing {SESSION_HEADER} header")
            return rpc_error(404, INVALID_REQUEST, "Not Found: unknown or expired session")
        if channel.session.principal != principal:
            return rpc_error(403, INVALID_REQUEST, "Forbidden: the session belongs to another principal")
        keepalive_s = self.http.keepalive_s
        last_event_id = request.headers.get("Last-Event-ID")
        if last_event_id is not None:  # resuming a request's stream (only those carry event ids)
            parsed = parse_event_id(last_event_id)
            post = channel.streams.get(parsed[0]) if parsed is not None else None
            if parsed is not None and post is None and self.shared is not None \
                    and not parsed[0].startswith(self.shared.replica + "."):
                return await self._resume_elsewhere(request, channel.session, parsed[0], parsed[1], keepalive_s)
            if parsed is None or post is None:
                return rpc_error(400, INVALID_REQUEST, f"Bad Request: nothing to resume after Last-Event-ID "
                                 f"{last_event_id!r} (unknown, or its request has ended)")
            return await post.resume(request, parsed[1], keepalive_s)
        if channel.get_stream is not None and not channel.get_stream.closed:
            return rpc_error(409, INVALID_REQUEST, "Conflict: this session already has a GET stream")
        sse = await open_sse(request)
        channel.get_stream = sse
        try:
            await sse.wait_closed(keepalive_s=keepalive_s)
        finally:
            if channel.get_stream is sse:
                channel.get_stream = None
        return sse.response

    async def _resume_elsewhere(self, request: web.Request, session: Session, stream: str, after: int,
                                keepalive_s: float) -> web.StreamResponse:
        """Resume a stream another replica started, from the shared event log (:mod:`.replicas`)."""
        assert self.shared is not None
        try:
            rid = await self.shared.request_of(session.id, stream)
        except Exception as exc:
            log.warning("session %s: the state store failed: %r", session.id, exc)
            return rpc_error(503, INTERNAL_ERROR, "Service Unavailable: the session store cannot be reached",
                             {"Retry-After": "1"})
        if rid is False:
            return rpc_error(400, INVALID_REQUEST, f"Bad Request: nothing to resume after Last-Event-ID "
                             f"{stream}:{after} (unknown, or its request has ended)")
        sse = await open_sse(request)
        try:
            await self.shared.follow(session.id, stream, after, rid if not isinstance(rid, bool) else None,
                                     sse.send_raw, keepalive_s)
        except ConnectionResetError:
            return sse.response
        except Exception as exc:  # the store failed mid-way: end the stream, the client may resume again
            log.warning("session %s: resuming stream %s failed: %r", session.id, stream, exc)
        await sse.close()
        return sse.response

    # -- DELETE -------------------------------------------------------------------------------
    async def delete(self, request: web.Request, principal: Principal) -> web.StreamResponse:
        session_id = request.headers.get(SESSION_HEADER)
        if session_id is None:
            return rpc_error(400, INVALID_REQUEST, f"Bad Request: missing {SESSION_HEADER} header")
        channel = self.channels.get(session_id)
        if channel is None and self.shared is not None:
            adopted = await self._adopt(session_id, principal)
            if isinstance(adopted, web.Response):
                return adopted
            channel = adopted
        if channel is None or channel.session is None:
            return rpc_error(404, INVALID_REQUEST, "Not Found: unknown or expired session")
        if channel.session.principal != principal:
            return rpc_error(403, INVALID_REQUEST, "Forbidden: the session belongs to another principal")
        if self.shared is not None:
            await self.shared.ended(channel.session)
        await self.close_session(session_id)
        return web.Response(status=204)

    async def close_session(self, session_id: str) -> None:
        """Close this replica's copy of a session (the shared record stays: see :meth:`delete`)."""
        channel = self.channels.pop(session_id, None)
        if channel is None:
            return
        if self.shared is not None:
            self.shared.forget(session_id)
        if self.quota is not None and channel.session is not None and not channel.adopted:
            self.quota.release(channel.session.principal)
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
                task = asyncio.get_running_loop().create_task(self.close_session(sid))
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
