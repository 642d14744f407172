"""A stdio upstream MCP server (official SDK 2.x) whose ``meta`` tool returns the ``traceparent`` it
received in ``params._meta``: the gateway's upstream-MCP trace propagation is checked with it."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer

mcp: MCPServer[Any] = MCPServer("trace-upstream", log_level="WARNING")


@mcp.tool()
def meta(ctx: Context) -> str:
    """Return the traceparent of this request's _meta (or 'none')."""
    received = ctx.request_context.meta
    return str((received or {}).get("traceparent") or "none")


if __name__ == "__main__":
    mcp.run("stdio")
