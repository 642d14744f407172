"""Pure mapping between upstream MCP wire data and the connector contract.

* listings → component specs (definitions pass through untouched: ``_meta``, ``icons``,
  ``annotations``, MCP Apps ``_meta.ui.resourceUri`` ...);
* RFC 6570 URI templates → regular expressions, so :meth:`MCPConnector.owns_uri` can claim URIs
  that only a template describes;
* the ``_meta`` of a forwarded request: the downstream progress token is replaced by the
  gateway's own upstream token (concurrent sessions may use the same token values), the
  2026-07-28 per-request fields of the downstream hop (protocol version, client capabilities and
  info, log level) are dropped (a modern upstream gets the gateway's own), every other key —
  ``traceparent`` included — passes through;
* the server capabilities an upstream declared → the connector's capability set;
* an upstream request → the name and attributes of its CLIENT span (MCP semantic conventions).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from connectors.base import PromptSpec, ResourceSpec, ResourceTemplateSpec, ToolSpec
from gateway.protocol.meta import CLIENT_CAPABILITIES, CLIENT_INFO, LOG_LEVEL, PROTOCOL_VERSION

__all__ = [
    "tool_specs",
    "resource_specs",
    "template_specs",
    "prompt_specs",
    "template_regex",
    "outgoing_meta",
    "capability_set",
    "ALL_CAPABILITIES",
    "RESERVED_META",
    "span_of",
]

ALL_CAPABILITIES = frozenset({"tools", "resources", "prompts", "completions", "subscribe"})
# _meta keys that describe one hop (2026-07-28): the caller's never travel upstream.
RESERVED_META = frozenset({PROTOCOL_VERSION, CLIENT_CAPABILITIES, CLIENT_INFO, LOG_LEVEL})


def _dicts(items: Iterable[Any], key: str) -> list[dict[str, Any]]:
    """Items that are objects with a string ``key``; anything else is an upstream bug we skip."""
    seen: set[str] = set()
    out = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get(key), str) and item[key] not in seen:
            seen.add(item[key])
            out.append(item)
    return out


def tool_specs(items: Iterable[Any]) -> tuple[ToolSpec, ...]:
    return tuple(ToolSpec(t["name"], t) for t in _dicts(items, "name"))


def resource_specs(items: Iterable[Any]) -> tuple[ResourceSpec, ...]:
    return tuple(ResourceSpec(r["uri"], str(r.get("name") or r["uri"]), r) for r in _dicts(items, "uri"))


def template_specs(items: Iterable[Any]) -> tuple[ResourceTemplateSpec, ...]:
    return tuple(ResourceTemplateSpec(t["uriTemplate"], str(t.get("name") or t["uriTemplate"]), t)
                 for t in _dicts(items, "uriTemplate"))


def prompt_specs(items: Iterable[Any]) -> tuple[PromptSpec, ...]:
    return tuple(PromptSpec(p["name"], p) for p in _dicts(items, "name"))


_EXPR = re.compile(r"\{([+#./;?&]?)([^}]*)\}")


def template_regex(uri_template: str) -> re.Pattern[str]:
    """A regex matching every URI the template can expand to (RFC 6570 levels 1-4, loosely).

    Simple ``{var}`` matches one path segment; reserved ``{+var}``/``{#var}`` match anything;
    ``{/var}``, ``{.var}``, ``{;var}``, ``{?var}`` and ``{&var}`` match their optional prefixed
    forms. Loose on purpose: the upstream decides; this only says the URI is worth asking it about.
    """
    parts: list[str] = []
    pos = 0
    for m in _EXPR.finditer(uri_template):
        parts.append(re.escape(uri_template[pos:m.start()]))
        op = m.group(1)
        if op == "+":
            parts.append(".*")
        elif op == "#":
            parts.append("(?:#.*)?")
        elif op == "/":
            parts.append("(?:/[^/?#]*)*")
        elif op == ".":
            parts.append(r"(?:\.[^/?#.]*)*")
        elif op == ";":
            parts.append("(?:;[^/?#]*)*")
        elif op in ("?", "&"):
            parts.append(r"(?:[?&][^#]*)?")
        else:
            parts.append("[^/?#]+")
        pos = m.end()
    parts.append(re.escape(uri_template[pos:]))
    return re.compile("".join(parts) + r"\Z", re.S)


def outgoing_meta(meta: Any, upstream_token: str | None, traceparent: str | None) -> dict[str, Any] | None:
    """The ``_meta`` to send upstream, or None when there is nothing to send."""
    if isinstance(meta, dict) and meta:
        out = {k: v for k, v in meta.items() if k != "progressToken" and k not in RESERVED_META}
    else:
        out = {}
    if upstream_token is not None:
        out["progressToken"] = upstream_token
    if traceparent and "traceparent" not in out:
        out["traceparent"] = traceparent
    return out or None


def capability_set(server_capabilities: dict[str, Any]) -> set[str]:
    caps: set[str] = set()
    for key in ("tools", "resources", "prompts", "completions"):
        if isinstance(server_capabilities.get(key), dict):
            caps.add(key)
    resources = server_capabilities.get("resources")
    if isinstance(resources, dict) and resources.get("subscribe"):
        caps.add("subscribe")
    return caps


def span_of(method: str, params: dict[str, Any], recording: bool) -> tuple[str, dict[str, Any] | None]:
    """Name and attributes of the CLIENT span of an upstream request, as the MCP semantic
    conventions ask (``tools/call {tool}``, ``mcp.method.name``, ``gen_ai.tool.name`` ...)."""
    if not recording:
        return method, None
    name = params.get("name") if method in ("tools/call", "prompts/get") else None
    attrs: dict[str, Any] = {"mcp.method.name": method}
    if method == "tools/call":
        attrs["gen_ai.tool.name"] = name
        attrs["gen_ai.operation.name"] = "execute_tool"
    elif method == "prompts/get":
        attrs["gen_ai.prompt.name"] = name
    elif isinstance(params.get("uri"), str):
        attrs["mcp.resource.uri"] = params["uri"]
    return (f"{method} {name}" if isinstance(name, str) else method), attrs
