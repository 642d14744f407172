"""A stdio upstream MCP server (official SDK) whose ``meta`` tool returns the ``traceparent`` it
received in ``params._meta``: the gateway's upstream-MCP trace propagation is checked with it."""

from __future__ import annotations

from mcp.server.fastmcp import Context, FastMCP

mcp = FastMCP("trace-upstream", log_level="WARNING")


@mcp.tool()
def meta(ctx: Context) -> str:
    """Return the traceparent of this request's _meta (or 'none')."""
    received = ctx.request_context.meta
    return str(getattr(received, "traceparent", None) or "none")


if __name__ == "__main__":
    mcp.run("stdio")
