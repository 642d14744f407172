"""A minimal Streamable HTTP JSON-RPC client for policy tests (configs set json_response: true)."""

from __future__ import annotations

import itertools
from typing import Any

import aiohttp

__all__ = ["McpHttp"]


class McpHttp:
    """One MCP session over POST /mcp with an optional bearer token."""

    def __init__(self, http: aiohttp.ClientSession, url: str, token: str | None = None) -> None:
        self.http = http
        self.url = url
        self.headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self._ids = itertools.count(1)

    async def post(self, message: dict[str, Any]) -> aiohttp.ClientResponse:
        resp = await self.http.post(self.url, json=message, headers=self.headers)
        await resp.read()
        return resp

    async def initialize(self, name: str = "policy-tests") -> McpHttp:
        resp = await self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": name, "version": "1.2.3"}}})
        assert resp.status == 200, (resp.status, await resp.text())
        self.headers["Mcp-Session-Id"] = resp.headers["Mcp-Session-Id"]
        self.headers["MCP-Protocol-Version"] = "2025-11-25"
        note = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert note.status == 202, note.status
        return self

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """The JSON-RPC response object (``result`` or ``error``)."""
        resp = await self.post({"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params or {}})
        assert resp.status == 200, (resp.status, await resp.text())
        body: dict[str, Any] = await resp.json(content_type=None)
        return body
