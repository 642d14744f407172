"""Upstream MCP servers (stdio, legacy SSE, Streamable HTTP) served through the gateway."""
