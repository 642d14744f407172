"""Shaping results for the negotiated protocol revision, at the edge only.

Connectors and upstreams produce results at the newest revision; a client that negotiated an older
one gets fields it does not know removed or downgraded. Everything else passes through unchanged
(a gateway is a proxy: ``_meta``, ``annotations`` and MCP Apps metadata are kept).
"""

from __future__ import annotations

from typing import Any

from .versions import LATEST_VERSION, supports

__all__ = ["shape_result"]

_TOOL_FIELDS_2025_06 = ("outputSchema", "title")


def _downgrade_content(items: list[Any], version: str) -> list[Any]:
    out = []
    for item in items:
        if isinstance(item, dict):
            kind = item.get("type")
            if kind == "resource_link" and not supports(version, "resource_link"):
                item = {"type": "text", "text": f"Resource: {item.get('uri', '')}"}
            elif kind == "audio" and not supports(version, "audio"):
                item = {"type": "text", "text": "[audio content omitted: not supported by this protocol version]"}
        out.append(item)
    return out


def shape_result(method: str, result: dict[str, Any], version: str) -> dict[str, Any]:
    """Return ``result`` fit for ``version``; the same object when nothing needs to change."""
    if version == LATEST_VERSION or not version:
        return result
    if method == "tools/list":
        strip = [f for f in _TOOL_FIELDS_2025_06 if not supports(version, f)]
        if not supports(version, "icons"):
            strip.append("icons")
        if not supports(version, "annotations"):
            strip.append("annotations")
        if strip:
            result = dict(result)
            result["tools"] = [{k: v for k, v in t.items() if k not in strip} for t in result["tools"]]
        return result
    if method == "tools/call":
        if not supports(version, "structuredContent") and "structuredContent" in result:
            result = {k: v for k, v in result.items() if k != "structuredContent"}
        if isinstance(result.get("content"), list):
            result = dict(result)
            result["content"] = _downgrade_content(result["content"], version)
        return result
    if method == "prompts/get" and isinstance(result.get("messages"), list):
        msgs = []
        for msg in result["messages"]:
            if isinstance(msg, dict) and isinstance(msg.get("content"), dict):
                content = _downgrade_content([msg["content"]], version)[0]
                msg = {**msg, "content": content}
            msgs.append(msg)
        return {**result, "messages": msgs}
    return result
