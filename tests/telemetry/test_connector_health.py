"""Connector health in the metrics: an upstream MCP server that dies and comes back shows as down,
then up again, and counts one reconnect."""

from __future__ import annotations

import sys
from pathlib import Path

import aiohttp

from tests.filters.mcp_http import McpHttp
from tests.support import running_gateway
from tests.telemetry.metrics_client import scrape
from tests.telemetry.streams import NotificationStream

UPSTREAM = Path(__file__).resolve().parents[1] / "connectors" / "mcp" / "upstream_server.py"


async def test_a_dying_upstream_is_down_then_up_and_counts_a_reconnect():
    cfg = f"""\
gateway:
  http: {{json_response: true}}
audit: {{enabled: false}}
connectors:
  - name: up
    type: mcp
    transport: stdio
    command: {sys.executable}
    args: ["{UPSTREAM}", "--transport", "stdio", "--era", "legacy"]
    ping_interval_s: 0
    reconnect_initial_s: 0.05
"""
    # (legacy-only: a dual-era stdio upstream serves this legacy client from a second process,
    # whose death fails the call but leaves the connector up)
    async with running_gateway(cfg) as gw, aiohttp.ClientSession() as http:
        client = await McpHttp(http, gw.mcp_url).initialize()
        before = await scrape(http, gw.url + "/metrics")
        assert before.value("mcp_gateway_connector_up", connector="up", type="mcp") == 1
        async with NotificationStream(http, gw.mcp_url, client.headers) as stream:
            reply = await client.call("tools/call", {"name": "up_die", "arguments": {}})
            assert "error" in reply or reply["result"].get("isError"), reply
            # Down: its tools leave the catalog; up again: they come back. Two list_changed.
            await stream.wait_count("notifications/tools/list_changed", 2, timeout=20)
        after = await scrape(http, gw.url + "/metrics")
        assert after.value("mcp_gateway_connector_up", connector="up", type="mcp") == 1
        assert after.delta(before, "mcp_gateway_connector_reconnects_total", connector="up") == 1
        assert after.value("mcp_gateway_catalog_items", connector="up", kind="tools") > 0
        assert "result" in await client.call("tools/call", {"name": "up_pid", "arguments": {}})
