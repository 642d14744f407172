"""Speaking 2026-07-28 to an upstream, one request at a time (pure: no I/O here).

A modern upstream has no session and no ``initialize``: every request says who the gateway is.
:class:`ModernStamp` is the :class:`~connectors.mcp.client.Stamper` a modern
:class:`~connectors.mcp.client.UpstreamSession` applies to each request it sends:

* ``params._meta`` gets the per-request fields (:func:`~gateway.protocol.meta.request_meta_fields`):
  the protocol version, the client capabilities, the gateway's ``clientInfo``, and the downstream
  caller's log level when it asked for logs (none otherwise: a modern server then sends no
  ``notifications/message`` for the request). A forwarded call declares its caller's capabilities
  (only the caller can answer an input request, and a call needing one it lacks must be refused
  upstream with -32021); a request of the gateway's own (listings, discover, listen) declares what
  the gateway's ``initialize`` declares to a legacy upstream. Reserved keys of the downstream hop
  never travel upstream (:func:`connectors.mcp.mapping.outgoing_meta` drops them);
* on Streamable HTTP, the request metadata headers (``MCP-Protocol-Version``, ``Mcp-Method``,
  ``Mcp-Name``, and ``Mcp-Param-*`` for the called tool's ``x-mcp-header`` parameters) come from
  :func:`~gateway.protocol.headers.expected_headers`.

Also here: which upstream tools may be listed at all (:func:`usable_tools`: a tool whose
``x-mcp-header`` annotations are invalid is left out, and the connector logs and reports it), what of a
modern listing page must not become part of a stored definition (:func:`definitions`), what a
retry of a multi round-trip request carries upstream (:func:`with_input_responses`), and the
caller's log level (:func:`caller_log_level`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from connectors.base import LeftOut
from gateway.protocol.errors import UNSUPPORTED_PROTOCOL_VERSION, ProtocolError
from gateway.protocol.headers import expected_headers, x_mcp_header_params, x_mcp_header_problems
from gateway.protocol.meta import LOG_LEVELS, TASKS_EXTENSION, request_meta_fields
from gateway.protocol.results import MODERN_ONLY_FIELDS
from gateway.protocol.versions import LATEST_VERSION, is_modern

from .client import Hints
from .mapping import RESERVED_META

__all__ = ["ModernStamp", "MRTR_METHODS", "modern_capabilities", "usable_tools", "has_header_params", "definitions",
           "with_input_responses", "caller_log_level", "caller_capabilities", "supported_versions", "hints"]

# The requests a modern server may answer with an InputRequiredResult (mrtr.mdx).
MRTR_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})


def modern_capabilities(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """``capabilities`` as a 2026-07-28 request declares them: ``roots.listChanged`` names a
    notification that revision removed, so it is dropped."""
    out = dict(capabilities)
    roots = out.get("roots")
    if roots is not None and isinstance(roots, Mapping) and "listChanged" in roots:  # None: no ABC check
        out["roots"] = {k: v for k, v in roots.items() if k != "listChanged"}
    return out


@dataclass(frozen=True, slots=True)
class ModernStamp:
    """Adds the 2026-07-28 request fields to a request (see the module doc)."""

    capabilities: Mapping[str, Any]
    client_info: Mapping[str, Any]
    http: bool
    version: str = LATEST_VERSION

    def __call__(self, method: str, params: dict[str, Any] | None,
                 hints: Hints | None) -> tuple[dict[str, Any], dict[str, str] | None]:
        out = dict(params) if params else {}
        meta = out.get("_meta")
        meta = {k: v for k, v in meta.items() if k not in RESERVED_META} if isinstance(meta, dict) else {}
        caps = self.capabilities if hints is None or hints.capabilities is None \
            else modern_capabilities(hints.capabilities)
        meta.update(request_meta_fields(self.version, caps, self.client_info,
                                        hints.log_level if hints is not None else None))
        out["_meta"] = meta
        if not self.http:
            return out, None
        schema = hints.input_schema if hints is not None else None
        return out, expected_headers({"method": method, "params": out}, schema)


def usable_tools(items: list[Any], upstream: str) -> tuple[list[Any], list[LeftOut]]:
    """``items`` without the tools whose ``x-mcp-header`` annotations are invalid (a client
    must not list them: streamable-http.mdx, "Schema Extension"), and those left out, each with
    its reasons (the connector logs and reports them)."""
    out: list[Any] = []
    left: list[LeftOut] = []
    for item in items:
        if isinstance(item, dict):
            schema = item.get("inputSchema")
            problems = x_mcp_header_problems(schema if isinstance(schema, Mapping) else None)
            if problems:
                left.append(LeftOut("tools", str(item.get("name")), "x-mcp-header",
                                    "invalid x-mcp-header annotation: " + "; ".join(problems)))
                continue
        out.append(item)
    return out, left


def has_header_params(input_schema: object) -> bool:
    """Whether a tools/call of a tool with this inputSchema may carry ``Mcp-Param-*`` headers
    (the connector keeps only those schemas: most tools need no walk of theirs per call)."""
    return isinstance(input_schema, Mapping) and bool(x_mcp_header_params(input_schema))


def definitions(items: list[Any]) -> list[Any]:
    """Listing items as stored definitions: result-level fields of the revision (``resultType``,
    ``ttlMs``, ``cacheScope``) never belong to one; the gateway shapes its own results."""
    return [{k: v for k, v in item.items() if k not in MODERN_ONLY_FIELDS}
            if isinstance(item, dict) and any(f in item for f in MODERN_ONLY_FIELDS) else item
            for item in items]


def with_input_responses(method: str, params: dict[str, Any], caller: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` of a retried multi round-trip request: the caller's ``inputResponses`` and the
    upstream's own ``requestState`` (unsealed by the gateway) go upstream unchanged."""
    if method in MRTR_METHODS:
        for key in ("inputResponses", "requestState"):
            if key in caller:
                params[key] = caller[key]
    return params


def hints(method: str, params: Mapping[str, Any], session: object, header_schemas: Mapping[str, Any]) -> Hints:
    """What a forwarded request of the caller ``session`` is stamped with: its log level, the
    called tool's inputSchema when it has ``x-mcp-header`` parameters (``header_schemas``), and
    the caller's capabilities: only the caller can answer what the upstream asks (the gateway
    passes an input request on, or asks it over its session), so the upstream must not ask for
    more, and must refuse (-32021) a call that needs what the caller lacks."""
    schema = header_schemas.get(params.get("name", "")) if method == "tools/call" else None
    return Hints(caller_log_level(session), schema, caller_capabilities(session))


def caller_capabilities(session: object) -> dict[str, Any]:
    """The capabilities a forwarded request declares for its caller: the caller's own, but the tasks
    extension only for a 2026-07-28 caller (only there is an extension negotiated per request, and
    only there can the gateway hand a task back: gateway.tasks)."""
    caps = dict(getattr(session, "client_capabilities", None) or {})
    extensions = caps.get("extensions")
    version = getattr(session, "protocol_version", None)
    if extensions is not None and isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions \
            and not (isinstance(version, str) and is_modern(version)):
        rest = {k: v for k, v in extensions.items() if k != TASKS_EXTENSION}
        if rest:
            caps["extensions"] = rest
        else:
            del caps["extensions"]
    return caps


def caller_log_level(session: object) -> str | None:
    """The level the downstream caller asked logs at: a legacy session's current level, a modern
    request's ``logLevel``; None when it asked for none."""
    level = getattr(session, "log_level", None)
    return level if isinstance(level, str) and level in LOG_LEVELS else None


def supported_versions(exc: ProtocolError) -> tuple[str, ...] | None:
    """The versions an ``UnsupportedProtocolVersion`` error (-32022) names, or None when ``exc``
    is not one or names none."""
    if exc.code != UNSUPPORTED_PROTOCOL_VERSION or not isinstance(exc.data, dict):
        return None
    supported = exc.data.get("supported")
    if not isinstance(supported, list):
        return None
    return tuple(v for v in supported if isinstance(v, str))
