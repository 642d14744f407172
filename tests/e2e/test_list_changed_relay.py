"""An upstream's list changes reach every matching ``subscriptions/listen`` stream promptly (issue 25):
within 1 s of the change, as a client connected to the upstream directly sees them, whether the
upstream announced it on its listen stream (a 2026-07-28 upstream) or on its session (a legacy
one), and even when the listing reads back the same (the conformance reference's
``test_trigger_tool_change`` adds a tool and removes it again before announcing the change)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conformance.test_conformance import FIXTURE
from tests.connectors.mcp.test_gateway_e2e import mcp_entry
from tests.e2e.clients import MODERN
from tests.support import running_gateway

WITHIN_S = 1.0  # the bound, from the change to the caller's stream


def _config(*entries: dict[str, Any]) -> str:
    return json.dumps({"audit": {"enabled": False}, "connectors": list(entries)})


def _reference(era: str) -> dict[str, Any]:
    """The conformance reference over stdio, unprefixed (its trigger tools change a list and back)."""
    return {"name": "ref", "type": "mcp", "prefix": "", "transport": "stdio", "command": sys.executable,
            "args": [str(FIXTURE), "--era", era], "ping_interval_s": 0}


@asynccontextmanager
async def _modern_client(url: str) -> AsyncIterator[Client]:
    async with Client(streamable_http_client(url), mode=MODERN) as client:
        yield client


async def _announced(client: Client, tool: str, kind: str) -> float:
    """Open a listen stream for ``kind``, call ``tool`` (which changes that list upstream), and
    return how long after the call returned the matching notification arrived."""
    flags = {"tools_list_changed": kind == "tools", "prompts_list_changed": kind == "prompts"}
    async with client.listen(**flags) as events:
        await client.call_tool(tool, {})
        returned = time.monotonic()
        event = await asyncio.wait_for(events.__anext__(), 10)
        arrived = time.monotonic()
    assert type(event).__name__ == ("ToolsListChanged" if kind == "tools" else "PromptsListChanged"), event
    return arrived - returned


@pytest.mark.parametrize("era", ["dual", "modern"])
@pytest.mark.parametrize("tool, kind", [("test_trigger_tool_change", "tools"),
                                        ("test_trigger_prompt_change", "prompts")])
async def test_a_change_that_reads_back_the_same_is_still_announced(era: str, tool: str, kind: str) -> None:
    async with running_gateway(_config(_reference(era))) as gw, _modern_client(gw.mcp_url) as client:
        before = [t.name for t in (await client.list_tools()).tools]
        waited = await _announced(client, tool, kind)
        assert [t.name for t in (await client.list_tools()).tools] == before  # the same list, announced
    assert waited < WITHIN_S, f"{kind}/list_changed reached the listen stream {waited:.2f}s after the change"


async def test_a_legacy_upstreams_session_notification_reaches_listen_streams() -> None:
    # A legacy-only upstream announces on its session (up_grow: send_tool_list_changed): relayed to
    # the listen streams of 2026-07-28 callers, who then see the new tool.
    entry = mcp_entry("up", "stdio", "--era legacy", ping_interval_s=0)
    async with running_gateway(_config(entry)) as gw, _modern_client(gw.mcp_url) as client:
        waited = await _announced(client, "up_grow", "tools")
        assert "up_grown_0" in [t.name for t in (await client.list_tools()).tools]
    assert waited < WITHIN_S, f"tools/list_changed reached the listen stream {waited:.2f}s after the change"
