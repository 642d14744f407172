"""stdio transport: newline-delimited JSON-RPC on stdin/stdout, one session per process.

stdout carries protocol messages and nothing else (logging goes to stderr, configured by the
CLI). Every line is answered independently: a malformed line gets its JSON-RPC error and the
session continues. Requests run concurrently so that ``notifications/cancelled`` and pings are
served while a slow tool call is in flight.

Both eras on one pipe: a request whose ``params._meta`` names a protocol version is a 2026-07-28
request, served statelessly (:class:`~gateway.stateless.StatelessSession`, the ``server/discover``
probe included); ``notifications/cancelled`` cancels it by id. Everything else belongs to the
process's legacy session (``initialize`` first).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any, BinaryIO

from gateway.context import Principal
from gateway.protocol import jsonrpc
from gateway.protocol.errors import InvalidRequest, ProtocolError
from gateway.protocol.meta import PROTOCOL_VERSION, parse_request_meta
from gateway.stateless import StatelessHost, StatelessSession

from .common import batch_refused, process_frame
from .host import SessionFactory

__all__ = ["serve_stdio", "StdioServer"]

log = logging.getLogger("gateway.stdio")

_LINE_LIMIT = 64 * 1024 * 1024


class StdioServer:
    """Serves one session over a reader/writer pair (stdin/stdout in production, pipes in tests)."""

    def __init__(self, sessions: SessionFactory, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 principal: Principal, grace_s: float = 0.0, modern: StatelessHost | None = None) -> None:
        """``principal`` is who the process's user is (``auth.stdio_principal``); ``grace_s`` is how
        long requests still running at end of input may finish (``gateway.shutdown_grace_s``);
        ``modern`` serves 2026-07-28 requests (None: legacy only)."""
        self.sessions = sessions
        self.modern = modern
        self.principal = principal
        self._modern_inflight: dict[str | int, asyncio.Task[dict[str, Any]]] = {}
        self.reader = reader
        self.writer = writer
        self.grace_s = grace_s
        self._lock = asyncio.Lock()
        self.session = sessions.open_session("stdio", self._send, principal)
        self._tasks: set[asyncio.Task[None]] = set()

    async def _send(self, message: dict[str, Any], related_request_id: object = None) -> None:
        await self._write(message)

    async def _write(self, message: Any) -> None:
        data = jsonrpc.dumps(message) + b"\n"
        async with self._lock:
            self.writer.write(data)
            await self.writer.drain()

    async def _handle_line(self, line: bytes) -> None:
        messages, was_batch = jsonrpc.parse(line)
        if self.modern is not None and not was_batch and len(messages) == 1:
            if await self._modern(messages[0]):
                return
        refused = batch_refused(self.session, was_batch)
        if refused is not None:
            await self._write(refused)
            return
        replies = await process_frame(self.session, messages)
        if replies:
            await self._write(replies if was_batch else replies[0])
            for extra in replies[1:] if not was_batch else ():
                await self._write(extra)

    async def _modern(self, incoming: jsonrpc.Incoming) -> bool:
        """Serve a 2026-07-28 request, or cancel one; False when the message is the legacy session's."""
        message = incoming.message
        if incoming.kind == "notification" and message.get("method") == "notifications/cancelled":
            params = message.get("params") or {}
            rid = params.get("requestId") if isinstance(params, dict) else None
            task = self._modern_inflight.get(rid) if isinstance(rid, (str, int)) else None
            if task is None:
                return False  # perhaps the legacy session's request
            task.cancel()
            return True
        if incoming.kind != "request":
            return False
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if not isinstance(meta, dict) or PROTOCOL_VERSION not in meta:
            return False
        assert self.modern is not None
        rid = message["id"]
        try:
            parsed = parse_request_meta(params)  # type: ignore[arg-type]
            if rid in self._modern_inflight:
                raise InvalidRequest(f"Request id {rid!r} is already in use")
            assert parsed is not None  # it names a protocol version
        except ProtocolError as exc:
            await self._write(jsonrpc.error_from_exception(rid, exc))
            return True
        session = StatelessSession(self.modern, "stdio", self._send, self.principal, parsed)
        task = asyncio.ensure_future(session.handle_request(message))
        self._modern_inflight[rid] = task
        try:
            reply = await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise
            return True  # cancelled by the client: no response, as the spec asks
        finally:
            self._modern_inflight.pop(rid, None)
        await self._write(reply)
        return True

    async def serve(self) -> None:
        self.sessions.add_session(self.session)
        try:
            while True:
                try:
                    line = await self.reader.readline()
                except ValueError:  # a line over the limit: answer it and skip the rest of it
                    await self._write(jsonrpc.error_response(None, -32700, "Parse error: message too large"))
                    continue
                if not line:
                    break
                if not line.strip():
                    continue
                task = asyncio.create_task(self._handle_line(line))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            if self._tasks:
                await asyncio.wait(self._tasks, timeout=self.grace_s or None)
        finally:
            await self.session.close()


async def _stdio_streams(stdin: BinaryIO, stdout: BinaryIO) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout)
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    return reader, writer


async def serve_stdio(sessions: SessionFactory, principal: Principal, grace_s: float = 0.0,
                      modern: StatelessHost | None = None) -> None:
    """Serve the process's stdin/stdout until stdin closes."""
    reader, writer = await _stdio_streams(sys.stdin.buffer, sys.stdout.buffer)
    await StdioServer(sessions, reader, writer, principal, grace_s, modern).serve()
