"""The mechanics of shaping a result for one protocol revision; which revision gets what is decided
by :mod:`gateway.protocol.revisions`, the only caller.

Connectors and upstreams produce results at the newest legacy revision (2025-11-25). A result is
shaped at the edge only, and never mutated: a new dict is returned when something changes, the
same object when nothing does (the hot path for clients at 2025-11-25). Fields the gateway does
not know pass through (a gateway is a proxy: ``_meta``, ``annotations``, MCP Apps metadata).

* :func:`legacy_result` removes or downgrades what an older revision does not define (tool fields,
  ``structuredContent``, ``resource_link``/``audio`` content) and the modern-only top-level fields
  (``resultType``, ``ttlMs``, ``cacheScope``), which no legacy revision defines.
* :func:`modern_result` adds ``resultType`` to every result, the caching hints (``ttlMs``,
  ``cacheScope``) to complete results of cacheable methods and only to those, and the server's
  identity under ``_meta["io.modelcontextprotocol/serverInfo"]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .meta import SERVER_INFO

__all__ = ["CacheHint", "DEFAULT_CACHE_HINT", "CACHEABLE_METHODS", "MODERN_ONLY_FIELDS",
           "legacy_result", "modern_result", "strip_tool_fields"]

# Specification 2026-07-28, "Caching": results of these methods carry ttlMs and cacheScope.
CACHEABLE_METHODS = frozenset({"server/discover", "tools/list", "prompts/list", "resources/list",
                               "resources/templates/list", "resources/read"})
MODERN_ONLY_FIELDS = ("resultType", "ttlMs", "cacheScope")
# Results that are a Task of the tasks extension (besides a CreateTaskResult, resultType "task").
TASK_SHAPED_METHODS = frozenset({"tasks/get"})

# Tool definition fields and the feature (see revisions.FEATURES) a revision needs to keep them.
_TOOL_FIELDS = (("title", "title"), ("outputSchema", "outputSchema"), ("icons", "icons"),
                ("annotations", "annotations"), ("execution", "tasks"))


@dataclass(frozen=True, slots=True)
class CacheHint:
    """Caching hints for a cacheable result: freshness in milliseconds (>= 0) and who may share it."""

    ttl_ms: int
    scope: Literal["public", "private"]

    def __post_init__(self) -> None:
        if isinstance(self.ttl_ms, bool) or not isinstance(self.ttl_ms, int) or self.ttl_ms < 0:
            raise ValueError(f"CacheHint.ttl_ms must be an integer >= 0, not {self.ttl_ms!r}")
        if self.scope not in ("public", "private"):
            raise ValueError(f"CacheHint.scope must be 'public' or 'private', not {self.scope!r}")


# When the caller gives none: immediately stale and never shared across authorization contexts,
# the one hint that is right whatever the gateway's access policy does with the listing.
DEFAULT_CACHE_HINT = CacheHint(0, "private")


def strip_tool_fields(result: dict[str, Any], supports: Callable[[str], bool]) -> dict[str, Any]:
    """``tools/list``: drop tool fields whose feature the revision lacks (same object if none)."""
    strip = [name for name, feature in _TOOL_FIELDS if not supports(feature)]
    tools = result.get("tools")
    if not strip or not isinstance(tools, list):
        return result
    if not any(isinstance(t, dict) and any(f in t for f in strip) for t in tools):
        return result
    shaped = [{k: v for k, v in t.items() if k not in strip} if isinstance(t, dict) else t for t in tools]
    return {**result, "tools": shaped}


def _downgrade_content(items: list[Any], supports: Callable[[str], bool]) -> list[Any]:
    out = []
    for item in items:
        if isinstance(item, dict):
            kind = item.get("type")
            if kind == "resource_link" and not supports("resource_link"):
                item = {"type": "text", "text": f"Resource: {item.get('uri', '')}"}
            elif kind == "audio" and not supports("audio"):
                item = {"type": "text", "text": "[audio content omitted: not supported by this protocol version]"}
        out.append(item)
    return out


def legacy_result(method: str, result: dict[str, Any], supports: Callable[[str], bool]) -> dict[str, Any]:
    """``result`` fit for a legacy revision whose features are ``supports``."""
    if any(f in result for f in MODERN_ONLY_FIELDS):
        result = {k: v for k, v in result.items() if k not in MODERN_ONLY_FIELDS}
    if method == "tools/list":
        return strip_tool_fields(result, supports)
    content_ok = supports("resource_link") and supports("audio")
    if method == "tools/call":
        if not supports("structuredContent") and "structuredContent" in result:
            result = {k: v for k, v in result.items() if k != "structuredContent"}
        if not content_ok and isinstance(result.get("content"), list):
            result = {**result, "content": _downgrade_content(result["content"], supports)}
        return result
    if method == "prompts/get" and not content_ok and isinstance(result.get("messages"), list):
        msgs = []
        for msg in result["messages"]:
            if isinstance(msg, dict) and isinstance(msg.get("content"), dict):
                msg = {**msg, "content": _downgrade_content([msg["content"]], supports)[0]}
            msgs.append(msg)
        return {**result, "messages": msgs}
    return result


def modern_result(method: str, result: dict[str, Any], supports: Callable[[str], bool], *,
                  cache: CacheHint | None, server_info: Mapping[str, Any] | None) -> dict[str, Any]:
    """``result`` fit for a modern revision; always a new dict (``resultType`` is always added).

    ``resultType`` is kept when the result has one (``"input_required"``), else ``"complete"``.
    Caching hints go on complete results of :data:`CACHEABLE_METHODS` (``cache``, or
    :data:`DEFAULT_CACHE_HINT`), replacing any an upstream sent, and are removed from every other
    result (interim results "carry no caching hints") but a Task (``resultType: "task"``, a
    ``tasks/get`` result), whose ``ttlMs`` is the task's lifetime. ``server_info`` replaces any
    ``_meta[SERVER_INFO]``; without it ``_meta`` passes through untouched.
    """
    if method == "tools/list":
        result = strip_tool_fields(result, supports)
    out = dict(result)
    kind = out.get("resultType")
    if not isinstance(kind, str) or not kind:
        kind = out["resultType"] = "complete"
    if kind == "complete" and method in CACHEABLE_METHODS:
        hint = cache or DEFAULT_CACHE_HINT
        out["ttlMs"] = hint.ttl_ms
        out["cacheScope"] = hint.scope
    elif kind == "task" or method in TASK_SHAPED_METHODS:
        out.pop("cacheScope", None)  # a Task's ttlMs is its lifetime (tasks extension), not a cache hint
    else:
        out.pop("ttlMs", None)
        out.pop("cacheScope", None)
    if server_info is not None:
        meta = out.get("_meta")
        out["_meta"] = {**(meta if isinstance(meta, dict) else {}), SERVER_INFO: dict(server_info)}
    return out
