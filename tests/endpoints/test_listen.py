"""2026-07-28 ``subscriptions/listen`` on endpoints: a ``list_changed`` reaches only the listen
streams of the endpoints whose selection changed (raw HTTP, the wire as the revision defines it)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from tests.e2e import testkit
from tests.support import config_from, running_gateway

MODERN = "2026-07-28"
CONFIG = """
audit: {enabled: false}
telemetry: {metrics: false}
connectors:
  - {name: one, type: testkit, tools: 1}
  - {name: two, type: testkit, tools: 1}
  - name: team
    type: static
    prompts: [{name: a, messages: [{role: user, text: a}]}, {name: b, messages: [{role: user, text: b}]}]
endpoints:
  - {name: first, select: [{connector: one}]}
  - {name: second, select: [{connector: two}, {prompts: [team_a]}]}
  - {name: closed, select: [{connector: two}], principals: [anonymous]}
"""


def _meta() -> dict[str, Any]:
    return {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}


def _listen(rid: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": True, "promptsListChanged": True}, "_meta": _meta()}}


HEADERS = {"Content-Type": "application/json", "MCP-Protocol-Version": MODERN, "Mcp-Method": "subscriptions/listen",
           "Accept": "application/json, text/event-stream"}


async def _events(resp: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    async for line in resp.content:
        if line.startswith(b"data: ") and line.strip() != b"data:":
            yield json.loads(line[6:])


async def test_listen_streams_of_other_endpoints_hear_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    testkit.register(monkeypatch)
    async with running_gateway(CONFIG) as gw, aiohttp.ClientSession() as http, \
            http.post(gw.url + "/mcp/first", json=_listen(1), headers=HEADERS) as first_resp, \
            http.post(gw.url + "/mcp/second", json=_listen(2), headers=HEADERS) as second_resp:
        first, second = _events(first_resp), _events(second_resp)
        for stream in (first, second):
            ack = await asyncio.wait_for(stream.__anext__(), 5)
            assert ack["method"] == "notifications/subscriptions/acknowledged"
        gw.gateway.connectors["one"].add_tool("added")  # in first's selection only
        change = await asyncio.wait_for(first.__anext__(), 5)
        assert change["method"] == "notifications/tools/list_changed"
        assert change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 1
        # Then a change of second's selection (its prompts, by a reload). Had the first change
        # reached second, it would be first on its stream: deliveries keep their order.
        new = CONFIG.replace("{prompts: [team_a]}", "{prompts: [team_b]}")
        await gw.gateway.reload(config_from(new))
        change = await asyncio.wait_for(second.__anext__(), 5)
        assert change["method"] == "notifications/prompts/list_changed"
        assert change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 2


async def test_cache_scope_stays_honest(monkeypatch: pytest.MonkeyPatch) -> None:
    """An endpoint's listing is the same for every caller (no access rules): ``public``; one of an
    endpoint that admits only some principals is not for everyone: ``private``."""
    testkit.register(monkeypatch)
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": _meta()}}
    headers = {**HEADERS, "Mcp-Method": "tools/list"}
    async with running_gateway(CONFIG) as gw, aiohttp.ClientSession() as http:
        scopes = {}
        for name in ("first", "closed"):
            async with http.post(f"{gw.url}/mcp/{name}", json=message, headers=headers) as resp:
                result = (await resp.json())["result"]
            prefix = "two_" if name == "closed" else "one_"
            assert result["tools"] and all(t["name"].startswith(prefix) for t in result["tools"])
            assert result["ttlMs"] > 0
            scopes[name] = result["cacheScope"]
        assert scopes == {"first": "public", "closed": "private"}
