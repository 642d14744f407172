"""The two tools a ``discovery: search`` endpoint lists instead of its catalog, and the result of
``find_tools``.

``find_tools {query, limit?}`` answers ``structuredContent: {"tools": [Tool, ...]}`` (best first,
each the full MCP Tool object the caller may call directly) and a short text of the same;
``call_tool {name, arguments}`` calls a tool exactly as a direct ``tools/call`` would.

This module imports nothing of the ranker (it defines the bounds the index applies): an endpoint
view names the two tools without loading the index, its stemmer and vocabulary, which only a
``discovery: search`` endpoint needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class Named(Protocol):
    """What :func:`find_result` reads of a hit (``index.SearchHit`` is one; naming it here would
    make an import cycle, this module being what the index takes its bounds from)."""

    @property
    def name(self) -> str: ...

__all__ = ["FIND_TOOLS", "CALL_TOOL", "DEFAULT_LIMIT", "MAX_LIMIT", "MAX_QUERY", "find_result"]

MAX_LIMIT = 50
MAX_QUERY = 1000
DEFAULT_LIMIT = 8
_TEXT_DESC = 100  # characters of each description in the text summary

FIND_TOOLS: dict[str, Any] = {
    "name": "find_tools",
    "title": "Find tools",
    "description": ("Search this server's tools by what you want to do, in plain words (for example "
                    "\"list open pull requests\" or \"restart the failed build\"). Returns the best "
                    "matching tools, best first, with their input schemas; call one with call_tool "
                    "or directly by its name."),
    "inputSchema": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY,
                      "description": "What you want to do, in plain words."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT,
                      "description": "How many tools to return at most."},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    "outputSchema": {
        "type": "object",
        "properties": {"tools": {"type": "array", "items": {"type": "object"}}},
        "required": ["tools"],
    },
    "annotations": {"title": "Find tools", "readOnlyHint": True, "idempotentHint": True,
                    "openWorldHint": False},
}

CALL_TOOL: dict[str, Any] = {
    "name": "call_tool",
    "title": "Call a tool",
    "description": ("Call one of the tools find_tools returned, by its name, with its arguments "
                    "(an object matching that tool's inputSchema)."),
    "inputSchema": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "description": "The tool's name."},
            "arguments": {"type": "object", "description": "The tool's arguments."},
        },
        "required": ["name"],
        "additionalProperties": False,
    },
    "annotations": {"title": "Call a tool", "openWorldHint": True},
}


def find_result(hits: Sequence[Named], tools: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """The ``CallToolResult`` of ``find_tools`` for *hits* (names looked up in *tools*)."""
    found = [tools[h.name] for h in hits if h.name in tools]
    if found:
        lines = [f"{len(found)} tool(s), best first:"]
        for tool in found:
            desc = " ".join(str(tool.get("description") or tool.get("title") or "").split())
            lines.append(f"- {tool['name']}: {desc[:_TEXT_DESC]}{'…' if len(desc) > _TEXT_DESC else ''}")
        text = "\n".join(lines)
    else:
        text = "No tool matches; try other words."
    return {"content": [{"type": "text", "text": text}], "structuredContent": {"tools": found}}
