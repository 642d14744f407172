"""CallContext: everything a filter or a connector may know about the request being served.

Built once per request by :mod:`gateway.dispatch`; frozen so that no filter can change what
another filter saw. A filter that needs to narrow something (the listing visibility predicate,
say) passes a copy made with :func:`dataclasses.replace` to ``call_next``. ``record`` is the one
mutable member, a :class:`CallRecord`: inner layers record facts for outer ones there (the
connector and backend target resolved by the catalog, the backend status, the outcome), which
audit and telemetry read on the way out. A copy made with ``replace`` shares the same record.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.protocol.errors import ProtocolError

__all__ = ["Principal", "ANONYMOUS", "SessionHandle", "CallContext", "CallRecord", "LocalHandler", "Visibility"]


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: a name and the groups access rules may name as ``group:<g>``."""

    name: str
    groups: frozenset[str] = frozenset()
    kind: str = "anonymous"  # anonymous | api_key | jwt | stdio

    def matches(self, selector: str) -> bool:
        """``*``, ``group:<g>`` or a principal name."""
        if selector == "*":
            return True
        if selector.startswith("group:"):
            return selector[6:] in self.groups
        return selector == self.name


ANONYMOUS = Principal("anonymous")

# kind ("tool" | "resource" | "resource_template" | "prompt"), public name -> visible?
Visibility = Callable[[str, str], bool]


class SessionHandle(Protocol):
    """What connectors and filters may use of a downstream session: a legacy session, or one
    request of a 2026-07-28 client (which has no session; its ``id`` names the request)."""

    id: str
    transport: str
    protocol_version: str
    client_info: dict[str, Any]
    client_capabilities: dict[str, Any]
    principal: Principal

    async def notify(self, method: str, params: dict[str, Any] | None = None,
                     related_request_id: str | int | None = None) -> None: ...

    async def request(self, method: str, params: dict[str, Any] | None = None,
                      related_request_id: str | int | None = None,
                      timeout: float | None = None) -> dict[str, Any]: ...


@dataclass(slots=True)
class CallRecord:
    """What the layers of the chain learn while serving one call, for the layers outside them.

    Written by the catalog endpoint (``connector``, ``backend_target``), by connectors
    (``backend_target`` when finer, ``backend_status``), by policy filters and the endpoint
    (``outcome`` when it is not plain success or failure: ``denied``, ``rate_limited``,
    ``tool_error``), by telemetry (``trace_id``, ``ratelimit_scope``). Read by audit and telemetry.
    """

    connector: str | None = None
    backend_target: str | None = None
    backend_status: int | str | None = None  # HTTP status, SQLSTATE, upstream JSON-RPC code
    outcome: str | None = None
    trace_id: str | None = None
    ratelimit_scope: str | None = None


# Serves a session method (initialize, logging/setLevel) at the end of the chain.
LocalHandler = Callable[["CallContext"], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class CallContext:
    """One request, as seen by the filter chain and the connector that serves it."""

    session: SessionHandle
    method: str
    request_id: str | int
    params: dict[str, Any]
    principal: Principal = ANONYMOUS
    # Public target: tool or prompt name, resource URI; "" for listings and session methods.
    target: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    deadline: float | None = None  # time.monotonic() value after which the call is abandoned
    traceparent: str | None = None
    progress_token: str | int | None = None
    visible: Visibility | None = None  # None: everything is visible
    started: float = field(default_factory=time.perf_counter)
    # The caller's own Authorization header of this very request (HTTP transports), for connectors
    # configured to forward it (``forward_caller``). Per request, never per session: two concurrent
    # POSTs of one session may carry different tokens. Never logged, traced or audited.
    caller_authorization: str | None = field(default=None, repr=False)
    # Set by dispatch: the request was refused before the chain (unknown method, malformed
    # params); the endpoint raises it, so the refusal is counted, traced and audited like a call.
    rejection: ProtocolError | None = None
    # Set by dispatch for session methods: served by the session instead of the catalog.
    local: LocalHandler | None = None
    record: CallRecord = field(default_factory=CallRecord)
    # The endpoint (virtual server, gateway.endpoints) the request came to; "" for /mcp.
    endpoint: str = ""

    def remaining(self) -> float | None:
        """Seconds left before the deadline, or None for no deadline."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def is_visible(self, kind: str, name: str) -> bool:
        return self.visible is None or self.visible(kind, name)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send notifications/progress for this request, if the client asked for progress."""
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.session.notify("notifications/progress", params, related_request_id=self.request_id)

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send notifications/message to this request's session (filtered by its log level)."""
        params: dict[str, Any] = {"level": level, "data": data}
        if logger:
            params["logger"] = logger
        await self.session.notify("notifications/message", params, related_request_id=self.request_id)
