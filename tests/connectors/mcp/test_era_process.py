"""A dual-era stdio upstream's legacy callers' process, driven through the connector directly
(connectors/mcp/era_process.py): what it adds to its listings is listed and callable by the
callers it serves, refused with the reason to the others, forgotten with the process; every URI
the connector watches is subscribed on it, from its start and later, and unsubscribed."""

from __future__ import annotations

import os
import signal
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from connectors.mcp.connector import MCPConnector
from connectors.mcp.sessions import LEGACY_SHARED
from gateway.protocol.errors import InvalidParams
from tests.connectors.mcp.helpers import DummySession, Events, connector, make_ctx, stdio_config

MODERN = "2026-07-28"


def dual_stdio() -> AbstractAsyncContextManager[tuple[MCPConnector, Events]]:
    """A connector of the SDK fixture serving both eras over stdio, started and stopped after."""
    return connector(stdio_config("up", "--era", "dual", ping_interval_s=0))


def text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"]) if result.get("content") else ""


def names(c: MCPConnector) -> set[str]:
    return {t.name for t in c.tools()}


async def test_a_tool_the_legacy_callers_process_adds_is_theirs_until_that_process_ends() -> None:
    async with dual_stdio() as (c, events):
        old, new = DummySession("old"), DummySession("new", protocol_version=MODERN)
        shared_pid = text(await c.call_tool("pid", {}, make_ctx(new)))
        legacy_pid = text(await c.call_tool("pid", {}, make_ctx(old)))
        assert shared_pid != legacy_pid  # two processes: one per era
        grown = text(await c.call_tool("grow", {}, make_ctx(old)))
        await events.signal.wait(lambda: grown in names(c))
        assert text(await c.call_tool(grown, {}, make_ctx(old))) == grown  # served by the process that has it
        # The shared process lacks it: a 2026-07-28 caller is told why, and nothing is sent there.
        with pytest.raises(InvalidParams, match="only the upstream process serving 2025-11-25"):
            await c.call_tool(grown, {}, make_ctx(new))
        # The legacy callers' process ends: what only it listed goes with it.
        changed = events.changed
        os.kill(int(legacy_pid), signal.SIGKILL)
        await events.signal.wait(lambda: grown not in names(c) and events.changed > changed)
        assert c._era.lists == {}
        # The next legacy call starts a fresh process.
        fresh_pid = text(await c.call_tool("pid", {}, make_ctx(old)))
        assert fresh_pid not in (legacy_pid, shared_pid)
        # A 2026-07-28 caller's growth is the shared process's: listed, and callable by it ...
        first, second = [text(await c.call_tool("grow", {}, make_ctx(new))) for _ in range(2)]
        await events.signal.wait(lambda: second in names(c))
        assert text(await c.call_tool(second, {}, make_ctx(new))) == second
        # ... while the legacy callers' process, once it lists differently, lacks the second one.
        assert text(await c.call_tool("grow", {}, make_ctx(old))) == first
        await events.signal.wait(lambda: "tools" in c._era.lists)
        assert {first, second} <= names(c)
        with pytest.raises(InvalidParams, match="only the upstream process serving 2026-07-28"):
            await c.call_tool(second, {}, make_ctx(old))
        assert text(await c.call_tool(first, {}, make_ctx(old))) == first


async def test_the_legacy_callers_process_watches_every_uri_the_connector_watches() -> None:
    async with dual_stdio() as (c, events):
        old = DummySession("old")
        await c.subscribe("mem://static", make_ctx(old, "resources/subscribe", {"uri": "mem://static"}))
        assert LEGACY_SHARED not in c._clients  # no legacy call yet: no second process
        # Its first call opens it, subscribed before the call runs (touch names what it watches).
        assert text(await c.call_tool("touch", {}, make_ctx(old))) == "mem://static"
        await events.signal.wait(lambda: events.updated == ["mem://static"])
        # A URI watched later is subscribed there too; unwatched ones are dropped there too.
        await c.subscribe("mem://item/1", make_ctx(old, "resources/subscribe", {"uri": "mem://item/1"}))
        assert text(await c.call_tool("touch", {}, make_ctx(old))) == "mem://item/1,mem://static"
        await c.unsubscribe("mem://static", None)
        await c.unsubscribe("mem://item/1", None)
        assert text(await c.call_tool("touch", {}, make_ctx(old))) == ""
        assert events.updated == ["mem://static", "mem://static"]  # the second touch's, none after
