"""Server-sent events on an aiohttp StreamResponse: one writer, serialised writes, clean close."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiohttp import web

from gateway.protocol import jsonrpc

__all__ = ["SSEWriter", "open_sse"]


class SSEWriter:
    """Writes ``event: <name>`` / ``data: <json>`` frames; safe to call from concurrent tasks."""

    def __init__(self, response: web.StreamResponse, transport: asyncio.BaseTransport | None = None) -> None:
        self.response = response
        self._transport = transport
        self._lock = asyncio.Lock()
        self._closed = asyncio.Event()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    async def send(self, message: Any, event: str = "message") -> None:
        await self.send_raw(b"event: " + event.encode() + b"\ndata: " + jsonrpc.dumps(message) + b"\n\n")

    async def send_raw(self, data: bytes) -> None:
        if self.closed:
            raise ConnectionResetError("SSE stream closed")
        async with self._lock:
            try:
                await self.response.write(data)
            except (ConnectionError, RuntimeError) as exc:
                self._closed.set()
                raise ConnectionResetError("SSE stream closed") from exc

    async def close(self) -> None:
        if self.closed:
            return
        self._closed.set()
        with contextlib.suppress(ConnectionError, RuntimeError):
            async with self._lock:
                await self.response.write_eof()

    async def wait_closed(self, keepalive_s: float, poll_s: float = 1.0) -> None:
        """Hold the stream open until it is closed by us or by the client, sending comment lines
        every ``keepalive_s`` so proxies keep it. A client that went away is noticed within
        ``poll_s`` (its socket is closing), not only at the next failed write."""
        loop = asyncio.get_running_loop()
        next_keepalive = loop.time() + keepalive_s
        while not self.closed:
            try:
                await asyncio.wait_for(self._closed.wait(), poll_s)
            except TimeoutError:
                if self._transport is not None and self._transport.is_closing():
                    self._closed.set()
                    return
                if loop.time() >= next_keepalive:
                    next_keepalive = loop.time() + keepalive_s
                    try:
                        await self.send_raw(b": keepalive\n\n")
                    except ConnectionResetError:
                        return


async def open_sse(request: web.Request) -> SSEWriter:
    response = web.StreamResponse(headers={
        "Content-Type": "text/event-stream",
        "Cache-Control": "no-cache, no-transform",
        "X-Accel-Buffering": "no",  # nginx: do not buffer the stream
    })
    await response.prepare(request)
    return SSEWriter(response, request.transport)
