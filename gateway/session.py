"""One downstream MCP session: lifecycle, in-flight requests, cancellation, log level,
subscriptions and server→client requests.

A transport creates a :class:`Session` with a ``send`` coroutine (how to write one message to this
client, optionally on the stream of a related request) and feeds it decoded messages:
:meth:`Session.handle_request` returns the response to write (or None when the client cancelled the
request), :meth:`Session.handle_notification` and :meth:`Session.handle_response` return nothing.
The session answers the lifecycle methods itself (``initialize``, ``ping``, ``logging/setLevel``)
and hands everything else to its host. Which requests it may serve when is decided by a pure
:class:`~gateway.protocol.lifecycle.SessionLifecycle`; what it needs of the running gateway is the
narrow :class:`SessionHost` protocol (dispatch, capabilities, identity, session end, roots change),
which :class:`gateway.app.Gateway` implements.

Cancellation: the task serving a request is registered while it runs; ``notifications/cancelled``
cancels it, and the request produces no response, as the specification asks.

Server→client requests (:meth:`Session.request`, what upstreams ask of the client) are capped per
call and per session per second (``gateway.server_requests``, :mod:`gateway.policy.server_requests`);
one over a cap is refused at once with :class:`~gateway.protocol.errors.RateLimited` (-32029, scope
``server_requests``), which the connector passes back to the upstream that asked.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from gateway.config import RelayLimits, ServerRequestLimits
from gateway.context import ANONYMOUS, CallContext, LocalHandler, Principal
from gateway.policy import Refusal, ServerRequestBudget
from gateway.protocol import jsonrpc
from gateway.protocol.errors import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    ProtocolError,
    RateLimited,
    RequestTimeout,
)
from gateway.protocol.lifecycle import SessionLifecycle, SessionState
from gateway.protocol.meta import INPUT_CAPABILITY, LOG_LEVELS, log_admitted
from gateway.protocol.versions import negotiate
from gateway.relay_gate import RELAYED, RelayGate
from gateway.telemetry import metrics

__all__ = ["Session", "SessionHost", "ServerIdentity", "Send", "LOG_LEVELS", "server_request_budget",
           "server_request_refused"]

log = logging.getLogger("gateway.session")

Send = Callable[[dict[str, Any], "str | int | None"], Awaitable[None]]

# Which client capability a server→client request needs.


class ServerIdentity(Protocol):
    """What ``initialize`` tells a client about the server."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def instructions(self) -> str | None: ...


class SessionHost(Protocol):
    """What a session needs of the running gateway (read per request: a reload replaces parts)."""

    @property
    def identity(self) -> ServerIdentity: ...

    @property
    def request_timeout_s(self) -> float: ...

    @property
    def server_request_limits(self) -> ServerRequestLimits: ...

    @property
    def relay_limits(self) -> RelayLimits: ...

    def capabilities(self) -> dict[str, Any]: ...

    async def dispatch(self, session: Session, request_id: str | int, method: str, params: dict[str, Any],
                       traceparent: str | None = None, local: LocalHandler | None = None,
                       *, authorization: str | None = None) -> dict[str, Any]:
        """Run a request through the filter chain (to the catalog, or to ``local``); ``traceparent``
        and ``authorization`` are this request's own (HTTP headers), never the session's."""

    async def session_closed(self, session: Session) -> None: ...

    def client_roots_changed(self, session: Session) -> None: ...


def server_request_budget(limits: ServerRequestLimits) -> ServerRequestBudget:
    return ServerRequestBudget(limits.max_per_call, limits.max_per_session_per_s, limits.burst)


def server_request_refused(method: str, refusal: Refusal) -> RateLimited:
    """The error an upstream gets for a server→client request over a cap (counted here, once)."""
    metrics.server_request_refused(method, "per_call" if refusal.scope == "call" else "per_session")
    if refusal.scope == "call":
        return RateLimited(f"Refused {method}: this call already sent {int(refusal.limit)} requests to the client "
                           f"(gateway.server_requests.max_per_call)", 0, "server_requests")
    return RateLimited(f"Refused {method}: more than {refusal.limit:g} requests per second to the client in this "
                       f"session (gateway.server_requests.max_per_session_per_s)",
                       max(1, round(refusal.retry_after * 1000)), "server_requests")


class Session:
    """State of one client connection (stdio process, SSE stream or Streamable HTTP session)."""

    def __init__(self, host: SessionHost, transport: str, send: Send, principal: Principal = ANONYMOUS) -> None:
        self.host = host
        self.id = secrets.token_urlsafe(24)
        self.transport = transport
        self.principal = principal
        self._send = send
        self.lifecycle = SessionLifecycle()
        self.protocol_version = ""
        self.client_info: dict[str, Any] = {}
        self.client_capabilities: dict[str, Any] = {}
        self.log_level = "info"
        self.last_active = time.monotonic()
        self._inflight: dict[str | int, asyncio.Task[Any]] = {}
        self._cancelled: set[str | int] = set()
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        # Ids of server→client requests; with a shared state store it names this replica
        # ("gw.<replica>."), so a client's answer landing on another replica is routed here.
        self.request_prefix = "gw-"
        self._budget: ServerRequestBudget | None = None  # made on the first server→client request
        self._relay = RelayGate(lambda: self.host.relay_limits)  # upstream log/progress per call

    @property
    def state(self) -> SessionState:
        """new → ready (after initialize) → closed."""
        return self.lifecycle.state

    # -- incoming -----------------------------------------------------------------------------
    async def handle_request(self, message: dict[str, Any], traceparent: str | None = None,
                             authorization: str | None = None) -> dict[str, Any] | None:
        """Serve one request; returns the response, or None if the client cancelled it.
        ``authorization`` is the Authorization header of the HTTP request that carried it: a
        session keeps none, so concurrent POSTs cannot forward each other's credentials."""
        rid = message["id"]
        method = message["method"]
        params = message.get("params") or {}
        self.last_active = time.monotonic()
        task = asyncio.current_task()
        if rid in self._inflight:
            return jsonrpc.error_response(rid, InvalidRequest.code, f"Request id {rid!r} is already in use")
        if task is not None:
            self._inflight[rid] = task
        try:
            result = await self._serve(rid, method, params, traceparent, authorization)
            return jsonrpc.result_response(rid, result)
        except asyncio.CancelledError:
            if rid in self._cancelled and task is not None:
                task.uncancel()
                return None
            raise
        except ProtocolError as exc:
            return jsonrpc.error_from_exception(rid, exc)
        except Exception as exc:  # a bug or an unwrapped backend error: log it, keep serving
            log.exception("unhandled error serving %s", method)
            return jsonrpc.error_from_exception(rid, exc)
        finally:
            self._inflight.pop(rid, None)
            self._cancelled.discard(rid)
            if self._budget is not None:
                self._budget.call_ended(rid)
            self._relay.call_ended(rid)

    async def _serve(self, rid: str | int, method: str, params: dict[str, Any], traceparent: str | None,
                     authorization: str | None) -> dict[str, Any]:
        if method == "initialize":
            # Travels the chain even when refused, so a second initialize is audited.
            return await self.host.dispatch(self, rid, method, params, traceparent, local=self._initialize,
                                            authorization=authorization)
        self.lifecycle.admit(method).check()
        if method == "ping":  # liveness only: not worth an audit event or a span
            return {}
        if method == "logging/setLevel":
            return await self.host.dispatch(self, rid, method, params, traceparent, local=self._set_level,
                                            authorization=authorization)
        return await self.host.dispatch(self, rid, method, params, traceparent, authorization=authorization)

    async def _set_level(self, ctx: CallContext) -> dict[str, Any]:
        level = ctx.params.get("level")
        if level not in LOG_LEVELS:
            raise InvalidParams(f"Invalid log level {level!r}; expected one of {', '.join(LOG_LEVELS)}")
        self.log_level = level
        return {}

    async def _initialize(self, ctx: CallContext) -> dict[str, Any]:
        params = ctx.params
        self.lifecycle.admit("initialize").check()
        if not isinstance(params.get("protocolVersion"), str):
            raise InvalidParams("initialize: protocolVersion (string) is required")
        caps = params.get("capabilities", {})
        info = params.get("clientInfo", {})
        self.client_capabilities = caps if isinstance(caps, dict) else {}
        self.client_info = info if isinstance(info, dict) else {}
        self.protocol_version = negotiate(params.get("protocolVersion"))
        # Ready from here on: clients may legitimately pipeline requests before `initialized`.
        self.lifecycle.initialized()
        identity = self.host.identity
        result: dict[str, Any] = {
            "protocolVersion": self.protocol_version,
            "capabilities": self.host.capabilities(),
            "serverInfo": {"name": identity.name, "version": identity.version},
        }
        title = getattr(identity, "title", None)  # an endpoint's (gateway.endpoints)
        if title:
            result["serverInfo"]["title"] = title
        if identity.instructions:
            result["instructions"] = identity.instructions
        return result

    async def handle_notification(self, message: dict[str, Any]) -> None:
        method = message["method"]
        params = message.get("params") or {}
        self.last_active = time.monotonic()
        if method == "notifications/cancelled":
            rid = params.get("requestId")
            task = self._inflight.get(rid) if isinstance(rid, (str, int)) else None
            if task is not None and rid is not None:
                self._cancelled.add(rid)
                task.cancel()
        elif method == "notifications/roots/list_changed":
            self.host.client_roots_changed(self)
        # notifications/initialized, progress from the client and unknown notifications: nothing to do.

    def awaits(self, request_id: Any) -> bool:
        """Whether a server→client request with this id is pending here."""
        return str(request_id) in self._pending

    def handle_response(self, message: dict[str, Any]) -> None:
        """A client's answer to a server→client request."""
        future = self._pending.pop(str(message.get("id")), None)
        if future is None or future.done():
            return
        if "error" in message and isinstance(message["error"], dict):
            err = message["error"]
            future.set_exception(ProtocolError(str(err.get("message", "error")), err.get("data"),
                                               code=int(err.get("code", InternalError.code))))
        else:
            result = message.get("result")
            future.set_result(result if isinstance(result, dict) else {})

    # -- outgoing -----------------------------------------------------------------------------
    async def notify(self, method: str, params: dict[str, Any] | None = None,
                     related_request_id: str | int | None = None) -> None:
        if not self.lifecycle.can_notify:
            return
        if method == "notifications/message" and params is not None:
            if not log_admitted(params, self.log_level):
                return
        if method in RELAYED and related_request_id is not None and related_request_id in self._inflight:
            relay, notice = self._relay.check(method, params, related_request_id)
            if notice is not None and log_admitted(notice, self.log_level):
                await self._deliver("notifications/message", notice, related_request_id)
            if not relay:
                return
        await self._deliver(method, params, related_request_id)

    async def _deliver(self, method: str, params: dict[str, Any] | None, related_request_id: str | int | None) -> None:
        try:
            await self._send(jsonrpc.notification(method, params), related_request_id)
        except Exception:  # a client that went away must not fail the sender
            log.debug("dropping %s for session %s", method, self.id, exc_info=True)

    async def request(self, method: str, params: dict[str, Any] | None = None,
                      related_request_id: str | int | None = None, timeout: float | None = None) -> dict[str, Any]:
        """Send a request to the client and await its result (sampling, elicitation, roots)."""
        needed = INPUT_CAPABILITY.get(method)
        if needed is not None and needed not in self.client_capabilities:
            raise MethodNotFound(f"The client did not declare the {needed} capability")
        if self.lifecycle.state is SessionState.CLOSED:
            raise InternalError("The client session is closed")
        budget = self._budget
        if budget is None:
            budget = self._budget = server_request_budget(self.host.server_request_limits)
        # Charged to its call while that call runs (a late one only to the session: the per-call
        # count is forgotten when the call ends).
        call = related_request_id if related_request_id in self._inflight else None
        refusal = budget.admit(call, time.monotonic())
        if refusal is not None:
            raise server_request_refused(method, refusal)
        rid = f"{self.request_prefix}{next(self._ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            await self._send(jsonrpc.request(rid, method, params), related_request_id)
            async with asyncio.timeout(timeout or self.host.request_timeout_s):
                return await future
        except TimeoutError:
            await self.notify("notifications/cancelled", {"requestId": rid, "reason": "timeout"})
            raise RequestTimeout(f"The client did not answer {method} in time") from None
        except asyncio.CancelledError:
            await self.notify("notifications/cancelled", {"requestId": rid, "reason": "cancelled"})
            raise
        finally:
            self._pending.pop(rid, None)

    # -- end ----------------------------------------------------------------------------------
    def inflight(self) -> int:
        return len(self._inflight)

    def inflight_tasks(self) -> list[asyncio.Task[Any]]:
        return [t for t in self._inflight.values() if t is not asyncio.current_task()]

    async def close(self) -> None:
        """Cancel what is still running and tell the host; idempotent."""
        if not self.lifecycle.close():
            return
        for task in list(self._inflight.values()):
            if task is not asyncio.current_task():
                task.cancel()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(InternalError("The client session closed"))
        self._pending.clear()
        await self.host.session_closed(self)
