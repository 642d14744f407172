"""One request of a 2026-07-28 client: no session, everything the request needs is in its ``_meta``.

A transport that receives a modern request (its ``_meta`` names a modern protocol version) makes a
:class:`StatelessSession` for it with the caller's principal and the request's
:class:`~gateway.protocol.meta.RequestMeta`, and awaits :meth:`StatelessSession.handle_request`.
To the filter chain and the connectors it is a session like any other (a ``SessionHandle``): its
``notify`` writes request-scoped notifications (progress; log messages only at or above the
request's ``logLevel``, none without one) to the request's reply channel.

Server→client requests cannot be sent to a modern client. When a connector asks one anyway (an
older upstream asking for sampling, elicitation or roots in the middle of its tool call), the call
keeps running, parked (:mod:`gateway.mrtr`), and the client gets an ``InputRequiredResult`` whose
sealed ``requestState`` names the parked call; its retry with ``inputResponses`` resumes it.
A connector that itself returns ``input_required`` (a modern upstream) has its ``requestState``
sealed inside the gateway's, and unwrapped again on the retry, so a client can never forge or
replay another caller's state.

The caps on server→client requests (``gateway.server_requests``) hold here too: a parked call
may ask at most ``max_per_call`` inputs in all its rounds (and no faster than the session rate;
the call is this request's only "session"), and an upstream's own ``inputRequests`` are counted
across the call's rounds through the sealed state. What is over a cap is refused: to the
upstream that asked (-32029), or, for an upstream's ``input_required``, to the client instead of
passing the requests on.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from typing import Any, Protocol

from gateway.config import RelayLimits, ServerRequestLimits
from gateway.context import LocalHandler, Principal
from gateway.mrtr import ParkedCall, ParkedCalls, PendingInputs, run_until_input
from gateway.policy import ServerRequestBudget
from gateway.protocol import jsonrpc
from gateway.protocol.errors import (
    InvalidParams,
    MethodNotFound,
    MissingRequiredClientCapability,
    ProtocolError,
    RateLimited,
    RequestTimeout,
)
from gateway.protocol.lifecycle import StatelessLifecycle
from gateway.protocol.meta import INPUT_CAPABILITY, RequestMeta, log_admitted
from gateway.protocol.request_state import RequestStateCodec, request_digest
from gateway.protocol.revisions import revision
from gateway.relay_gate import RELAYED, RelayGate
from gateway.session import Send, server_request_budget, server_request_refused
from gateway.telemetry import metrics

__all__ = ["StatelessSession", "StatelessHost", "MRTR_METHODS"]

log = logging.getLogger("gateway.stateless")

# The requests a server may answer with InputRequiredResult (mrtr.mdx, "Supported Requests").
MRTR_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
# Request ids for traces and audit rows: unique within the process, told apart between replicas.
_ID_PREFIX = secrets.token_hex(4)
_ids = itertools.count(1)
_INPUT_CAPABILITIES = frozenset(INPUT_CAPABILITY.values())
_CALL = "call"  # the budget's key for this request's one call


class StatelessHost(Protocol):
    """What a modern request needs of the running gateway."""

    @property
    def request_timeout_s(self) -> float: ...

    @property
    def server_request_limits(self) -> ServerRequestLimits: ...

    @property
    def relay_limits(self) -> RelayLimits: ...

    @property
    def parked(self) -> ParkedCalls: ...

    @property
    def request_states(self) -> RequestStateCodec: ...

    @property
    def replica(self) -> str | None:
        """This replica's id when replicas share state (a parked call's ``requestState`` names
        it), else None."""

    async def resume_elsewhere(self, replica: str, message: dict[str, Any], session: StatelessSession
                               ) -> dict[str, Any]:
        """Serve a retry whose call is parked on another replica there (:mod:`gateway.mrtr_remote`)."""

    def modern_method(self, method: str) -> LocalHandler | None:
        """The gateway's own handler of a modern-only method (``server/discover``,
        ``subscriptions/listen``), or None for a catalog method."""

    async def dispatch(self, session: Any, request_id: str | int, method: str, params: dict[str, Any],
                       traceparent: str | None = None, local: LocalHandler | None = None,
                       *, authorization: str | None = None) -> dict[str, Any]: ...


class StatelessSession:
    """One modern request, seen as a session by the chain and the connectors."""

    def __init__(self, host: StatelessHost, transport: str, send: Send, principal: Principal,
                 meta: RequestMeta, caller_authorization: str | None = None) -> None:
        self.host = host
        self.id = f"req-{_ID_PREFIX}-{next(_ids)}"  # for traces and audit rows: no session exists
        self.transport = transport
        self.principal = principal
        self.protocol_version = meta.version
        self.client_info: dict[str, Any] = meta.client_info
        self.client_capabilities: dict[str, Any] = meta.client_capabilities
        self.log_level = meta.log_level
        # This one request's Authorization header (an object per request, never shared by two).
        self.caller_authorization = caller_authorization
        self.lifecycle = StatelessLifecycle()
        self._send = send
        self._inputs: PendingInputs | None = None
        self._missing: dict[str, dict[str, Any]] = {}  # capabilities the backend asked for in vain
        self._revision = revision(meta.version)
        self._budget: ServerRequestBudget | None = None  # made on the first server→client request
        self._relay = RelayGate(lambda: self.host.relay_limits)  # upstream log/progress of the call
        self._asked_before = 0  # inputs an upstream asked in earlier rounds (from the sealed state)

    # -- what connectors and filters use --------------------------------------------------------
    async def notify(self, method: str, params: dict[str, Any] | None = None,
                     related_request_id: str | int | None = None) -> None:
        if method == "notifications/message":
            # 2026-07-28: no log messages for a request that did not ask for them.
            if self.log_level is None or params is None:
                return
            if not log_admitted(params, self.log_level):
                return
        if method in RELAYED and related_request_id is not None:
            relay, notice = self._relay.check(method, params, _CALL)
            if notice is not None and self.log_level is not None and log_admitted(notice, self.log_level):
                await self._deliver("notifications/message", notice, related_request_id)
            if not relay:
                return
        await self._deliver(method, params, related_request_id)

    async def _deliver(self, method: str, params: dict[str, Any] | None, related_request_id: str | int | None) -> None:
        try:
            await self._send(jsonrpc.notification(method, params), related_request_id)
        except Exception:  # a client that went away must not fail the call
            log.debug("dropping %s for %s", method, self.id, exc_info=True)

    async def request(self, method: str, params: dict[str, Any] | None = None,
                      related_request_id: str | int | None = None, timeout: float | None = None) -> dict[str, Any]:
        """A server→client request, asked through MRTR: the call parks until the client's retry."""
        needed = INPUT_CAPABILITY.get(method)
        if needed is not None and needed not in self.client_capabilities:
            # The backend needs what the client did not declare: the request itself fails with
            # MissingRequiredClientCapability (-32021), whatever the backend makes of the refusal.
            self._missing[needed] = {}
            raise MissingRequiredClientCapability(dict(self._missing))
        if self._inputs is None:
            raise MethodNotFound(f"{method} cannot be asked of a 2026-07-28 client during this request")
        if self._budget is None:
            self._budget = server_request_budget(self.host.server_request_limits)
        refusal = self._budget.admit(_CALL, time.monotonic())
        if refusal is not None:
            raise server_request_refused(method, refusal)
        try:
            async with asyncio.timeout(timeout or self.host.request_timeout_s):
                return await self._inputs.ask(method, params)
        except TimeoutError:
            raise RequestTimeout(f"The client did not answer {method} in time") from None

    async def relay(self, message: dict[str, Any], related_request_id: str | int) -> None:
        """A message of this request's call that another replica runs (progress, a log line)."""
        try:
            await self._send(message, related_request_id)
        except Exception:  # a client that went away must not fail the call
            log.debug("dropping a relayed message for %s", self.id, exc_info=True)

    def retarget(self, send: Send) -> None:
        """The client's retry arrived on a new reply channel: the rest of the call goes there."""
        self._send = send

    # -- serving ---------------------------------------------------------------------------------
    async def handle_request(self, message: dict[str, Any], traceparent: str | None = None) -> dict[str, Any]:
        """Serve the request; returns its JSON-RPC response (an error, a result, or an
        ``InputRequiredResult`` while the call waits for the client's input)."""
        rid = message["id"]
        method = message["method"]
        params = message.get("params") or {}
        try:
            self.lifecycle.admit(method).check()
            local = self.host.modern_method(method)
            state = params.get("requestState") if method in MRTR_METHODS else None
            if state is not None:
                if not isinstance(state, str):
                    raise InvalidParams("requestState must be a string")
                payload = self._open_state(state, method, params)
                if payload.get("kind") == "parked":
                    at = payload.get("at")
                    if isinstance(at, str) and at != self.host.replica:  # parked on another replica
                        return await self.host.resume_elsewhere(at, message, self)
                    return await self._resume(rid, method, params, str(payload.get("call")))
                params = _with_upstream_state(params, payload.get("state"))
                asked = payload.get("asked")
                self._asked_before = asked if isinstance(asked, int) else 0
            # The call itself (inline rather than a coroutine of its own: this frame is resumed on
            # every await of every call).
            call = self.host.dispatch(self, rid, method, params, traceparent, local,
                                      authorization=self.caller_authorization)
            if method not in MRTR_METHODS:
                return jsonrpc.result_response(rid, await call)
            if not self.client_capabilities.keys() & _INPUT_CAPABILITIES:
                # The client could answer no input request, so the call can never park: run it in
                # this task (no task of its own, no waiting on it: the common case costs nothing).
                try:
                    result = await call
                except ProtocolError:
                    if self._missing:
                        return self._error(rid, MissingRequiredClientCapability(dict(self._missing)))
                    raise
                if self._missing:
                    return self._error(rid, MissingRequiredClientCapability(dict(self._missing)))
                return self._reply(rid, method, params, result)
            self._inputs = inputs = PendingInputs()
            task = asyncio.ensure_future(call)
            return await self._drive(rid, method, params, task, inputs)
        except ProtocolError as exc:
            return self._error(rid, exc)
        except Exception as exc:  # a bug or an unwrapped backend error: log it, keep serving
            log.exception("unhandled error serving %s", method)
            return jsonrpc.error_from_exception(rid, exc)

    async def _drive(self, rid: str | int, method: str, params: dict[str, Any], task: asyncio.Future[Any],
                     inputs: PendingInputs) -> dict[str, Any]:
        try:
            finished = await run_until_input(task, inputs)
        except asyncio.CancelledError:  # the client closed the stream: that cancels the call
            task.cancel()
            raise
        if finished:
            if self._missing:
                if not task.cancelled():
                    task.exception()  # retrieve it: the refusal below is the answer
                return self._error(rid, MissingRequiredClientCapability(dict(self._missing)))
            try:
                return self._reply(rid, method, params, task.result())
            except ProtocolError as exc:
                return self._error(rid, exc)
            except Exception as exc:
                log.exception("unhandled error serving %s", method)
                return jsonrpc.error_from_exception(rid, exc)
        digest = request_digest(method, params)
        call_id = self.host.parked.park(
            ParkedCall(task, inputs, self, self.principal.name, method, digest),
            deadline_s=self.host.request_timeout_s)
        parked: dict[str, Any] = {"kind": "parked", "call": call_id}
        if self.host.replica is not None:  # a retry landing on another replica is routed here
            parked["at"] = self.host.replica
        state = self.host.request_states.seal(parked, principal=self.principal.name, method=method, digest=digest)
        result = {"resultType": "input_required", "inputRequests": inputs.outstanding(), "requestState": state}
        return jsonrpc.result_response(rid, result)

    async def _resume(self, rid: str | int, method: str, params: dict[str, Any], call_id: str) -> dict[str, Any]:
        parked = self.host.parked.take(call_id)
        if parked is None:
            raise InvalidParams("requestState: the call it continues is no longer waiting (it ended, "
                                "expired, or is held by another replica); send the request again without it")
        session: StatelessSession = parked.session
        session.retarget(self._send)
        responses = params.get("inputResponses")
        if responses is not None and not isinstance(responses, dict):
            raise InvalidParams("inputResponses must be an object")
        parked.inputs.answer(responses or {})
        return await session._drive(rid, method, params, parked.task, parked.inputs)

    def _open_state(self, state: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.host.request_states.open(state, principal=self.principal.name, method=method,
                                             digest=request_digest(method, params))

    def _reply(self, rid: str | int, method: str, params: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        if result.get("resultType") == "input_required":
            # A modern upstream asks: its requestState travels inside the gateway's own, sealed and
            # bound to this caller and this request (the upstream's state is opaque to us).
            requests = result.get("inputRequests")
            asked = self._asked_before + (len(requests) if isinstance(requests, dict) else 0)
            cap = self.host.server_request_limits.max_per_call
            if asked > cap:
                # Each input the upstream asked for in this result is refused (none is passed on).
                for asked_for in requests.values() if isinstance(requests, dict) else ():
                    method_of = asked_for.get("method") if isinstance(asked_for, dict) else None
                    metrics.server_request_refused(str(method_of), "per_call")
                return self._error(rid, RateLimited(
                    f"The backend asked the client for {asked} inputs in this call, over "
                    f"gateway.server_requests.max_per_call ({cap}); none were passed on", 0, "server_requests"))
            payload: dict[str, Any] = {"kind": "upstream", "asked": asked}
            if isinstance(result.get("requestState"), str):
                payload["state"] = result["requestState"]
            sealed = self.host.request_states.seal(payload, principal=self.principal.name, method=method,
                                                   digest=request_digest(method, params))
            result = {**result, "requestState": sealed}
        return jsonrpc.result_response(rid, result)

    def _error(self, rid: str | int, exc: ProtocolError) -> dict[str, Any]:
        return jsonrpc.error_response(rid, self._revision.error_code(exc), exc.message, exc.data)


def _with_upstream_state(params: dict[str, Any], state: object) -> dict[str, Any]:
    """The retry's params as the connector must see them: the upstream's own ``requestState``."""
    out = {k: v for k, v in params.items() if k != "requestState"}
    if isinstance(state, str):
        out["requestState"] = state
    return out

