"""Shared e2e helpers: a static config with more items than a page, and official-SDK (2.x) clients.

:func:`connect` is the one way the tests open an SDK client: it yields a connected
``mcp.ClientSession`` at a chosen protocol revision, over any SDK transport. How the SDK 2.x client
picks a revision (read from ``mcp/client/client.py`` and ``mcp/client/_probe.py``):

* ``Client(mode="auto")``, the SDK's default, probes ``server/discover`` at 2026-07-28 and falls
  back to the ``initialize`` handshake on any JSON-RPC error (HTTP 4xx included) except a -32022
  naming only modern versions, and on a discover result that lists no modern version;
* ``Client(mode="legacy")`` always sends ``initialize`` offering 2025-11-25 (the newest handshake
  revision; the SDK cannot offer an older one) — a bare ``ClientSession.initialize()`` does the same;
* ``Client(mode="2026-07-28")`` pins the stateless revision without any probe: every request
  carries ``_meta`` protocolVersion/clientInfo/clientCapabilities and the ``MCP-Protocol-Version``
  header (``ClientSession.discover()`` is the explicit probe-and-adopt).

The gateway serves every revision, 2026-07-28 included; a test names the revision it means
(:data:`LEGACY` or :data:`MODERN`), never the SDK's negotiation, unless negotiation is its subject. :func:`serve` yields such a session talking to a gateway over one
of the three transports: Streamable HTTP and legacy SSE against an in-process gateway on loopback,
stdio against ``python -m gateway.cli stdio`` spawned by the SDK's own ``stdio_client``.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from mcp import Client, ClientSession, StdioServerParameters, types
from mcp.client import Transport
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types.version import LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS

from tests.support import REPO, running_gateway

__all__ = ["TRANSPORTS", "CORE_ONLY", "BINARY", "LEGACY", "MODERN", "Revision", "connect", "write_static_config",
           "serve", "sdk_client", "eventually"]

LEGACY = "2025-11-25"   # the newest handshake revision: what an SDK 2.x client offers in `initialize`
MODERN = "2026-07-28"   # the stateless revision (per-request _meta, no initialize)
Revision = Literal["2025-11-25", "2026-07-28", "auto"]
assert LEGACY == LATEST_HANDSHAKE_VERSION and MODERN in MODERN_PROTOCOL_VERSIONS

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
async def connect(transport: Transport, revision: Revision = LEGACY, *, discover: bool = False,
                  **kwargs: Any) -> AsyncIterator[ClientSession]:
    """A connected SDK ``ClientSession`` over ``transport`` (``streamable_http_client(url)``,
    ``sse_client(url)``, ``stdio_client(params)``) at ``revision``.

    ``LEGACY`` runs the ``initialize`` handshake; ``MODERN`` pins 2026-07-28 without a probe (the
    server capabilities are then unknown), or with ``discover=True`` first sends ``server/discover``
    and adopts its result, raising ``MCPError`` when the server does not answer it as a modern
    server; ``"auto"`` is the SDK's default negotiation (discover, fall back to initialize).
    ``kwargs`` are ``mcp.Client`` callbacks (``sampling_callback``, ``logging_callback``,
    ``message_handler``, ``log_level``, ...). The negotiated revision is checked, so a test never
    runs silently at another one.
    """
    mode = "legacy" if revision == LEGACY else revision
    async with Client(transport, mode=mode, **kwargs) as client:
        session = client.session
        if revision == MODERN and discover:
            session.adopt(types.DiscoverResult.model_validate(await session.send_discover(MODERN)))
        if revision != "auto":
            assert session.protocol_version == revision, \
                f"asked for {revision}, negotiated {session.protocol_version}"
        yield session


@asynccontextmanager
async def sdk_client(transport: str, url: str | None = None, config_path: Path | None = None,
                     errlog: Path | None = None, revision: Revision = LEGACY,
                     **kwargs: Any) -> AsyncIterator[ClientSession]:
    """An SDK session at ``revision`` on ``url`` (HTTP transports) or a spawned stdio gateway."""
    if transport == "streamable_http":
        assert url is not None
        async with connect(streamable_http_client(url + "/mcp"), revision, **kwargs) as session:
            yield session
    elif transport == "sse":
        assert url is not None
        async with connect(sse_client(url + "/sse"), revision, **kwargs) as session:
            yield session
    else:
        assert config_path is not None
        params = StdioServerParameters(command=sys.executable,
                                       args=["-m", "gateway.cli", "stdio", "--config", str(config_path)],
                                       cwd=str(REPO))
        log_path = errlog or config_path.with_suffix(".stderr.log")
        with log_path.open("w") as err:
            async with connect(stdio_client(params, errlog=err), revision, **kwargs) as session:
                yield session


@asynccontextmanager
async def serve(transport: str, config_path: Path, **kwargs: Any) -> AsyncIterator[ClientSession]:
    """Serve ``config_path`` over ``transport`` and yield a connected SDK session to it (``kwargs``:
    :func:`sdk_client`'s, ``revision`` included)."""
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
