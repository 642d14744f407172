"""Issue 19: one error vocabulary while an upstream is down, one shape for timeouts, and audit
rows that always say what failed.

The official SDK client talks to the gateway, which chains an official-SDK upstream over
Streamable HTTP. The upstream is killed and started again on the same port. Before the fix a
``resources/read`` of its resource answered ``-32002 Resource not found`` during the outage while
its tools answered "unavailable" (a client may drop a "not found" resource for good); a tool timeout
came back as ``-32001`` or as an ``isError`` result depending on which clock ran out first; audit
rows of failed tool results had an empty ``error_message``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import MCPError

from gateway.protocol.errors import BACKEND_UNAVAILABLE
from tests.connectors.mcp.helpers import upstream_http
from tests.connectors.mcp.test_gateway_e2e import client, mcp_entry
from tests.e2e.clients import eventually
from tests.support import free_port, running_gateway


def gateway_config(tmp_path: Path, *entries: dict[str, Any]) -> str:
    return json.dumps({"audit": {"store": f"sqlite:///{tmp_path}/audit.db", "jsonl": str(tmp_path / "audit.jsonl"),
                                 "spill_path": str(tmp_path / "spill.jsonl")},
                       "connectors": list(entries)})


def audit_rows(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines() if line.strip()]


async def test_an_outage_answers_unavailable_for_every_kind_of_target_and_recovery_serves_all(tmp_path: Path) -> None:
    port = free_port()
    entry = mcp_entry("up", "streamable_http", f"http://127.0.0.1:{port}/mcp", protocol="legacy",
                      reconnect_initial_s=0.05, reconnect_max_s=0.3, ping_interval_s=0.2)
    async with running_gateway(gateway_config(tmp_path, entry)) as gw:
        connector = gw.connectors["up"]
        async with upstream_http("streamable_http", port=port) as (_url, proc):
            await eventually(lambda: connector.health().up, 20)
            async with client(gw.mcp_url) as (session, _rec):
                calls: dict[str, Callable[[], Awaitable[Any]]] = {
                    "tools/call": lambda: session.call_tool("up_echo", {"text": "hi"}),
                    "resources/read": lambda: session.read_resource("mem://static"),  # type: ignore[arg-type]
                    "resources/read (template)": lambda: session.read_resource("mem://item/7"),  # type: ignore[arg-type]
                    "prompts/get": lambda: session.get_prompt("up_greet", {"name": "Ada"}),
                }
                for call in calls.values():
                    await call()
                proc.kill()
                await proc.wait()
                await eventually(lambda: not connector.health().up, 20)
                for what, call in calls.items():
                    with pytest.raises(MCPError) as info:
                        await call()
                    error = info.value.error
                    assert error.code == BACKEND_UNAVAILABLE, (what, error)
                    assert "is unavailable: connector up is down" in error.message, (what, error.message)
                    assert error.data == {"connector": "up"}, what
        async with upstream_http("streamable_http", port=port):
            await eventually(lambda: connector.health().up, 20)
            async with client(gw.mcp_url) as (session, _rec):
                assert (await session.call_tool("up_echo", {"text": "back"})).content[0].text == "back"  # type: ignore[union-attr]
                assert (await session.read_resource("mem://static")).contents  # type: ignore[arg-type]
                assert (await session.read_resource("mem://item/7")).contents[0].text == "item 7"  # type: ignore[arg-type,union-attr]
                assert (await session.get_prompt("up_greet", {"name": "Ada"})).messages
    rows = audit_rows(tmp_path)
    failed = [r for r in rows if r["outcome"] != "ok"]
    assert len(failed) >= 4 and all(r["error_message"] for r in failed), failed


async def test_a_tool_timeout_is_one_shape_whichever_clock_runs_out_first(tmp_path: Path) -> None:
    # timeout_s is both the connector's own clock and the request deadline: they race.
    async with upstream_http("streamable_http") as (url, _proc):
        entry = mcp_entry("up", "streamable_http", url, protocol="legacy", timeout_s=0.3)
        async with running_gateway(gateway_config(tmp_path, entry)) as gw, client(gw.mcp_url) as (session, _rec):
            results = await asyncio.gather(*(session.call_tool("up_hang", {"seconds": 5}) for _ in range(12)))
            for result in results:
                assert result.is_error and "timed out" in result.content[0].text  # type: ignore[union-attr]
            assert (await session.call_tool("up_echo", {"text": "ok"})).content[0].text == "ok"  # type: ignore[union-attr]
    rows = [r for r in audit_rows(tmp_path) if r["method"] == "tools/call" and r["outcome"] != "ok"]
    assert len(rows) == 12
    assert all(r["outcome"] == "timeout" and "timed out" in r["error_message"] for r in rows), rows
