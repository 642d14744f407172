"""Shared e2e helpers: a static config with more items than a page, and official-SDK clients.

:func:`serve` yields an initialized ``mcp.ClientSession`` talking to a gateway over one of the three
transports: Streamable HTTP and legacy SSE against an in-process gateway on loopback, stdio against
``python -m gateway.cli stdio`` spawned by the SDK's own ``stdio_client``.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.support import REPO, running_gateway

__all__ = ["TRANSPORTS", "CORE_ONLY", "BINARY", "write_static_config", "serve", "sdk_client", "eventually"]

TRANSPORTS = ("streamable_http", "sse", "stdio")
# The core alone: no audit database, no metrics (those have their own tests).
CORE_ONLY = "audit: {enabled: false}\ntelemetry: {metrics: false}\n"
BINARY = bytes(range(256)) * 3 + b"\x89PNG\r\n\x1a\n\x00\xff"

N_PROMPTS = 10
N_TEXT_RESOURCES = 9


def write_static_config(tmp: Path, page_size: int = 3) -> Path:
    """A static connector with 10 prompts and 11 resources (two binary files); returns its path."""
    (tmp / "blob.bin").write_bytes(BINARY)
    (tmp / "notes.md").write_text("# Notes\nline two\n")
    lines = [CORE_ONLY.rstrip(), "gateway:", "  name: e2e", f"  page_size: {page_size}",
             "connectors:", "  - name: kit", "    type: static", "    prompts:"]
    # Written in reverse so the gateway's sorting is what makes the order.
    for i in reversed(range(N_PROMPTS)):
        lines += [f"      - name: p{i:02d}", f"        description: Prompt {i}",
                  "        arguments: [{name: who, required: true}, {name: mood}]",
                  f"        messages: [{{role: user, text: 'Prompt {i} for {{who}} ({{mood}})'}}]"]
    lines.append("    resources:")
    for i in reversed(range(N_TEXT_RESOURCES)):
        lines.append(f"      - {{uri: 'mem://r{i:02d}', name: r{i:02d}, mime_type: text/plain, text: 'text {i}'}}")
    lines.append("      - {uri: 'docs://blob', name: blob, mime_type: application/octet-stream, path: blob.bin}")
    lines.append("      - {uri: 'docs://notes', name: notes, mime_type: text/markdown, path: ./notes.md}")
    path = tmp / "gateway.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@asynccontextmanager
async def sdk_client(transport: str, url: str | None = None, config_path: Path | None = None,
                     errlog: Path | None = None, **kwargs: Any) -> AsyncIterator[ClientSession]:
    """An initialized SDK session on ``url`` (HTTP transports) or a spawned stdio gateway."""
    if transport == "streamable_http":
        assert url is not None
        async with streamable_http_client(url + "/mcp") as (read, write, _), \
                ClientSession(read, write, **kwargs) as session:
            await session.initialize()
            yield session
    elif transport == "sse":
        assert url is not None
        async with sse_client(url + "/sse") as (read, write), ClientSession(read, write, **kwargs) as session:
            await session.initialize()
            yield session
    else:
        assert config_path is not None
        params = StdioServerParameters(command=sys.executable,
                                       args=["-m", "gateway.cli", "stdio", "--config", str(config_path)],
                                       cwd=str(REPO))
        log_path = errlog or config_path.with_suffix(".stderr.log")
        with log_path.open("w") as err:
            async with stdio_client(params, errlog=err) as (read, write), \
                    ClientSession(read, write, **kwargs) as session:
                await session.initialize()
                yield session


@asynccontextmanager
async def serve(transport: str, config_path: Path, **kwargs: Any) -> AsyncIterator[ClientSession]:
    """Serve ``config_path`` over ``transport`` and yield an initialized SDK session to it."""
    if transport == "stdio":
        async with sdk_client("stdio", config_path=config_path, **kwargs) as session:
            yield session
        return
    text = config_path.read_text()  # noqa: ASYNC240 - a small local file, read once
    async with running_gateway(text, base_dir=config_path.parent) as gw, \
            sdk_client(transport, url=gw.url, **kwargs) as session:
        yield session


async def eventually(condition: Callable[[], object], timeout: float = 5.0) -> None:
    """Wait for a state change that has no event to wait on (the SDK opens its GET stream in the
    background), checking once per loop turn and failing after ``timeout``."""
    async with asyncio.timeout(timeout):
        while not condition():  # noqa: ASYNC110 - there is no event to wait on (see above)
            await asyncio.sleep(0.005)
