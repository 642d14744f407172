"""A small MCP client session over one client transport: the gateway's side of an upstream.

It correlates requests with responses, runs the initialize handshake (offering the newest protocol
revision and accepting any supported one the upstream answers), and hands everything the upstream
initiates to a :class:`SessionHandler`: notifications synchronously, server→client requests
(sampling, elicitation, roots, ping) in their own task so a slow client never blocks the reader.

Each request may carry an ``owner`` (the connector passes the downstream CallContext). A message
the transport relates to one of our requests is handed over with that request's owner; that is
how upstream progress, logs and sampling find their downstream session.

Failures map to the gateway's exception tree at this edge: a lost transport is
``BackendUnavailable`` (so is one request lost with its connection, with ``data.retriable``; the
session stands), an exhausted timeout ``RequestTimeout``, an upstream JSON-RPC error a
``ProtocolError`` with the upstream's own code, message and data. A cancelled caller makes the
session send ``notifications/cancelled`` upstream before the cancellation propagates (unless
``cancel_by_close``: a 2026-07-28 HTTP request is cancelled by closing its response stream).

Eras. :meth:`UpstreamSession.open` is the legacy path (connect, then ``initialize``). For a
2026-07-28 upstream the same object is a plain request channel without a handshake: the connector
sets a :class:`Stamper` (:mod:`connectors.mcp.modern`) that adds the per-request ``_meta`` and
HTTP headers to every request; per-request :class:`Hints` tell it what varies per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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

from .transport import ClientTransport, Deliver, OnLost, RequestFailed, SessionExpired, TransportClosed

__all__ = ["SessionHandler", "UpstreamSession", "TransportFactory", "Hints", "Stamper", "opening_error"]

log = logging.getLogger("connectors.mcp")

TransportFactory = Callable[[Deliver, OnLost], ClientTransport]


class SessionHandler(Protocol):
    def on_notification(self, session: UpstreamSession, method: str, params: dict[str, Any], owner: Any) -> None: ...

    async def on_request(self, session: UpstreamSession, method: str, params: dict[str, Any],
                         owner: Any) -> dict[str, Any]: ...

    def on_lost(self, session: UpstreamSession, reason: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Hints:
    """What a modern request's stamp varies per call: the caller's log level (None: ask for no
    logs), the called tool's inputSchema (``Mcp-Param-*`` headers), the capabilities to declare
    (the caller's; None: the gateway's own)."""

    log_level: str | None = None
    input_schema: Mapping[str, Any] | None = None
    capabilities: Mapping[str, Any] | None = None


class Stamper(Protocol):
    """Adds the 2026-07-28 request fields: returns the params to send and the extra headers."""

    def __call__(self, method: str, params: dict[str, Any] | None,
                 hints: Hints | None) -> tuple[dict[str, Any], dict[str, str] | None]: ...


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
        # Set for a 2026-07-28 upstream (no handshake, every request stamped).
        self.stamper: Stamper | None = None
        self.cancel_by_close = False
        # A 2026-07-28 channel: whether the upstream also serves the handshake revisions (a dual-era
        # server; its legacy callers are then served over an upstream session of their own era,
        # connectors.mcp.sessions). None: not known yet (``protocol: auto``; the first legacy
        # caller's call finds out); False under ``protocol: modern``, which forces 2026-07-28.
        self.dual_era: bool | None = False

    @property
    def alive(self) -> bool:
        return not self._closed and self.lost_reason is None

    @property
    def modern(self) -> bool:
        return self.stamper is not None

    def reserve_id(self) -> int:
        """A request id for :meth:`request` (``request_id=``), known before the request is sent."""
        return next(self._ids)

    # -- lifecycle -----------------------------------------------------------------------------
    async def open(self, timeout_s: float) -> None:
        """Connect and initialize (the legacy handshake); raises BackendUnavailable with a
        readable reason. Whatever happens (cancellation included), a session that did not open
        leaves nothing running."""
        try:
            await self.connect(timeout_s)
            try:
                await self.handshake(timeout_s)
            except BaseException as exc:
                raise opening_error(self.name, exc, f"did not initialize within {timeout_s:g}s") from None
        except BaseException:
            await self.close()
            raise

    async def connect(self, timeout_s: float) -> None:
        """Open the transport (spawn the process); BackendUnavailable when that fails. The
        caller closes the session on failure."""
        try:
            async with asyncio.timeout(timeout_s):
                await self.transport.connect()
        except BaseException as exc:
            raise opening_error(self.name, exc, f"did not start within {timeout_s:g}s") from None

    async def handshake(self, timeout_s: float) -> None:
        """The ``initialize`` handshake on a connected transport. Raises what failed as it is
        (an upstream's JSON-RPC error keeps its code: era detection reads it)."""
        async with asyncio.timeout(timeout_s):
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
        self.transport.initialized()
        # Not used before the upstream can reach us outside a request's stream: what it sends
        # there meanwhile may be dropped (a Streamable HTTP GET stream not yet open).
        await self.transport.listening(timeout_s)

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
                      owner: Any = None, cancellable: bool = True, hints: Hints | None = None,
                      request_id: int | None = None) -> dict[str, Any]:
        if self.lost_reason is not None or self._closed:
            raise BackendUnavailable(f"upstream {self.name} is unavailable: {self.lost_reason or 'closed'}")
        headers = None
        if self.stamper is not None:
            params, headers = self.stamper(method, params, hints)
        rid = next(self._ids) if request_id is None else request_id
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = (fut, owner)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        sent = False
        try:
            async with asyncio.timeout(timeout_s):
                await self.transport.send(msg, headers)
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
        except RequestFailed as exc:  # this request only: the session stands
            raise BackendUnavailable(str(exc), {"retriable": True}) from None
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
        if self.alive and not self.cancel_by_close:
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


def opening_error(name: str, exc: BaseException, timed_out: str) -> BaseException:
    """What opening an upstream failed with, as the connector's reconnect loop expects it:
    ``BackendUnavailable`` for a timeout (``timed_out`` says what did not happen in time), a lost
    transport or an upstream's refusal; anything else (a bug, a cancellation) unchanged."""
    if isinstance(exc, TimeoutError):
        return BackendUnavailable(f"upstream {name} {timed_out}")
    if isinstance(exc, TransportClosed) or (isinstance(exc, ProtocolError) and not isinstance(exc, BackendUnavailable)):
        return BackendUnavailable(f"upstream {name} is unavailable: {exc}")
    return exc


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
