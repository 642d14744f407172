"""A request stream (older revisions) broken on one replica is resumed with ``Last-Event-ID`` on
another, from the event log in the shared store; when its replica is gone, the resumed stream ends
with an error response instead of leaving the client waiting."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from tests.e2e import testkit
from tests.scale.harness import replicas, shared_state, sse_events

CONFIG = """
audit: {enabled: false}
telemetry: {metrics: false}
gateway: {name: scaled, cursor_secret: shared-by-replicas}
connectors:
  - {name: kit, type: testkit, tools: 1}
""" + shared_state()

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(autouse=True)
def _kind(monkeypatch: pytest.MonkeyPatch) -> None:
    testkit.register(monkeypatch)


async def _session(http: aiohttp.ClientSession, url: str) -> dict[str, str]:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"sampling": {}}, "clientInfo": {"name": "t", "version": "1"}}}
    async with http.post(url, json=init, headers=HEADERS) as resp:
        assert resp.status == 200
        return {**HEADERS, "Mcp-Session-Id": resp.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"}


async def _break_after_the_sampling_request(http: aiohttp.ClientSession, url: str, headers: dict[str, str]
                                            ) -> tuple[str, dict[str, Any]]:
    """POST a call that asks for sampling; read up to that request, then drop the connection."""
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "kit_sample", "arguments": {"q": "hi"}}}
    resp = await http.post(url, json=call, headers=headers)
    assert resp.content_type == "text/event-stream"
    async for event_id, message in sse_events(resp):
        if message is not None and message.get("method") == "sampling/createMessage":
            assert event_id is not None
            resp.close()  # the connection breaks (a proxy restarted, the client's network changed)
            return event_id, message
    raise AssertionError("no sampling request")


async def test_a_stream_broken_on_one_replica_resumes_on_another() -> None:
    async with replicas(CONFIG) as gws, aiohttp.ClientSession() as http:
        headers = await _session(http, gws[0].mcp_url)
        last_id, asked = await _break_after_the_sampling_request(http, gws[0].mcp_url, headers)
        assert last_id.startswith(gws[0].gateway.state.replica + ".")
        # The client answers through replica 2 (routed to replica 0, which runs the call) ...
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {
            "role": "assistant", "model": "m", "content": {"type": "text", "text": "there"}}}
        async with http.post(gws[2].mcp_url, json=answer, headers=headers) as resp:
            assert resp.status == 202
        # ... and resumes its stream on replica 1: the response comes from the shared event log.
        async with http.get(gws[1].mcp_url, headers={**headers, "Last-Event-ID": last_id}) as resp:
            assert resp.status == 200
            got = [m async for _, m in sse_events(resp) if m is not None]
        assert got[-1]["id"] == 7 and got[-1]["result"]["content"][0]["text"] == "sampled: there", got


async def test_a_stream_of_a_replica_that_is_gone_ends_with_an_error_response() -> None:
    async with replicas(CONFIG, n=2) as gws, aiohttp.ClientSession() as http:
        headers = await _session(http, gws[0].mcp_url)
        last_id, _ = await _break_after_the_sampling_request(http, gws[0].mcp_url, headers)
        await gws[0].gateway.state.close()  # replica 0 stops listening: as if it died
        async with http.get(gws[1].mcp_url, headers={**headers, "Last-Event-ID": last_id}) as resp:
            assert resp.status == 200
            got = [m async for _, m in sse_events(resp) if m is not None]
        assert got == [{"jsonrpc": "2.0", "id": 7, "error": {
            "code": -32603, "message": "The replica running this request stopped before answering it; "
                                       "send the request again"}}], got


async def test_nothing_to_resume_is_refused_as_before() -> None:
    async with replicas(CONFIG, n=2) as gws, aiohttp.ClientSession() as http:
        headers = await _session(http, gws[0].mcp_url)
        other = gws[0].gateway.state.replica + ".99:3"
        async with http.get(gws[1].mcp_url, headers={**headers, "Last-Event-ID": other}) as resp:
            assert resp.status == 400
            assert "nothing to resume" in (await resp.json())["error"]["message"]
