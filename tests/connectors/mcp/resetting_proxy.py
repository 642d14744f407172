"""A TCP proxy that resets requests arriving on already-used keep-alive connections, on demand.

It plays the upstream that closes an idle connection just as the next request arrives (issue 19):
each :meth:`ResettingProxy.arm` makes the next request that arrives on a connection which already
carried a response be answered with a TCP reset (``SO_LINGER`` 0, then close) instead of being
forwarded, so the upstream application never sees it. Everything else is piped both ways
unchanged. Used by the connector's tests and by ``bench/soak.py``'s reset phase.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct

__all__ = ["ResettingProxy"]


class ResettingProxy:
    """``async with ResettingProxy(target_port) as proxy:`` listens on ``proxy.port``."""

    def __init__(self, target_port: int, host: str = "127.0.0.1") -> None:
        self.target_port = target_port
        self.host = host
        self.port = 0
        self.armed = 0
        self.resets = 0
        self.connections = 0
        self._changed = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> ResettingProxy:
        self._server = await asyncio.start_server(self._handle, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def arm(self, count: int = 1) -> None:
        """Reset the next ``count`` requests that arrive on a used connection."""
        self.armed += count

    async def wait_resets(self, count: int, timeout: float = 20.0) -> None:
        async with asyncio.timeout(timeout):
            while self.resets < count:
                self._changed.clear()
                await self._changed.wait()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.target_port)
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        answered = False

        async def downstream() -> None:
            nonlocal answered
            with contextlib.suppress(OSError):
                while data := await up_reader.read(65536):
                    answered = True
                    writer.write(data)
                    await writer.drain()
            writer.close()

        pipe = asyncio.create_task(downstream())
        try:
            with contextlib.suppress(OSError):
                while data := await reader.read(65536):
                    if answered and self.armed > 0:
                        # A new request on a used connection: reset it before the upstream sees it.
                        self.armed -= 1
                        self.resets += 1
                        self._changed.set()
                        sock = writer.get_extra_info("socket")
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        writer.transport.abort()
                        break
                    up_writer.write(data)
                    await up_writer.drain()
        finally:
            up_writer.close()
            pipe.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await pipe
            writer.close()
            self._tasks.discard(task)
