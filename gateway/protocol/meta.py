"""The reserved ``_meta`` keys (2026-07-28) and the per-request protocol fields of a modern request.

A modern request says who it is in ``params._meta`` (specification 2026-07-28, "General fields:
``_meta``"): ``protocolVersion`` and ``clientCapabilities`` are required, ``clientInfo`` and
``logLevel`` optional. :func:`parse_request_meta` reads them into a :class:`RequestMeta`:

* ``None`` when the request declares no protocol version: no ``_meta`` object, or no
  ``protocolVersion`` key in it (a legacy request: it belongs to an ``initialize``-negotiated
  session, whatever else its ``_meta`` carries);
* :class:`UnsupportedProtocolVersion` (-32022) for a version that is not a string or not a modern
  revision the gateway speaks. A legacy version there is unsupported too: a version in ``_meta``
  asks to be served statelessly, which no legacy revision defines (its client must ``initialize``);
* :class:`InvalidParams` (-32602) for a missing or malformed ``clientCapabilities``, a malformed
  ``clientInfo`` (an ``Implementation``: string ``name`` and ``version``) or an unknown ``logLevel``.

:func:`require_request_meta` is the stateless path's variant: no modern version at all is an error
there. Pure: plain values in, plain values out; the returned dicts are copies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidParams, MissingRequiredClientCapability, UnsupportedProtocolVersion
from .versions import MODERN_VERSIONS, is_modern

__all__ = [
    "TASKS_EXTENSION",
    "PROTOCOL_VERSION",
    "CLIENT_CAPABILITIES",
    "CLIENT_INFO",
    "SERVER_INFO",
    "LOG_LEVEL",
    "SUBSCRIPTION_ID",
    "PROGRESS_TOKEN",
    "TRACEPARENT",
    "TRACESTATE",
    "BAGGAGE",
    "LOG_LEVELS",
    "INPUT_CAPABILITY",
    "log_admitted",
    "RequestMeta",
    "parse_request_meta",
    "require_request_meta",
    "request_meta_fields",
]

PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL = "io.modelcontextprotocol/logLevel"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"  # in results
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"  # on subscriptions/listen notifications
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"  # the tasks extension's id in capabilities.extensions
PROGRESS_TOKEN = "progressToken"
TRACEPARENT = "traceparent"  # OpenTelemetry (W3C Trace Context / Baggage): reserved, unprefixed
TRACESTATE = "tracestate"
BAGGAGE = "baggage"

LOG_LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_LEVEL_RANK = {name: i for i, name in enumerate(LOG_LEVELS)}
# The client capability each server→client request needs (both eras).
INPUT_CAPABILITY: dict[str, str] = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation",
                                    "roots/list": "roots"}


def log_admitted(params: Mapping[str, Any] | None, threshold: str) -> bool:
    """Whether a ``notifications/message`` with ``params`` is at or above ``threshold``."""
    level = str(params.get("level")) if params is not None else ""
    return _LEVEL_RANK.get(level, 0) >= _LEVEL_RANK.get(threshold, 0)

# ClientCapabilities members the schema defines as objects; others are passed through unchecked.
_OBJECT_CAPABILITIES = ("experimental", "roots", "sampling", "elicitation", "extensions")


@dataclass(frozen=True, slots=True)
class RequestMeta:
    """The per-request protocol fields of one modern request."""

    version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any]  # {} when the client did not identify itself (it only SHOULD)
    log_level: str | None  # None: the server MUST NOT send notifications/message for this request

    def require(self, *capabilities: str) -> None:
        """Raise :class:`MissingRequiredClientCapability` naming every capability in
        ``capabilities`` (top-level ``ClientCapabilities`` keys) the request did not declare."""
        missing = [name for name in capabilities if name not in self.client_capabilities]
        if missing:
            raise MissingRequiredClientCapability({name: {} for name in missing})


def _is_object(value: object) -> bool:
    # A decoded JSON object is a dict: checked first, as the ABC check costs far more.
    return isinstance(value, dict) or isinstance(value, Mapping)


def _meta_of(params: Mapping[str, Any]) -> Mapping[str, Any] | None:
    meta = params.get("_meta")
    return meta if _is_object(meta) else None


def parse_request_meta(params: Mapping[str, Any]) -> RequestMeta | None:
    """The request's protocol fields, or ``None`` for a legacy request (see the module doc)."""
    meta = _meta_of(params)
    if meta is None or PROTOCOL_VERSION not in meta:
        return None
    return _parse(meta, meta[PROTOCOL_VERSION])


def require_request_meta(params: Mapping[str, Any]) -> RequestMeta:
    """Like :func:`parse_request_meta` for a request that must be modern: a missing version is
    :class:`InvalidParams` (a required field) instead of ``None``."""
    meta = _meta_of(params)
    if meta is None or PROTOCOL_VERSION not in meta:
        raise InvalidParams(f"Missing required _meta field {PROTOCOL_VERSION}")
    return _parse(meta, meta[PROTOCOL_VERSION])


def _parse(meta: Mapping[str, Any], version: object) -> RequestMeta:
    # The versions a request's _meta may name are the modern ones: older revisions are reached
    # through initialize, so the error lists only these (as server/discover does).
    if not isinstance(version, str):
        raise UnsupportedProtocolVersion(None, MODERN_VERSIONS)
    if not is_modern(version):
        raise UnsupportedProtocolVersion(version, MODERN_VERSIONS)
    if CLIENT_CAPABILITIES not in meta:
        raise InvalidParams(f"Missing required _meta field {CLIENT_CAPABILITIES}")
    caps = meta[CLIENT_CAPABILITIES]
    if not _is_object(caps):
        raise InvalidParams(f"_meta {CLIENT_CAPABILITIES} must be an object")
    if caps:
        for name in _OBJECT_CAPABILITIES:
            if name in caps and not _is_object(caps[name]):
                raise InvalidParams(f"_meta {CLIENT_CAPABILITIES}.{name} must be an object")
    info = meta.get(CLIENT_INFO)
    if info is not None:
        if not _is_object(info):
            raise InvalidParams(f"_meta {CLIENT_INFO} must be an object")
        for key in ("name", "version"):
            if not isinstance(info.get(key), str):
                raise InvalidParams(f"_meta {CLIENT_INFO}.{key} must be a string")
    level = meta.get(LOG_LEVEL)
    if level is not None and (not isinstance(level, str) or level not in LOG_LEVELS):
        raise InvalidParams(f"_meta {LOG_LEVEL} must be one of {', '.join(LOG_LEVELS)}")
    return RequestMeta(version, dict(caps), dict(info) if info is not None else {}, level)


def request_meta_fields(version: str, capabilities: Mapping[str, Any], client_info: Mapping[str, Any] | None = None,
                        log_level: str | None = None) -> dict[str, Any]:
    """The ``_meta`` entries a client puts on a modern request (for the gateway as a client)."""
    fields: dict[str, Any] = {PROTOCOL_VERSION: version, CLIENT_CAPABILITIES: dict(capabilities)}
    if client_info is not None:
        fields[CLIENT_INFO] = dict(client_info)
    if log_level is not None:
        fields[LOG_LEVEL] = log_level
    return fields
