"""An endpoint's Streamable HTTP sessions are shared by replicas as ``/mcp``'s are: three replicas
sharing Redis behind HAProxy ``balance roundrobin`` (no stickiness), an SDK 2025-11-25 client on
``/mcp/{name}`` whose every request lands on another replica sees only the endpoint's selection
(renamed, paginated with cursors read by other replicas), its calls answered, sampling routed back
to the replica running the call; the session is bound to its principal on every replica, and its
id is unknown on ``/mcp`` and on another endpoint."""

from __future__ import annotations

import json
import secrets

import aiohttp
import httpx2
import pytest
from mcp import MCPError
from mcp.client.streamable_http import streamable_http_client

from tests.connectors.mcp.test_gateway_e2e import all_tools
from tests.e2e import testkit
from tests.e2e.clients import CORE_ONLY, LEGACY, connect
from tests.scale.harness import answer_in_upper_case, replicas, roundrobin_proxy, shared_state
from tests.scale.test_roundrobin import _text

ALICE = "alice-key-" + secrets.token_hex(8)
BOB = "bob-key-" + secrets.token_hex(8)

CONFIG = CORE_ONLY + f"""
gateway: {{name: scaled, page_size: 2, cursor_secret: shared-by-replicas}}
auth:
  api_keys:
    - {{name: alice, key: {ALICE}}}
    - {{name: bob, key: {BOB}}}
connectors:
  - {{name: kit, type: testkit, tools: 8}}
endpoints:
  - name: ops
    select:
      - {{connector: kit, tools: [kit_echo_000, kit_echo_001, kit_echo_002, kit_sample]}}
    rename: {{kit_echo_000: first}}
  - name: other
    select:
      - {{connector: kit, tools: [kit_echo_003]}}
"""
OPS_TOOLS = {"first", "kit_echo_001", "kit_echo_002", "kit_sample"}


@pytest.fixture(autouse=True)
def _kind(monkeypatch: pytest.MonkeyPatch) -> None:
    testkit.register(monkeypatch)


async def _status(http: aiohttp.ClientSession, url: str, key: str, session_id: str) -> int:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": session_id,
               "Authorization": f"Bearer {key}"}
    async with http.post(url, data=json.dumps(body), headers=headers) as resp:
        await resp.read()
        return resp.status


async def test_an_endpoint_session_is_served_by_every_replica() -> None:
    async with replicas(CONFIG + shared_state()) as gws, roundrobin_proxy([g.url for g in gws]) as url, \
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}) as client, \
            connect(streamable_http_client(f"{url}/mcp/ops", http_client=client), LEGACY,
                    sampling_callback=answer_in_upper_case) as session, \
            aiohttp.ClientSession() as http:
        for _ in range(3):  # every listing on another replica, cursors minted by one read by the next
            names = await all_tools(session)
            assert set(names) == OPS_TOOLS and len(names) == len(OPS_TOOLS)
        for i in range(4):
            assert _text(await session.call_tool("first", {"i": i})) == f'{{"i": {i}}}'
            assert _text(await session.call_tool("kit_echo_001", {"i": i})) == f'{{"i": {i}}}'
        # A tool outside the selection is unknown here, on whichever replica the call lands.
        for _ in range(3):
            with pytest.raises(MCPError) as refused:
                await session.call_tool("kit_echo_003", {})
            assert refused.value.error.code == -32602 and "kit_echo_003" in refused.value.error.message
        # Sampling's answer is POSTed to another replica and routed to the one running the call.
        for q in ("one", "two", "three"):
            assert _text(await session.call_tool("kit_sample", {"q": q})) == f"sampled: {q.upper()}"
        # The session reached every replica: each rebuilt it on the endpoint from the shared record.
        ids = [{sid for sid, s in g.gateway.sessions.items() if g.gateway.endpoints.of(s) == "ops"} for g in gws]
        assert len(set.union(*ids)) == 1 and all(ids)
        [sid] = set.union(*ids)
        # Bound to alice on every replica; unknown on /mcp and on another endpoint, on every replica.
        for g in gws:
            assert await _status(http, f"{g.url}/mcp/ops", BOB, sid) == 403
            assert await _status(http, f"{g.url}/mcp", ALICE, sid) == 404
            assert await _status(http, f"{g.url}/mcp/other", ALICE, sid) == 404
            assert await _status(http, f"{g.url}/mcp/ops", ALICE, sid) == 200
        # And a /mcp session is unknown on the endpoint, on the replicas that did not start it too.
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        async with http.post(f"{gws[0].url}/mcp", data=json.dumps(init), headers={
                "Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                "Authorization": f"Bearer {ALICE}"}) as resp:
            assert resp.status == 200
            plain = resp.headers["Mcp-Session-Id"]
        for g in gws:
            assert await _status(http, f"{g.url}/mcp/ops", ALICE, plain) == 404
        assert await _status(http, f"{gws[1].url}/mcp", ALICE, plain) == 200
