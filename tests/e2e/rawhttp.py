"""Raw Streamable HTTP / SSE helpers on aiohttp, for tests that check the wire itself."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

__all__ = ["ACCEPT", "VERSION", "RawSession", "sse_events", "initialize"]

ACCEPT = "application/json, text/event-stream"
VERSION = "2025-11-25"


async def sse_events(resp: aiohttp.ClientResponse) -> AsyncIterator[tuple[str, str]]:
    """``(event, data)`` pairs of an SSE response, as they arrive. As the SSE standard says, an
    event whose data is empty is not dispatched (a priming event carries only an id)."""
    event, data = "message", []
    async for raw in resp.content:
        line = raw.decode().rstrip("\r\n")
        if not line:
            if "".join(data):
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


async def messages_of(resp: aiohttp.ClientResponse) -> list[dict[str, Any]]:
    """Every JSON-RPC message of a POST reply, JSON body or SSE stream alike."""
    if resp.content_type == "text/event-stream":
        return [json.loads(data) async for _, data in sse_events(resp)]
    body = await resp.json(content_type=None)
    return body if isinstance(body, list) else [body]


class RawSession:
    """An initialized Streamable HTTP session driven with plain POSTs."""

    def __init__(self, http: aiohttp.ClientSession, url: str, session_id: str) -> None:
        self.http = http
        self.url = url
        self.id = session_id
        self._next = 100

    @property
    def headers(self) -> dict[str, str]:
        return {"Mcp-Session-Id": self.id, "MCP-Protocol-Version": VERSION, "Accept": ACCEPT}

    def post(self, payload: Any, **headers: str) -> Any:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return self.http.post(self.url, data=data, headers={**self.headers, "Content-Type": "application/json",
                                                            **headers})

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next, "method": method}
        if params is not None:
            msg["params"] = params
        async with self.post(msg) as resp:
            [reply] = await messages_of(resp)
        return reply


async def initialize(http: aiohttp.ClientSession, url: str, capabilities: dict[str, Any] | None = None) -> RawSession:
    """initialize + notifications/initialized; returns the session."""
    msg = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
           "params": {"protocolVersion": VERSION, "capabilities": capabilities or {},
                      "clientInfo": {"name": "raw", "version": "0"}}}
    async with http.post(url, json=msg, headers={"Accept": ACCEPT}) as resp:
        assert resp.status == 200, await resp.text()
        session_id = resp.headers["Mcp-Session-Id"]
        body = await resp.json()
        assert body["result"]["protocolVersion"] == VERSION
    session = RawSession(http, url, session_id)
    async with session.post({"jsonrpc": "2.0", "method": "notifications/initialized"}) as resp:
        assert resp.status == 202
    return session
