"""A small MCP client session over one client transport: the gateway's side of an upstream.

It correlates requests with responses, runs the initialize handshake (offering the newest protocol
revision and accepting any supported one the upstream answers), and hands everything the upstream
initiates to a :class:`SessionHandler`: notifications synchronously, server→client requests
(sampling, elicitation, roots, ping) in their own task so a slow client never blocks the reader.

Each request may carry an ``owner`` (the connector passes the downstream CallContext). A message
the transport relates to one of our requests is handed over with that request's owner; that is
how upstream progress, logs and sampling find their downstream session.

Failures map to the gateway's exception tree at this edge: a lost transport is
``BackendUnavailable``, an exhausted timeout ``RequestTimeout``, an upstream JSON-RPC error a
``ProtocolError`` with the upstream's own code, message and data. A cancelled caller makes the
session send ``notifications/cancelled`` upstream before the cancellation propagates.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
from collections.abc import Callable
from typing import Any, Protocol

from gateway.protocol.errors import (
    BackendUnavailable,
    InternalError,
    InvalidParams,
    MethodNotFound,
    ProtocolError,
    RequestTimeout,
)
from gateway.protocol.jsonrpc import error_from_exception, result_response
from gateway.protocol.versions import LATEST_LEGACY_VERSION, LEGACY_VERSIONS

from .transport import ClientTransport, Deliver, OnLost, SessionExpired, TransportClosed

__all__ = ["SessionHandler", "UpstreamSession", "TransportFactory"]

log = logging.getLogger("connectors.mcp")

TransportFactory = Callable[[Deliver, OnLost], ClientTransport]


class SessionHandler(Protocol):
    def on_notification(self, session: UpstreamSession, method: str, params: dict[str, Any], owner: Any) -> None: ...

    async def on_request(self, session: UpstreamSession, method: str, params: dict[str, Any],
                         owner: Any) -> dict[str, Any]: ...

    def on_lost(self, session: UpstreamSession, reason: str) -> None: ...


class UpstreamSession:
    """One initialized upstream session. Not reusable: reconnecting builds a new one."""

    def __init__(self, name: str, factory: TransportFactory, handler: SessionHandler, *,
                 client_info: dict[str, Any], capabilities: dict[str, Any]) -> None:
        self.name = name
        self._handler = handler
        self._client_info = client_info
        self._capabilities = capabilities
        self._ids = itertools.count(1)
        # upstream request id -> (future of the response message, owner)
        self._pending: dict[int, tuple[asyncio.Future[dict[str, Any]], Any]] = {}
        # upstream-initiated requests being served, by their id (so their cancel can reach them)
        self._serving: dict[Any, asyncio.Task[None]] = {}
        self._bg: set[asyncio.Task[Any]] = set()
        self._closed = False
        self.lost_reason: str | None = None
        self.transport = factory(self._deliver, self._on_lost)
        self.protocol_version = ""
        self.server_capabilities: dict[str, Any] = {}
        self.server_info: dict[str, Any] = {}
        self.instructions: str | None = None

    @property
    def alive(self) -> bool:
        return not self._closed and self.lost_reason is None

    # -- lifecycle -----------------------------------------------------------------------------
    async def open(self, timeout_s: float) -> None:
        """Connect and initialize; raises BackendUnavailable with a readable reason. Whatever
        happens (cancellation included), a session that did not open leaves nothing running."""
        try:
            async with asyncio.timeout(timeout_s):
                await self.transport.connect()
                result = await self.request("initialize", {
                    "protocolVersion": LATEST_LEGACY_VERSION,
                    "capabilities": self._capabilities,
                    "clientInfo": self._client_info,
                }, cancellable=False)
            version = result.get("protocolVersion")
            if version not in LEGACY_VERSIONS:
                raise BackendUnavailable(f"upstream {self.name} speaks protocol {version!r}, which the gateway "
                                         f"does not support ({', '.join(LEGACY_VERSIONS)})")
            self.protocol_version = version
            self.transport.protocol_version = version
            self.server_capabilities = result.get("capabilities") or {}
            self.server_info = result.get("serverInfo") or {}
            self.instructions = result.get("instructions")
            await self.notify("notifications/initialized")
        except BaseException as exc:
            await self.close()
            if isinstance(exc, TimeoutError):
                raise BackendUnavailable(f"upstream {self.name} did not initialize within {timeout_s:g}s") from None
            if isinstance(exc, TransportClosed) or (isinstance(exc, ProtocolError)
                                                   and not isinstance(exc, BackendUnavailable)):
                raise BackendUnavailable(f"upstream {self.name} is unavailable: {exc}") from None
            raise
        self.transport.initialized()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._fail_pending(f"upstream {self.name} session closed")
        for task in list(self._serving.values()):
            task.cancel()
        await self.transport.close()
        for task in list(self._bg):
            task.cancel()

    # -- outgoing ------------------------------------------------------------------------------
    async def request(self, method: str, params: dict[str, Any] | None = None, *, timeout_s: float | None = None,
                      owner: Any = None, cancellable: bool = True) -> dict[str, Any]:
        if self.lost_reason is not None or self._closed:
            raise BackendUnavailable(f"upstream {self.name} is unavailable: {self.lost_reason or 'closed'}")
        rid = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = (fut, owner)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        sent = False
        try:
            async with asyncio.timeout(timeout_s):
                await self.transport.send(msg)
                sent = True
                response = await fut
        except TimeoutError:
            self._cancel_upstream(rid, "timed out at the gateway")
            raise RequestTimeout(f"upstream {self.name} did not answer {method} within {timeout_s:g}s") from None
        except asyncio.CancelledError:
            if cancellable and (sent or not fut.done()):
                self._cancel_upstream(rid, "cancelled by the client")
            raise
        except SessionExpired:
            raise
        except TransportClosed as exc:
            raise BackendUnavailable(f"upstream {self.name} is unavailable: {exc}") from None
        finally:
            self._pending.pop(rid, None)
        error = response.get("error")
        if error is not None:
            raise _upstream_error(error)
        result = response.get("result")
        return result if isinstance(result, dict) else {}

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        try:
            await self.transport.send(msg)
        except TransportClosed as exc:
            raise BackendUnavailable(f"upstream {self.name} is unavailable: {exc}") from None

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    def _cancel_upstream(self, rid: int, reason: str) -> None:
        if self.alive:
            self._spawn(self._quiet_notify("notifications/cancelled", {"requestId": rid, "reason": reason}))

    async def _quiet_notify(self, method: str, params: dict[str, Any]) -> None:
        with contextlib.suppress(Exception):
            await self.notify(method, params)

    # -- incoming ------------------------------------------------------------------------------
    def _deliver(self, msg: dict[str, Any], related: str | int | None) -> None:
        method = msg.get("method")
        if method is None:
            entry = self._pending.get(msg.get("id"))  # type: ignore[arg-type]
            if entry is not None and not entry[0].done():
                entry[0].set_result(msg)
            return
        owner = None
        if related is not None:
            entry = self._pending.get(related)  # type: ignore[arg-type]
            if entry is not None:
                owner = entry[1]
        params = msg.get("params")
        if not isinstance(params, dict):
            params = {}
        if "id" in msg:
            rid = msg["id"]
            task = asyncio.create_task(self._serve(rid, method, params, owner))
            self._serving[rid] = task
            task.add_done_callback(functools.partial(self._served, rid))
            return
        if method == "notifications/cancelled":
            served = self._serving.get(params.get("requestId"))
            if served is not None:
                served.cancel()
            return
        try:
            self._handler.on_notification(self, method, params, owner)
        except Exception:  # a bad notification must never kill the reader
            log.exception("upstream %s: handling %s failed", self.name, method)

    def _served(self, rid: Any, _task: asyncio.Task[None]) -> None:
        self._serving.pop(rid, None)

    async def _serve(self, rid: Any, method: str, params: dict[str, Any], owner: Any) -> None:
        try:
            if method == "ping":
                reply = result_response(rid, {})
            else:
                reply = result_response(rid, await self._handler.on_request(self, method, params, owner))
        except asyncio.CancelledError:
            return  # the upstream cancelled its own request: no response is sent
        except Exception as exc:
            if not isinstance(exc, ProtocolError):
                log.exception("upstream %s: serving %s failed", self.name, method)
            reply = error_from_exception(rid, exc)
        with contextlib.suppress(TransportClosed, ProtocolError):
            await self.transport.send(reply)

    def _fail_pending(self, reason: str) -> None:
        for fut, _owner in self._pending.values():
            if not fut.done():
                fut.set_exception(TransportClosed(reason))
                fut.exception()  # marks it retrieved: a caller may already be gone

    def lose(self, reason: str) -> None:
        """Declare the session dead (failed ping, expired session): same path as a lost transport."""
        self._on_lost(reason)

    def _on_lost(self, reason: str) -> None:
        if self.lost_reason is not None or self._closed:
            return
        self.lost_reason = reason
        self._fail_pending(reason)
        for task in list(self._serving.values()):
            task.cancel()
        self._handler.on_lost(self, reason)

    # -- routing helpers for the connector --------------------------------------------------------
    def owners(self) -> list[Any]:
        """Owners of requests in flight, oldest first."""
        return [owner for _fut, owner in self._pending.values() if owner is not None]


def _upstream_error(error: Any) -> ProtocolError:
    if not isinstance(error, dict):
        return InternalError("upstream sent a malformed error")
    code = error.get("code")
    message = str(error.get("message") or "upstream error")
    data = error.get("data")
    if not isinstance(code, int) or isinstance(code, bool):
        return InternalError(message, data)
    if code == MethodNotFound.code:
        return MethodNotFound(message, data)
    if code == InvalidParams.code:
        return InvalidParams(message, data)
    return ProtocolError(message, data, code=code)
