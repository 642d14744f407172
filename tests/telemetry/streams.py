"""A Streamable HTTP session's GET stream, read in the background: tests wait for a notification
(or for the stream's clean end) on events, never with sleeps."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

__all__ = ["NotificationStream"]


class NotificationStream:
    """``async with NotificationStream(http, url, headers) as stream:`` then ``await stream.wait_for(m)``."""

    def __init__(self, http: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> None:
        self.http = http
        self.url = url
        self.headers = {**headers, "Accept": "text/event-stream"}
        self.messages: list[dict[str, Any]] = []
        self.ended = asyncio.Event()
        self.clean_end: bool | None = None
        self.opened = asyncio.Event()
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> NotificationStream:
        self._task = asyncio.create_task(self._read())
        await asyncio.wait_for(self.opened.wait(), 10)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _read(self) -> None:
        try:
            async with self.http.get(self.url, headers=self.headers,
                                     timeout=aiohttp.ClientTimeout(total=None, sock_read=None)) as resp:
                assert resp.status == 200, resp.status
                self.opened.set()
                data: list[str] = []
                event = "message"
                async for raw in resp.content:
                    line = raw.decode().rstrip("\r\n")
                    if line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("data:"):
                        data.append(line[5:].lstrip())
                    elif not line and data:
                        text, data = "\n".join(data), []
                        # Legacy SSE starts with an "endpoint" event whose data is a URL.
                        message = json.loads(text) if event == "message" else {"event": event, "data": text}
                        event = "message"
                        async with self._changed:
                            self.messages.append(message)
                            self._changed.notify_all()
            self.clean_end = True
        except aiohttp.ClientPayloadError:
            self.clean_end = False
        finally:
            self.opened.set()
            self.ended.set()

    def methods(self) -> list[str]:
        return [m.get("method", "") for m in self.messages]

    async def wait_for(self, method: str, timeout: float = 10.0) -> dict[str, Any]:
        return await self._wait("method", method, timeout)

    async def wait_count(self, method: str, count: int, timeout: float = 10.0) -> None:
        """Until ``count`` notifications named ``method`` arrived."""
        async with asyncio.timeout(timeout), self._changed:
            while self.methods().count(method) < count:
                await self._changed.wait()

    async def wait_for_event(self, event: str, timeout: float = 10.0) -> dict[str, Any]:
        """A non-message SSE event (legacy SSE's ``endpoint``)."""
        return await self._wait("event", event, timeout)

    async def _wait(self, key: str, value: str, timeout: float) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            async with self._changed:
                while True:
                    for message in self.messages:
                        if message.get(key) == value:
                            return message
                    await self._changed.wait()
