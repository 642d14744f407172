#!/usr/bin/env python3
"""A tiny MCP server over stdio, standard library only: the quickstart's offline upstream.

The quickstart chains it with ``type: mcp, transport: stdio``, so ``make run`` shows an upstream
MCP server behind the gateway without network access or extra packages. Tools: ``echo``,
``word_count`` (with structured output) and ``countdown`` (sends progress notifications when the
caller asks for them). Not a template for real servers: use an MCP SDK for those.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

SUPPORTED = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

TOOLS = [
    {"name": "echo", "description": "Echo a text back",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "word_count", "description": "Count the words of a text",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
     "outputSchema": {"type": "object", "properties": {"words": {"type": "integer"}}, "required": ["words"]}},
    {"name": "countdown", "description": "Count down from n (at most 10), reporting progress",
     "inputSchema": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 10}},
                     "required": ["n"]}},
]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def call_tool(params: dict[str, Any]) -> dict[str, Any]:
    name, args = params.get("name"), params.get("arguments") or {}
    if name == "echo":
        return text(str(args.get("text", "")))
    if name == "word_count":
        words = len(str(args.get("text", "")).split())
        return {**text(f"{words} words"), "structuredContent": {"words": words}}
    if name == "countdown":
        n = max(1, min(10, int(args.get("n", 3))))
        token = (params.get("_meta") or {}).get("progressToken")
        for i in range(n):
            if token is not None:
                send({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": token, "progress": i + 1, "total": n}})
            time.sleep(0.1)
        return text("liftoff")
    return {**text(f"Unknown tool: {name}"), "isError": True}


def handle(request: dict[str, Any]) -> dict[str, Any]:
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        asked = params.get("protocolVersion")
        return {"protocolVersion": asked if asked in SUPPORTED else SUPPORTED[-1],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "tiny-mcp-server", "version": "1.0"}}
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        return call_tool(params)
    raise LookupError(method)


def main() -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
            continue
        if not isinstance(message, dict) or "method" not in message or "id" not in message:
            continue  # notifications and responses need no answer here
        try:
            send({"jsonrpc": "2.0", "id": message["id"], "result": handle(message)})
        except LookupError:
            send({"jsonrpc": "2.0", "id": message["id"],
                  "error": {"code": -32601, "message": f"Method not found: {message.get('method')}"}})


if __name__ == "__main__":
    main()
