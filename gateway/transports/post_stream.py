"""The reply channel of one POSTed request on Streamable HTTP, and its resumption.

A request is answered with one JSON body unless something must go out before its response (a
progress notification, a log line, a sampling request) or it is still running after
``gateway.http.keepalive_s``: then the POST's response becomes an SSE stream, which carries
comment lines at that interval (so proxies' idle timeouts do not cut a long call).

Once streaming, every event carries an id ``<stream>:<n>``, unique within the session, and is kept
(at most :data:`MAX_EVENTS` events and :data:`MAX_BYTES`) until the response was delivered. A client
whose connection broke resumes with ``GET`` and ``Last-Event-ID``: it receives what it missed and
then the rest of the stream, response included. Sessions at revision 2025-11-25 or later get a
priming event (an id, no data) as the stream opens, so even a cut before the first message can be
resumed (SEP-1699). A response nobody collected is kept for :data:`UNCOLLECTED_S` seconds.

With replicas sharing state, every event (and the priming one) is also written to a ``journal``
(the store's event log of the stream, :mod:`.replicas`), so another replica can resume the stream.

Revision 2026-07-28 has no resumption: its streams are made with ``resumable=False`` and carry
no event ids, no priming event and keep nothing once sent.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from gateway.protocol import jsonrpc
from gateway.protocol.errors import INVALID_REQUEST

from .sse_writer import SSEWriter, open_sse

__all__ = ["PostStream", "Journal", "parse_event_id", "MAX_EVENTS", "MAX_BYTES", "UNCOLLECTED_S"]

# (seq, frame, whether the frame is the response): one event of a stream written to the shared log.
Journal = Callable[[int, bytes, bool], Awaitable[None]]

MAX_EVENTS = 1000
MAX_BYTES = 16 * 1024 * 1024
UNCOLLECTED_S = 60.0
_PRIMING_SINCE = "2025-11-25"


def parse_event_id(value: str) -> tuple[str, int] | None:
    """``(stream, n)`` of an event id this module issued, else None."""
    stream, sep, n = value.rpartition(":")
    if not sep or not stream or not n.isdigit():
        return None
    return stream, int(n)


class PostStream:
    """One request's reply channel. ``on_done`` is called once nothing more can be resumed."""

    __slots__ = ("request", "id", "can_stream", "sse", "_live", "_opening", "_keeper", "_prime", "_events",
                 "_bytes", "_seq", "_oldest", "_done", "_delivered", "_on_done", "_forget", "_resumable", "_journal")

    def __init__(self, request: web.Request, stream_id: str, can_stream: bool, protocol_version: str,
                 on_done: Callable[[PostStream], None], resumable: bool = True,
                 journal: Journal | None = None) -> None:
        self.request = request
        self.id = stream_id
        self.can_stream = can_stream
        self.sse: SSEWriter | None = None  # the POST's own stream, once opened
        self._live: SSEWriter | None = None  # where events go now: the POST's, or a resuming GET's
        self._opening: asyncio.Future[SSEWriter] | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._resumable = resumable
        self._prime = resumable and protocol_version >= _PRIMING_SINCE
        self._events: collections.deque[tuple[int, bytes]] = collections.deque()
        self._bytes = 0
        self._seq = 0
        self._oldest = 1  # the first event id still kept
        self._done = asyncio.Event()  # the response was written (live or into the buffer)
        self._delivered = False
        self._on_done = on_done
        self._forget: asyncio.TimerHandle | None = None
        self._journal = journal if resumable else None

    # -- writing --------------------------------------------------------------------------------
    async def _stream(self) -> SSEWriter:
        """The POST's SSE stream, opened once whoever asks first (a related message or the
        keepalive); the opening is shielded, so a cancelled asker never leaves it half-started."""
        if self.sse is None:
            if self._opening is None:
                self._opening = asyncio.ensure_future(self._open())
            self.sse = await asyncio.shield(self._opening)
        return self.sse

    async def _open(self) -> SSEWriter:
        sse = await open_sse(self.request)
        self._live = sse
        if self._prime:
            if self._journal is not None:  # so a stream cut before its first message resumes anywhere
                await self._journal(0, b"", False)
            with contextlib.suppress(ConnectionResetError):
                await sse.send_raw(f"id: {self.id}:0\ndata: \n\n".encode())
        return sse

    async def send(self, message: dict[str, Any]) -> None:
        await self._stream()
        if self._resumable:
            self._seq += 1
            seq = self._seq
            frame = f"id: {self.id}:{seq}\nevent: message\ndata: ".encode() + jsonrpc.dumps(message) + b"\n\n"
            self._keep(seq, frame)
            if self._journal is not None:
                await self._journal(seq, frame, "id" in message and "method" not in message)
        else:
            frame = b"event: message\ndata: " + jsonrpc.dumps(message) + b"\n\n"
        live = self._live
        if live is None:
            return  # the client is away: kept for its resumption
        try:
            await live.send_raw(frame)
        except ConnectionResetError:
            if self._live is live:
                self._live = None
            return
        if "id" in message and "method" not in message:
            self._delivered = True

    def _keep(self, seq: int, frame: bytes) -> None:
        self._events.append((seq, frame))
        self._bytes += len(frame)
        while len(self._events) > MAX_EVENTS or self._bytes > MAX_BYTES:
            old_seq, old = self._events.popleft()
            self._bytes -= len(old)
            self._oldest = old_seq + 1

    # -- keepalive --------------------------------------------------------------------------------
    def keep_alive(self, every_s: float) -> None:
        """The request is taking long: stream from now on, with a comment line every ``every_s``."""
        self._keeper = asyncio.ensure_future(self._keepalive(every_s))

    def stop_keepalive(self) -> None:
        if self._keeper is not None:
            self._keeper.cancel()

    async def _keepalive(self, every_s: float) -> None:
        await self._stream()
        while True:
            live = self._live
            if live is not None:
                with contextlib.suppress(ConnectionResetError):
                    await live.send_raw(b": keepalive\n\n")
            await asyncio.sleep(every_s)

    # -- the end of the request ---------------------------------------------------------------------
    async def finish(self, reply: dict[str, Any] | None) -> web.StreamResponse:
        """Deliver the response (None: the client cancelled) and return the POST's HTTP response."""
        self.stop_keepalive()
        if self._opening is not None:
            with contextlib.suppress(Exception):
                self.sse = await self._opening
        if self.sse is None:
            self._on_done(self)
            if reply is None:  # cancelled by the client: no response, as the spec asks
                return web.Response(status=202)
            return web.Response(body=jsonrpc.dumps(reply), content_type="application/json")
        if reply is not None:
            await self.send(reply)
        else:
            self._delivered = True  # nothing left to collect
        self._done.set()
        live = self._live
        if live is not None:
            await live.close()  # the POST's stream, or a resuming GET's (whose handler then returns)
        if self.sse is not live:
            await self.sse.close()
        if self._delivered or not self._resumable:
            self._on_done(self)
        else:  # the client is away: keep the response a while for its resumption
            self._forget = asyncio.get_running_loop().call_later(UNCOLLECTED_S, self._on_done, self)
        return self.sse.response

    # -- resumption ---------------------------------------------------------------------------------
    async def resume(self, request: web.Request, after: int, keepalive_s: float) -> web.StreamResponse:
        """A GET with ``Last-Event-ID: <this stream>:<after>``: replay what came after it, then
        carry the rest of the stream."""
        if after + 1 < self._oldest:
            return _gone(f"events after {self.id}:{after} are no longer kept")
        sse = await open_sse(request)
        last = after
        try:
            while True:  # replay; what arrives meanwhile is kept, and the next round sends it
                pending = [(seq, frame) for seq, frame in self._events if seq > last]
                if not pending:
                    break
                for seq, frame in pending:
                    await sse.send_raw(frame)
                    last = seq
        except ConnectionResetError:
            return sse.response
        if self._done.is_set():  # the response was among the replayed events
            self._collected()
            await sse.close()
            return sse.response
        previous, self._live = self._live, sse  # no await since the last check: nothing slips by
        if previous is not None and previous is not self.sse:
            await previous.close()  # an older resumption of the same stream
        await sse.wait_closed(keepalive_s)
        if self._done.is_set() and self._live is sse:
            self._collected()
        return sse.response

    def _collected(self) -> None:
        self._delivered = True
        if self._forget is not None:
            self._forget.cancel()
            self._forget = None
        self._on_done(self)


def _gone(message: str) -> web.Response:
    body = jsonrpc.error_response(None, INVALID_REQUEST, f"Bad Request: {message}")
    return web.Response(status=400, body=jsonrpc.dumps(body), content_type="application/json")
