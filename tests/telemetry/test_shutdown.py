"""Graceful shutdown of a real ``mcp-gateway serve`` process on SIGTERM, with live sessions:
readiness turns false at once, new sessions are refused, the request in flight finishes and is
answered, the SSE stream ends cleanly, the audit queue is flushed, and the grace period bounds it all.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time

import aiohttp

from tests.filters.mcp_http import McpHttp
from tests.support import gateway_process
from tests.telemetry.backend import backend, openapi_connector_yaml
from tests.telemetry.streams import NotificationStream


def config_text(url: str, tmp_path, grace: float) -> str:
    return (f"gateway:\n  shutdown_grace_s: {grace}\n  http: {{json_response: true}}\n"
            f"audit: {{store: 'sqlite:///{tmp_path}/audit.db', jsonl: '{tmp_path}/audit.jsonl', "
            f"spill_path: '{tmp_path}/spill.jsonl'}}\n"
            "connectors:\n" + openapi_connector_yaml(url))


async def wait_not_ready(http: aiohttp.ClientSession, url: str, timeout: float = 10.0) -> int:
    """Poll /readyz until it stops answering 200 (each poll is a real round trip, not a sleep)."""
    async with asyncio.timeout(timeout):
        while True:
            async with http.get(url + "/readyz") as resp:
                if resp.status != 200:
                    return resp.status


async def test_sigterm_drains_in_flight_requests_and_flushes_audit(tmp_path):
    async with backend() as be, aiohttp.ClientSession() as http:
        async with gateway_process(config_text(be.url, tmp_path, grace=20)) as proc:
            client = await McpHttp(http, proc.mcp_url).initialize()
            async with NotificationStream(http, proc.mcp_url, client.headers) as stream, \
                    NotificationStream(http, proc.url + "/sse", {}) as legacy:
                assert (await legacy.wait_for_event("endpoint"))["data"].startswith("/")
                for i in range(3):
                    assert "result" in await client.call("tools/call", {"name": "api_getItem",
                                                                         "arguments": {"id": str(i)}})
                slow = asyncio.create_task(client.call("tools/call", {"name": "api_slow", "arguments": {}}))
                await asyncio.wait_for(be.slow_started.wait(), 10)

                proc.proc.send_signal(signal.SIGTERM)
                assert await wait_not_ready(http, proc.url) == 503
                # New sessions are refused while draining.
                refused = await McpHttp(http, proc.mcp_url).post({
                    "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                        "protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": {"name": "late", "version": "1"}}})
                assert refused.status == 503
                async with http.get(proc.url + "/sse", headers={"Accept": "text/event-stream"}) as late:
                    assert late.status == 503
                assert proc.proc.returncode is None  # still waiting for the call in flight

                be.release()
                reply = await asyncio.wait_for(slow, 10)
                assert reply["result"]["structuredContent"] == {"slow": "done"}
                # Both SSE streams (Streamable HTTP GET stream, legacy SSE) end cleanly.
                await asyncio.wait_for(stream.ended.wait(), 10)
                await asyncio.wait_for(legacy.ended.wait(), 10)
                assert stream.clean_end is True and legacy.clean_end is True
            assert await asyncio.wait_for(proc.proc.wait(), 15) == 0

    # Every call, the one that finished during the drain included, reached the audit log.
    events = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    calls = [(e["target"], e["outcome"]) for e in events if e["method"] == "tools/call"]
    assert calls.count(("api_getItem", "ok")) == 3
    assert ("api_slow", "ok") in calls


async def test_the_grace_period_bounds_the_drain(tmp_path):
    async with backend() as be, aiohttp.ClientSession() as http:
        async with gateway_process(config_text(be.url, tmp_path, grace=0.5)) as proc:
            client = await McpHttp(http, proc.mcp_url).initialize()
            stuck = asyncio.create_task(client.post({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                                                     "params": {"name": "api_slow", "arguments": {}}}))
            await asyncio.wait_for(be.slow_started.wait(), 10)
            started = time.monotonic()
            proc.proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.proc.wait(), 15) == 0
            # The backend never answered: the gateway gave up after its grace period, not later.
            assert time.monotonic() - started < 0.5 + 5
            await asyncio.gather(stuck, return_exceptions=True)
    # The abandoned call is still accounted for in the audit log.
    events = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [e["target"] for e in events if e["method"] == "tools/call"] == ["api_slow"]
