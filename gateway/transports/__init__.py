"""Transports: bytes ↔ JSON-RPC messages for sessions. They know framing, not MCP semantics."""
