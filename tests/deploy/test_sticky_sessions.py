"""Several replicas: two ``mcp-gateway serve`` processes on loopback behind the sticky router rule
of deploy/ (learn Mcp-Session-Id from the response, route by it). Real SDK clients keep working
across many requests, streams and pagination; sessions spread over both replicas. Without
stickiness a session's second request reaches the other replica and gets 404, which is why the
router is part of the deployment."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

import aiohttp
from mcp.client.streamable_http import streamable_http_client
from mcp.types import PaginatedRequestParams

from tests.deploy.sticky_proxy import sticky_proxy
from tests.e2e.clients import LEGACY, connect
from tests.filters.mcp_http import McpHttp
from tests.support import gateway_process
from tests.telemetry.metrics_client import scrape

CONFIG = """\
gateway:
  page_size: 2
  # Replicas share the cursor secret, so a cursor is valid whichever replica issued it.
  cursor_secret: shared-by-every-replica
audit: {enabled: false}
connectors:
  - name: kit
    type: static
    prompts:
""" + "".join(f"      - {{name: p{i}, messages: [{{text: 'prompt {i} for {{who}}'}}], "
              f"arguments: [{{name: who, required: true}}]}}\n" for i in range(5)) + """\
    resources:
      - {uri: "kit://readme", name: readme, text: "hello from a replica"}
"""


async def exercise(url: str) -> list[str]:
    """One SDK session doing several requests; returns the prompt names it paged through."""
    async with connect(streamable_http_client(url + "/mcp"), LEGACY) as s:
        names: list[str] = []
        cursor = None
        while True:
            page = await s.list_prompts(params=PaginatedRequestParams(cursor=cursor))
            names += [p.name for p in page.prompts]
            cursor = page.next_cursor
            if not cursor:
                break
        prompt = await s.get_prompt("kit_p3", {"who": "ops"})
        assert prompt.messages[0].content.text == "prompt 3 for ops"
        contents = await s.read_resource("kit://readme")
        assert contents.contents[0].text == "hello from a replica"
        await s.send_ping()
        return names


async def test_sessions_stick_to_their_replica():
    async with AsyncExitStack() as stack:
        replicas = [await stack.enter_async_context(gateway_process(CONFIG)) for _ in range(2)]
        proxy = await stack.enter_async_context(sticky_proxy([r.url for r in replicas]))
        results = await asyncio.gather(*(exercise(proxy.url) for _ in range(4)))
        assert all(names == [f"kit_p{i}" for i in range(5)] for names in results)
        # Four sessions, initialized round robin: two on each replica, every request routed home.
        assert sorted(proxy.table.values()) == [0, 0, 1, 1]
        assert min(proxy.hits) > 4
        # While sessions are open each replica reports its own (scraped directly, as Prometheus does).
        http = await stack.enter_async_context(aiohttp.ClientSession())
        clients = [await McpHttp(http, proxy.url + "/mcp").initialize() for _ in range(2)]
        for replica in replicas:
            samples = await scrape(http, replica.url + "/metrics")
            assert samples.value("mcp_gateway_sessions_active", transport="streamable_http") == 1
        for client in clients:
            assert "result" in await client.call("prompts/list")


async def test_without_stickiness_the_other_replica_does_not_know_the_session():
    async with AsyncExitStack() as stack:
        replicas = [await stack.enter_async_context(gateway_process(CONFIG)) for _ in range(2)]
        proxy = await stack.enter_async_context(sticky_proxy([r.url for r in replicas], sticky=False))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        client = McpHttp(http, proxy.url + "/mcp")
        init = await client.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "rr", "version": "1"}}})
        assert init.status == 200
        client.headers["Mcp-Session-Id"] = init.headers["Mcp-Session-Id"]
        # Round robin sends the session's next message to the replica that never saw it.
        resp = await client.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert resp.status == 404
        assert proxy.hits == [1, 1]
