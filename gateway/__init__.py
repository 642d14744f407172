"""The MCP gateway: serves the union of its connectors as one MCP server."""

__version__ = "0.1.0"
