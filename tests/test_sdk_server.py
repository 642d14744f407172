"""The test peers serve the era they are asked for: :mod:`tests.sdk_server` with the connector tests'
SDK 2.x upstream (``tests/connectors/mcp/upstream_server.py``), met by SDK 2.x clients at each
revision (:func:`tests.e2e.clients.connect`). The bridging matrix builds on these three eras."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from mcp import MCPError, StdioServerParameters
from mcp.client import Transport
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import UNSUPPORTED_PROTOCOL_VERSION

from tests.connectors.mcp.helpers import SERVER, upstream_http
from tests.e2e.clients import LEGACY, MODERN, Revision, connect
from tests.sdk_server import ERAS, TRANSPORTS

# What an SDK 2.x client at each revision gets from a server of each era: the revision it runs
# at, or None when the connection is refused.
OUTCOME: dict[tuple[str, str], str | None] = {
    ("legacy", LEGACY): LEGACY, ("legacy", MODERN): None, ("legacy", "auto"): LEGACY,
    ("modern", LEGACY): None, ("modern", MODERN): MODERN, ("modern", "auto"): MODERN,
    ("dual", LEGACY): LEGACY, ("dual", MODERN): MODERN, ("dual", "auto"): MODERN,
}


def mcp_error(exc: BaseException) -> MCPError | None:
    if isinstance(exc, MCPError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        return next((e for e in map(mcp_error, exc.exceptions) if e is not None), None)
    return None


@asynccontextmanager
async def transports(transport: str, era: str) -> AsyncIterator[list[tuple[Revision, Transport]]]:
    """One transport per client revision to the upstream served as ``era``."""
    revisions: list[Revision] = [LEGACY, MODERN, "auto"]
    if transport == "stdio":
        def spawn() -> Transport:
            return stdio_client(StdioServerParameters(command=sys.executable,
                                                      args=[SERVER, "--transport", "stdio", "--era", era]))
        yield [(revision, spawn()) for revision in revisions]
        return
    async with upstream_http(transport, "--era", era) as (url, _proc):
        client = sse_client if transport == "sse" else streamable_http_client
        yield [(revision, client(url)) for revision in revisions]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_each_era_serves_the_revisions_it_claims(transport: str, era: str) -> None:
    async with transports(transport, era) as pairs:
        for revision, channel in pairs:
            expected = OUTCOME[(era, revision)]
            # 2026-07-28 pinned without a probe would only fail at the first request: probe.
            opened = connect(channel, revision, discover=True)
            if expected is None:
                # The SDK raises it out of its task groups, wrapped in an exception group.
                with pytest.raises((MCPError, BaseExceptionGroup)) as info:
                    async with opened:
                        pass
                error = mcp_error(info.value)
                assert error is not None, info.value
                if revision == LEGACY:  # a modern-only server names what it serves
                    assert error.error.code == UNSUPPORTED_PROTOCOL_VERSION
                    assert error.error.data["supported"] == [MODERN]
                continue
            async with opened as session:
                assert session.protocol_version == expected, (transport, era, revision)
                echoed = await session.call_tool("echo", {"text": f"{era} {revision}"})
                assert echoed.content[0].text == f"{era} {revision}"  # type: ignore[union-attr]
