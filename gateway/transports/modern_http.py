"""Streamable HTTP for revision 2026-07-28: one POST is one request, no session.

:class:`StreamableHTTP` hands a POST here when its ``MCP-Protocol-Version`` header or its body's
``_meta`` names a modern revision. The POST must carry exactly one JSON-RPC request (a
notification is accepted with 202 and has no effect: this revision defines none over HTTP), and
its request-metadata headers must match the body (``MCP-Protocol-Version``, ``Mcp-Method``,
``Mcp-Name``, ``Mcp-Param-*`` of the tool's ``x-mcp-header`` parameters), else ``400`` with a
``HeaderMismatch`` (-32020). An unsupported version is ``400`` with
``UnsupportedProtocolVersion`` (-32022) listing the versions served; an unknown method ``404``
with -32601, so a dual-era client can tell a modern server from a legacy one.

The answer is one JSON body, or an SSE stream without event ids (no resumption in this revision)
as soon as something must go out before the response or the call outlasts the keepalive
interval. A client that closes the stream cancels the request.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any, Protocol

from aiohttp import web

from gateway.config import HttpConfig
from gateway.context import Principal
from gateway.protocol import jsonrpc
from gateway.protocol.errors import (
    HEADER_MISMATCH,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    HeaderMismatch,
    InvalidParams,
    UnsupportedProtocolVersion,
)
from gateway.protocol.headers import validate_request_headers
from gateway.protocol.meta import PROTOCOL_VERSION, require_request_meta
from gateway.stateless import StatelessHost, StatelessSession

from .post_stream import PostStream

__all__ = ["ModernHTTP", "ModernHost"]

log = logging.getLogger("gateway.http")

_DISCONNECT_POLL_S = 0.5
# Errors this revision answers with an HTTP status of their own (when nothing was streamed yet).
_STATUS = {HEADER_MISMATCH: 400, MISSING_CLIENT_CAPABILITY: 400, UNSUPPORTED_PROTOCOL_VERSION: 400,
           METHOD_NOT_FOUND: 404}


def _body_version(params: dict[str, Any]) -> str | None:
    meta = params.get("_meta")
    version = meta.get(PROTOCOL_VERSION) if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


class ModernHost(StatelessHost, Protocol):
    """What the modern endpoint needs beyond a request's own needs."""

    def knows(self, method: str) -> bool:
        """Whether a 2026-07-28 request for ``method`` can be served here."""

    def tool_input_schema(self, name: str) -> dict[str, Any] | None:
        """The public tool's ``inputSchema`` (for ``Mcp-Param-*`` validation), or None."""


def _json(status: int, body: dict[str, Any]) -> web.Response:
    return web.Response(status=status, body=jsonrpc.dumps(body), content_type="application/json")


class ModernHTTP:
    """The 2026-07-28 side of ``/mcp``."""

    def __init__(self, host: ModernHost, http: HttpConfig) -> None:
        self.host = host
        self.http = http
        self._stream_ids = itertools.count(1)

    async def post(self, request: web.Request, principal: Principal, messages: list[jsonrpc.Incoming],
                   was_batch: bool) -> web.StreamResponse:
        if was_batch or len(messages) != 1:
            return _json(400, jsonrpc.error_response(None, INVALID_REQUEST,
                                                     "Bad Request: a 2026-07-28 POST carries exactly one JSON-RPC message"))
        incoming = messages[0]
        if incoming.error is not None:
            return _json(400, incoming.error)
        if incoming.kind == "notification":
            return web.Response(status=202)
        if incoming.kind != "request":
            return _json(400, jsonrpc.error_response(None, INVALID_REQUEST,
                                                     "Bad Request: clients send no responses in 2026-07-28"))
        message = incoming.message
        rid = message["id"]
        method = message["method"]
        params = message.get("params") or {}
        if not isinstance(params, dict):
            return _json(400, jsonrpc.error_response(rid, InvalidParams.code, "params must be an object"))
        try:
            # In this order (the conformance suite checks each): the body's _meta is complete
            # (-32602), its version matches the header (-32020), the version is served (-32022),
            # then the other request-metadata headers (-32020).
            body_version = _body_version(params)
            header_version = request.headers.get("MCP-Protocol-Version")
            if header_version is not None and body_version is not None and header_version != body_version:
                raise HeaderMismatch(f"MCP-Protocol-Version header {header_version!r} does not match the body's "
                                     f"_meta version {body_version!r}")
            meta = require_request_meta(params)
            schema = self.host.tool_input_schema(params["name"]) if method == "tools/call" \
                and isinstance(params.get("name"), str) else None
            validate_request_headers(request.headers, message, schema)
        except (HeaderMismatch, UnsupportedProtocolVersion, InvalidParams) as exc:
            return _json(400, jsonrpc.error_from_exception(rid, exc))
        if not self.host.knows(method):
            return _json(404, jsonrpc.error_response(rid, METHOD_NOT_FOUND, f"Method not found: {method}"))
        can_stream = not self.http.json_response and "text/event-stream" in request.headers.get("Accept", "")
        reply = PostStream(request, str(next(self._stream_ids)), can_stream, meta.version, _forget, resumable=False)

        async def send(msg: dict[str, Any], related_request_id: str | int | None = None) -> None:
            if reply.can_stream:
                await reply.send(msg)

        session = StatelessSession(self.host, "streamable_http", send, principal, meta,
                                   request.headers.get("Authorization"))
        response = await self._serve(request, reply, session, message)
        status = _STATUS.get(response["error"].get("code")) if response is not None and "error" in response else None
        if status is not None and reply.sse is None:
            return _json(status, response)  # type: ignore[arg-type]
        return await reply.finish(response)

    async def _serve(self, request: web.Request, reply: PostStream, session: StatelessSession,
                     message: dict[str, Any]) -> dict[str, Any] | None:
        """Serve in this task while watching the connection: a client that goes away cancels the
        request (the watcher is a timer, not a task: most requests end before it first fires)."""
        loop = asyncio.get_running_loop()
        current = asyncio.current_task()
        keepalive = loop.call_later(self.http.keepalive_s, reply.keep_alive, self.http.keepalive_s) \
            if reply.can_stream else None
        watcher: asyncio.TimerHandle | None = None
        gone = False

        def watch() -> None:
            nonlocal watcher, gone
            transport = request.transport
            if transport is None or transport.is_closing():
                gone = True
                if current is not None:
                    current.cancel()
                return
            watcher = loop.call_later(_DISCONNECT_POLL_S, watch)

        watcher = loop.call_later(_DISCONNECT_POLL_S, watch)
        try:
            return await session.handle_request(message, request.headers.get("traceparent"))
        except asyncio.CancelledError:
            if not gone or current is None:
                raise
            current.uncancel()
            return None  # the client went away: nothing to answer
        finally:
            if watcher is not None:
                watcher.cancel()
            if keepalive is not None:
                keepalive.cancel()
            reply.stop_keepalive()


def _forget(post: PostStream) -> None:
    """Nothing to forget: modern streams are never kept for resumption."""
