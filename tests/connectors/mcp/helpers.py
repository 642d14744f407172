"""Test helpers for the MCP connector: upstream server processes, a dummy downstream session,
a recording events sink and CallContext construction."""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from connectors.base import Health
from connectors.mcp.config import MCPConfig
from connectors.mcp.connector import MCPConnector
from gateway.context import CallContext
from tests.support import free_port

__all__ = ["SERVER", "upstream_http", "wait_port", "DummySession", "Events", "Signal", "make_ctx", "stdio_config"]

SERVER = str(Path(__file__).with_name("upstream_server.py"))
_ids = itertools.count(1)


def stdio_config(name: str = "up", *extra: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "type": "mcp", "transport": "stdio", "command": sys.executable,
            "args": [SERVER, "--transport", "stdio", *extra], **kw}


async def wait_port(port: int, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while True:
            try:
                _r, w = await asyncio.open_connection("127.0.0.1", port)
                w.close()
                await w.wait_closed()
                return
            except OSError:
                await asyncio.sleep(0.05)


@asynccontextmanager
async def mcp_server_process(script: Path, *args: str) -> AsyncIterator[str]:
    """``script`` run as its own process, given ``args`` then the port flag's value (a free port):
    yields its Streamable HTTP URL once it listens; terminated on exit."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(sys.executable, str(script), *args, str(port),
                                                stderr=asyncio.subprocess.DEVNULL)
    try:
        await wait_port(port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


@asynccontextmanager
async def upstream_http(transport: str, *extra: str, port: int | None = None) -> AsyncIterator[tuple[str, Any]]:
    """Run the test upstream over sse or streamable_http; yields (url, process)."""
    port = port or free_port()
    proc = await asyncio.create_subprocess_exec(sys.executable, SERVER, "--transport", transport, "--port",
                                                str(port), *extra, stderr=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.DEVNULL)
    try:
        await wait_port(port)
        path = "/sse" if transport == "sse" else "/mcp"
        yield f"http://127.0.0.1:{port}{path}", proc
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


class Signal:
    """Pulsed by every callback of the object owning it; ``wait`` re-checks a condition on each pulse."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def pulse(self) -> None:
        self._event.set()

    async def wait(self, predicate: Callable[[], bool], timeout: float = 20.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                await self._event.wait()
                self._event.clear()


class DummySession:
    """A downstream session: records notifications; server→client requests go to ``on_request``."""

    def __init__(self, sid: str, capabilities: dict[str, Any] | None = None,
                 on_request: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]] | None = None,
                 protocol_version: str = "2025-11-25") -> None:
        """``protocol_version``: the caller's revision (a dual-era upstream serves each in its own)."""
        self.id = sid
        self.transport = "test"
        self.protocol_version = protocol_version
        self.client_info = {"name": sid, "version": "1"}
        self.client_capabilities = capabilities if capabilities is not None else {"sampling": {}}
        self.log_level: str | None = "info"  # a legacy session's default (a modern request: None or its own)
        self.notifications: list[tuple[str, dict[str, Any], Any]] = []
        self.requests: list[tuple[str, dict[str, Any], Any]] = []
        self._on_request = on_request
        self.signal = Signal()

    async def notify(self, method: str, params: dict[str, Any] | None = None,
                     related_request_id: str | int | None = None) -> None:
        self.notifications.append((method, params or {}, related_request_id))
        self.signal.pulse()

    async def request(self, method: str, params: dict[str, Any] | None = None,
                      related_request_id: str | int | None = None, timeout: float | None = None) -> dict[str, Any]:
        self.requests.append((method, params or {}, related_request_id))
        if self._on_request is None:
            from gateway.protocol.errors import MethodNotFound
            raise MethodNotFound(f"client does not support {method}")
        return await self._on_request(method, params or {})


class Events:
    def __init__(self) -> None:
        self.changed = 0
        self.changed_event = asyncio.Event()
        self.updated: list[str] = []
        self.logs: list[tuple[str, Any, str | None]] = []
        self.health: list[Health] = []
        self.signal = Signal()

    def components_changed(self, announced: frozenset[str] = frozenset()) -> None:
        self.changed += 1
        self.changed_event.set()
        self.signal.pulse()

    def resource_updated(self, uri: str) -> None:
        self.updated.append(uri)
        self.signal.pulse()

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        self.logs.append((level, data, logger))
        self.signal.pulse()

    def health_changed(self, health: Health) -> None:
        self.health.append(health)
        self.signal.pulse()


def make_ctx(session: DummySession, method: str = "tools/call", params: dict[str, Any] | None = None,
             progress_token: str | int | None = None, request_id: str | int | None = None) -> CallContext:
    params = dict(params or {})
    if progress_token is not None:
        params["_meta"] = {**params.get("_meta", {}), "progressToken": progress_token}
    return CallContext(session=session, method=method, request_id=request_id if request_id is not None else next(_ids),
                       params=params, progress_token=progress_token)


@asynccontextmanager
async def connector(cfg: dict[str, Any]) -> AsyncIterator[tuple[MCPConnector, Events]]:
    """An MCP connector of *cfg*, started (with the :class:`Events` it reports to) and stopped after."""
    c = MCPConnector(MCPConfig.model_validate(cfg))
    events = Events()
    await c.start(events)
    try:
        yield c, events
    finally:
        await c.stop()
