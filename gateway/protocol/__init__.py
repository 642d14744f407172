"""Sans-IO protocol core: JSON-RPC framing, MCP versions, error codes and cursors.

Nothing in this package performs I/O or imports asyncio networking, aiohttp or database drivers.
"""
