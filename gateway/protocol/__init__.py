"""Sans-IO protocol core: JSON-RPC framing, MCP versions and revisions (:mod:`.revisions`: every wire
difference between revisions in one table), error codes, ``_meta`` fields, Streamable HTTP request
headers, signed cursors and MRTR request state, the session lifecycles, and regular expressions
rewritten so that every client compiles them (:mod:`.patterns`).

Nothing in this package performs I/O or imports asyncio networking, aiohttp or database drivers.
"""
