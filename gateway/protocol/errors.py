"""The gateway's exception tree, the JSON-RPC error codes it maps to, and :func:`map_exceptions`.

Every failure that can reach a client is one of these classes. A connector translates the
exceptions of the libraries it calls (HTTP clients, database drivers, its own pure core) into this
tree once, at its edge. :func:`map_exceptions` builds that edge: a mapping from third-party
exception types to gateway exceptions, entered as a context manager around each backend call (the
OpenAPI and SQL connectors; the MCP connector's edge is its ``UpstreamSession``). Exceptions become
JSON-RPC errors in exactly one place, :func:`gateway.protocol.jsonrpc.error_from_exception`.

Three families:

* :class:`ProtocolError` and its subclasses become JSON-RPC ``error`` objects.
* :class:`ToolExecutionError` is raised by a connector whose backend failed while running a tool;
  ``tools/call`` turns it into a result with ``isError: true`` and a message a model can act on.
* :class:`ConfigError`: invalid configuration (a connector that cannot start, a bad config file).

Anything else that escapes a connector is a bug; the client sees only ``Internal error (<type>)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeAlias

from .versions import LEGACY_VERSIONS, MODERN_VERSIONS

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
    "HEADER_MISMATCH",
    "MISSING_CLIENT_CAPABILITY",
    "UNSUPPORTED_PROTOCOL_VERSION",
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
    "HeaderMismatch",
    "MissingRequiredClientCapability",
    "UnsupportedProtocolVersion",
    "ToolExecutionError",
    "ConfigError",
    "ExceptionTarget",
    "ExceptionMap",
    "map_exceptions",
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
# MCP 2026-07-28 ("Error Codes"): -32020..-32099 is reserved for codes the specification defines.
# How each revision puts these codes on the wire (remapping what it forbids) is
# :meth:`gateway.protocol.revisions.Revision.error_code`.
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022


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
    """The connector that owns the target is down; the call failed fast without waiting.

    One vocabulary for every method (tools, resources, prompts, completions): build it with
    :meth:`connector_down` wherever a target's connector is known to be down, so a client sees
    the same code, message shape and ``data.connector`` whichever kind of target it asked for
    ("not found" is only for what no connector serves, or what an upstream says it lacks).
    """

    code = BACKEND_UNAVAILABLE

    @classmethod
    def connector_down(cls, connector: str, detail: str = "", target: str = "") -> BackendUnavailable:
        """``target`` (like ``tool search`` or ``resource mem://x``) is unavailable because its
        ``connector`` is down (``detail``: its health detail)."""
        what = f"The {target} is unavailable: connector {connector} is down" if target else \
            f"Connector {connector} is unavailable: it is down"
        return cls(what + (f" ({detail})" if detail else ""), {"connector": connector})


class RequestTimeout(ProtocolError):
    code = REQUEST_TIMEOUT


class HeaderMismatch(ProtocolError):
    """Streamable HTTP (2026-07-28): a request metadata header is missing, malformed, or does not
    match the body (HTTP 400). The message names the header; it starts with "Header mismatch:"."""

    code = HEADER_MISMATCH


class MissingRequiredClientCapability(ProtocolError):
    """Serving the request needs a client capability its ``_meta`` did not declare (HTTP 400);
    ``data.requiredCapabilities`` lists them, shaped like ``ClientCapabilities``."""

    code = MISSING_CLIENT_CAPABILITY

    def __init__(self, required: Mapping[str, Any], message: str | None = None) -> None:
        caps = {name: dict(value) if isinstance(value, Mapping) else {} for name, value in required.items()}
        super().__init__(message or f"Missing required client capability: {', '.join(caps)}",
                         {"requiredCapabilities": caps})
        self.required = caps


_MAX_ECHO = 100  # a client-chosen string echoed back is cut, so an error stays small


class UnsupportedProtocolVersion(ProtocolError):
    """A request's protocol version is unknown, malformed, or not one this path serves (HTTP 400).

    ``data`` is ``{"supported": [...], "requested": ...}`` as the schema's
    ``UnsupportedProtocolVersionError`` defines it; ``supported`` defaults to every revision the
    gateway speaks, newest first (as in the specification's example). ``requested`` is ``None``
    when the request carried no usable version string; ``data`` then omits it.
    """

    code = UNSUPPORTED_PROTOCOL_VERSION

    def __init__(self, requested: str | None, supported: Sequence[str] | None = None) -> None:
        versions = list(supported) if supported is not None else [*MODERN_VERSIONS[::-1], *LEGACY_VERSIONS[::-1]]
        data: dict[str, Any] = {"supported": versions}
        if requested is not None:
            requested = requested[:_MAX_ECHO]
            data["requested"] = requested
        super().__init__("Unsupported protocol version", data)
        self.requested = requested
        self.supported = tuple(versions)


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

    @classmethod
    def timed_out(cls, message: str) -> ToolExecutionError:
        """A tool whose backend did not answer in time, whichever layer's clock ran out first
        (the connector's ``timeout_s`` or the request deadline): always this one shape, a result
        with ``isError`` (status ``timeout``), never a JSON-RPC ``-32001`` for ``tools/call``."""
        return cls(message, status="timeout")

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


# -- the edge: third-party exceptions -> this tree ------------------------------------------------

ExceptionTarget: TypeAlias = "type[ProtocolError] | Callable[[Exception], BaseException]"
"""What a third-party exception type maps to: a :class:`ProtocolError` subclass (constructed with
the exception's text as its message: use it only where that text is fit for a client), or a
callable that builds the replacement from the exception (any message, any gateway exception; it
may return the exception itself to let it pass unchanged)."""


class ExceptionMap:
    """The context manager :func:`map_exceptions` returns; also :meth:`translate` for the
    ``except`` clauses that are control flow (retries, monitors) and must classify without raising.

    Stateless, so one instance can be built at import time and entered by any number of calls at
    once (``with _EDGE: ...``); building one per call is cheap too, when the messages need the
    call's own context (an operation name, a URL).
    """

    __slots__ = ("_pairs",)

    def __init__(self, mapping: Mapping[type[Exception], ExceptionTarget]) -> None:
        self._pairs: tuple[tuple[type[Exception], ExceptionTarget], ...] = tuple(mapping.items())

    def translate(self, exc: BaseException) -> BaseException:
        """The gateway exception for ``exc``, or ``exc`` itself when the mapping does not apply:
        no key matches, ``exc`` is already a :class:`GatewayError`, or it is not an
        :class:`Exception` at all (``CancelledError``, ``KeyboardInterrupt``, ``SystemExit``)."""
        if not isinstance(exc, Exception) or isinstance(exc, GatewayError):
            return exc
        for source, target in self._pairs:
            if isinstance(exc, source):
                if isinstance(target, type):
                    error: ProtocolError = target(str(exc) or type(exc).__name__)
                    return error
                return target(exc)
        return exc

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is None:
            return
        mapped = self.translate(exc)
        if mapped is not exc:
            # from None: logs and audit get the gateway's message (redacted where the connector
            # must redact), never the backend's chained traceback with its DSNs, SQL text or
            # credentials. A debugger still finds the original as ``mapped.__context__``.
            raise mapped from None
        # Returning None re-raises exc unchanged.


def map_exceptions(mapping: Mapping[type[Exception], ExceptionTarget]) -> ExceptionMap:
    """Re-raise third-party exceptions leaving the block as the gateway exceptions they map to.

    In the style of httpcore's ``_exceptions.map_exceptions``::

        _EDGE = map_exceptions({
            aiohttp.ClientConnectionError: lambda exc: ToolExecutionError(f"unreachable: {exc}"),
            TimeoutError: RequestTimeout,
        })

        with _EDGE:
            await session.get(url)

    The first key (in the mapping's order) that the exception is an instance of wins, so list
    subclasses before their bases. The replacement is raised ``from None``, consistently with the
    rest of the gateway: backend internals stay out of tracebacks in logs. Exceptions no key
    matches propagate unchanged, and so do those already in the gateway's tree
    (:class:`ProtocolError`, :class:`ToolExecutionError`, :class:`ConfigError`: translated once,
    never twice), and so does anything that is not an ``Exception``: ``asyncio.CancelledError``
    first among them, since a cancellation must always reach the task being cancelled.
    """
    return ExceptionMap(mapping)
