"""2026-07-28 clients through replicas behind round robin: a call parked on one replica (an older
upstream asked mid-call) is resumed by a retry landing on another, routed over the shared store."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from mcp import types
from mcp.client import ClientRequestContext

from tests.e2e import testkit
from tests.e2e.clients import MODERN, sdk_client
from tests.scale.harness import replicas, roundrobin_proxy, shared_state

CONFIG = """
audit: {enabled: false}
telemetry: {metrics: false}
gateway: {name: scaled, cursor_secret: shared-by-replicas}
connectors:
  - {name: kit, type: testkit, tools: 2}
"""


@pytest.fixture(autouse=True)
def _kind(monkeypatch: pytest.MonkeyPatch) -> None:
    testkit.register(monkeypatch)


async def _never(ctx: ClientRequestContext, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    raise AssertionError("2026-07-28: the input request comes back in the result, not as a request")


async def test_sdk_modern_client_resumes_a_call_parked_on_another_replica() -> None:
    async with replicas(CONFIG + shared_state()) as gws, roundrobin_proxy([g.url for g in gws]) as url, \
            sdk_client("streamable_http", url=url, revision=MODERN, sampling_callback=_never) as session:
        for q in ("abc", "hello", "xyz"):
            first = await session.call_tool("kit_sample", {"q": q}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.input_requests is not None
            assert sum(len(g.gateway.parked) for g in gws) == 1  # the call runs on, parked on one replica
            [(key, asked)] = first.input_requests.items()
            assert asked.method == "sampling/createMessage"
            answer: dict[str, Any] = {key: types.CreateMessageResult(
                role="assistant", model="t", content=types.TextContent(type="text", text=q[::-1]))}
            # The retry lands on the next replica, which routes it to the one holding the call.
            result = await session.call_tool("kit_sample", {"q": q}, input_responses=answer,
                                             request_state=first.request_state)
            content = result.content[0]
            assert isinstance(content, types.TextContent) and content.text == f"sampled: {q[::-1]}"
        assert sum(len(g.gateway.parked) for g in gws) == 0


def _message(rid: int, params: dict[str, Any]) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"sampling": {}}}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {**params, "_meta": meta}}


async def test_a_retry_for_a_replica_that_is_gone_gets_a_clear_error_at_once() -> None:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "kit_sample"}
    async with replicas(CONFIG + shared_state(), n=2) as gws, aiohttp.ClientSession() as http:
        first = _message(1, {"name": "kit_sample", "arguments": {"q": "a"}})
        async with http.post(gws[0].mcp_url, json=first, headers=headers) as resp:
            result = (await resp.json())["result"]
        assert result["resultType"] == "input_required" and len(gws[0].gateway.parked) == 1
        key = next(iter(result["inputRequests"]))
        answer = {key: {"role": "assistant", "model": "m", "content": {"type": "text", "text": "b"}}}
        await gws[0].gateway.state.close()  # replica 0 stops listening: as if it died
        retry = _message(2, {"name": "kit_sample", "arguments": {"q": "a"}, "requestState": result["requestState"],
                             "inputResponses": answer})
        async with http.post(gws[1].mcp_url, json=retry, headers=headers) as resp:
            body = await resp.json()
        assert body["error"]["code"] == -32602 and "replica running the call" in body["error"]["message"], body


async def test_a_listen_stream_opened_through_the_proxy_gets_list_changes() -> None:
    """``subscriptions/listen`` may land on any replica: every replica announces its own catalog
    changes to the listeners it holds (each has its own connectors), so the stream hears them."""
    from tests.e2e.test_modern_http import _events, _headers
    from tests.e2e.test_modern_http import _message as modern_message

    async with replicas(CONFIG + shared_state()) as gws, roundrobin_proxy([g.url for g in gws]) as url, \
            aiohttp.ClientSession() as http:
        streams: list[aiohttp.ClientResponse] = []
        for rid in range(3):  # three listen streams, one on each replica
            msg = modern_message(rid, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
            resp = await http.post(url + "/mcp", json=msg, headers=_headers(msg))
            streams.append(resp)
            events = _events(resp)
            ack = await asyncio.wait_for(events.__anext__(), 5)
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            held = sum(len(g.gateway.listeners) for g in gws)
            assert held == rid + 1
            if rid == 2:
                assert all(len(g.gateway.listeners) == 1 for g in gws)  # round robin: one on each
                for g in gws:
                    g.gateway.connectors["kit"].add_tool("added")  # type: ignore[attr-defined]
                change = await asyncio.wait_for(events.__anext__(), 5)
                assert change["method"] == "notifications/tools/list_changed"
        for resp in streams:
            resp.close()
