"""The gateway's exception tree and the JSON-RPC error codes it maps to.

Every failure that can reach a client is one of these classes. Third-party exceptions are wrapped
at the edge that calls the library (see ``map_exceptions`` in each connector); they are converted to
the wire in exactly one place, :func:`gateway.protocol.jsonrpc.error_response`.

Two families:

* :class:`ProtocolError` and its subclasses become JSON-RPC ``error`` objects.
* :class:`ToolExecutionError` is raised by a connector whose backend failed while running a tool;
  ``tools/call`` turns it into a result with ``isError: true`` and a message a model can act on.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "RESOURCE_NOT_FOUND",
    "ACCESS_DENIED",
    "RATE_LIMITED",
    "BACKEND_UNAVAILABLE",
    "REQUEST_CANCELLED",
    "REQUEST_TIMEOUT",
    "GatewayError",
    "ProtocolError",
    "ParseError",
    "InvalidRequest",
    "MethodNotFound",
    "InvalidParams",
    "InternalError",
    "ResourceNotFound",
    "AccessDenied",
    "RateLimited",
    "BackendUnavailable",
    "RequestTimeout",
    "ToolExecutionError",
    "ConfigError",
]

# JSON-RPC 2.0 standard codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# MCP: resources/read of an unknown URI (specification 2025-11-25, "Error Handling").
RESOURCE_NOT_FOUND = -32002
# Gateway-defined codes in the implementation-defined server-error range (-32000..-32099).
ACCESS_DENIED = -32003
BACKEND_UNAVAILABLE = -32004
REQUEST_TIMEOUT = -32001
RATE_LIMITED = -32029
REQUEST_CANCELLED = -32800


class GatewayError(Exception):
    """Base of every error the gateway raises on purpose."""


class ProtocolError(GatewayError):
    """An error sent to the client as a JSON-RPC error object."""

    code: int = INTERNAL_ERROR

    def __init__(self, message: str, data: Any = None, *, code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        if code is not None:
            self.code = code

    def to_error(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member for this exception."""
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class ParseError(ProtocolError):
    code = PARSE_ERROR


class InvalidRequest(ProtocolError):
    code = INVALID_REQUEST


class MethodNotFound(ProtocolError):
    code = METHOD_NOT_FOUND


class InvalidParams(ProtocolError):
    code = INVALID_PARAMS


class InternalError(ProtocolError):
    code = INTERNAL_ERROR


class ResourceNotFound(ProtocolError):
    """resources/read (or subscribe) of a URI no connector serves."""

    code = RESOURCE_NOT_FOUND

    def __init__(self, uri: str) -> None:
        super().__init__(f"Resource not found: {uri}", {"uri": uri})


class AccessDenied(ProtocolError):
    """The caller's principal may not use this target (policy decision, always audited)."""

    code = ACCESS_DENIED


class RateLimited(ProtocolError):
    """A rate limit refused the call; ``data.retryAfterMs`` tells the client when to retry."""

    code = RATE_LIMITED

    def __init__(self, message: str, retry_after_ms: int, scope: str = "") -> None:
        data: dict[str, Any] = {"retryAfterMs": int(retry_after_ms)}
        if scope:
            data["scope"] = scope
        super().__init__(message, data)
        self.retry_after_ms = int(retry_after_ms)


class BackendUnavailable(ProtocolError):
    """The connector that owns the target is down; the call failed fast without waiting."""

    code = BACKEND_UNAVAILABLE


class RequestTimeout(ProtocolError):
    code = REQUEST_TIMEOUT


class ToolExecutionError(GatewayError):
    """A backend failed while running a tool: becomes ``{"isError": true}`` with this message.

    ``status`` is the backend's own status (an HTTP status, an SQLSTATE, ...) for audit and
    metrics; it is never shown to the client except inside ``message`` where the connector chose
    to put it.
    """

    def __init__(self, message: str, *, status: str | int | None = None,
                 structured: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.structured = structured

    def to_result(self) -> dict[str, Any]:
        result: dict[str, Any] = {"content": [{"type": "text", "text": self.message}], "isError": True}
        if self.structured is not None:
            result["structuredContent"] = self.structured
        return result


class ConfigError(GatewayError):
    """Invalid configuration; ``path`` is like ``connectors[2].spec`` and ``line`` is 1-based."""

    def __init__(self, message: str, path: str = "", line: int | None = None) -> None:
        self.path = path
        self.line = line
        where = path or "config"
        if line is not None:
            where += f" (line {line})"
        super().__init__(f"{where}: {message}")
        self.message = message
