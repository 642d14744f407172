"""Hostile callers for audit tests: the strings that broke the record (issue 26), and a client that
sends them through a real gateway over HTTP, beside ordinary calls, and remembers what was answered.

Each hostile call carries one kind of string that a store, the JSONL mirror or the spill file
could not take as it was: a lone surrogate (valid JSON ``"\\ud800"``), a NUL, control characters,
a 4-byte emoji, and invalid UTF-8 in a header (``traceparent``; the HTTP server decodes header
bytes with ``surrogateescape``, so the event's ``trace_id`` holds lone surrogates). One session is
also opened with such client info (``clientInfo.name``/``version``).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp

__all__ = ["HOSTILE_ARGUMENTS", "BAD_TRACE", "Caller", "Answered", "raw_post"]

ACCEPT = "application/json, text/event-stream"
VERSION = "2025-11-25"

# (kind, prompt arguments): each is one call beside the ordinary ones.
HOSTILE_ARGUMENTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("surrogate", {"who": "P-\ud800-x"}),
    ("nul", {"who": "P-\u0000-x"}),
    ("control", {"who": "P-\x1b[31m\x07\x7f\u0085-x"}),
    ("emoji", {"who": "P-\U0001F600-x"}),
    ("keys", {"who": "k", "w\u0000\ud83d": {"\udfff": ["\u0000", "a\\u0000b"]}}),
    ("backslash", {"who": "C:\\temp\\u0000 is text"}),
)
# A traceparent whose trace id ends in two bytes that are not UTF-8.
BAD_TRACE = b"00-4bf92f3577b34da6a3ce929d0e0e47\xff\xfe-00f067aa0ba902b7-01"


@dataclass
class Answered:
    """Answered requests: (session id, request id) → the kind of call."""

    calls: dict[tuple[str, str], str] = field(default_factory=dict)
    errors: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)


class Caller:
    """One Streamable HTTP session (JSON responses) driven with plain POSTs."""

    def __init__(self, http: aiohttp.ClientSession, url: str, answered: Answered) -> None:
        self.http = http
        self.url = url
        self.answered = answered
        self.session = ""

    def headers(self) -> dict[str, str]:
        return {"Accept": ACCEPT, "Content-Type": "application/json", "Mcp-Session-Id": self.session,
                "MCP-Protocol-Version": VERSION}

    async def open(self, client_info: dict[str, str] | None = None) -> None:
        body = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": VERSION, "capabilities": {},
            "clientInfo": client_info or {"name": "load", "version": "1"}}}
        async with self.http.post(self.url, data=json.dumps(body), headers={
                "Accept": ACCEPT, "Content-Type": "application/json"}) as resp:
            assert resp.status == 200, await resp.text()
            self.session = resp.headers["Mcp-Session-Id"]
            self._answer("init", "initialize", await resp.json(content_type=None))
        async with self.http.post(self.url, data=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                                  headers=self.headers()) as resp:
            assert resp.status == 202

    async def call(self, rid: str, kind: str, arguments: dict[str, Any]) -> None:
        body = {"jsonrpc": "2.0", "id": rid, "method": "prompts/get",
                "params": {"name": "team_hello", "arguments": arguments}}
        async with self.http.post(self.url, data=json.dumps(body), headers=self.headers()) as resp:
            if resp.status == 200:
                self._answer(rid, kind, await resp.json(content_type=None))

    async def call_with_bad_header(self, rid: str) -> None:
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "prompts/get",
                           "params": {"name": "team_hello", "arguments": {"who": "header"}}}).encode()
        status, reply = await raw_post(self.url, body, {**self.headers(), "traceparent": BAD_TRACE})
        if status == 200:
            self._answer(rid, "header", json.loads(reply))

    def _answer(self, rid: str, kind: str, reply: dict[str, Any]) -> None:
        if reply.get("id") == rid and ("result" in reply or "error" in reply):
            self.answered.calls[(self.session, rid)] = kind
            if "error" in reply:
                self.answered.errors[(self.session, rid)] = reply["error"]


async def raw_post(url: str, body: bytes, headers: dict[str, str | bytes], timeout: float = 30) -> tuple[int, bytes]:
    """POST over a plain socket, so header values can be any bytes (aiohttp's client encodes them
    as UTF-8); returns the status and the body (``Connection: close``)."""
    parsed = aiohttp.client.URL(url)
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection(parsed.host, parsed.port)
        try:
            head = [f"POST {parsed.path_qs} HTTP/1.1".encode(), f"Host: {parsed.host}:{parsed.port}".encode(),
                    b"Connection: close", f"Content-Length: {len(body)}".encode()]
            head += [k.encode() + b": " + (v if isinstance(v, bytes) else v.encode()) for k, v in headers.items()]
            writer.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
            await writer.drain()
            data = await reader.read()
        finally:
            writer.close()
    status_line, _, rest = data.partition(b"\r\n")
    _, _, payload = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), payload
