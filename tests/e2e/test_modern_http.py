"""Revision 2026-07-28 served on /mcp beside the older revisions, on the wire (raw HTTP, no SDK):
no session, per-request ``_meta``, request-metadata headers, ``server/discover``, ``resultType``
and cache hints, multi round-trip requests in both directions, ``subscriptions/listen``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from tests.e2e import testkit
from tests.support import running_gateway

MODERN = "2026-07-28"
CONFIG = """
audit: {enabled: false}
telemetry: {metrics: false}
gateway: {cursor_secret: test-secret, request_timeout_s: 10}
connectors:
  - {name: kit, type: testkit, tools: 2}
  - name: team
    type: static
    resources: [{uri: "docs://runbook", name: runbook, text: "# Runbook"}]
"""


def _meta(caps: dict[str, Any] | None = None, log_level: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                            "io.modelcontextprotocol/clientCapabilities": caps or {}}
    if log_level is not None:
        meta["io.modelcontextprotocol/logLevel"] = log_level
    return meta


def _message(rid: int, method: str, params: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**(params or {}), "_meta": _meta(**meta)}}


def _headers(message: dict[str, Any], sse: bool = True) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "MCP-Protocol-Version": MODERN, "Mcp-Method": message["method"],
               "Accept": "application/json, text/event-stream" if sse else "application/json"}
    params = message.get("params") or {}
    name = params.get("name") if message["method"] in ("tools/call", "prompts/get") else params.get("uri")
    if message["method"] in ("tools/call", "prompts/get", "resources/read") and isinstance(name, str):
        headers["Mcp-Name"] = name
    return headers


async def _events(resp: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    """JSON-RPC messages of a response, whether one JSON body or an SSE stream."""
    if resp.content_type == "application/json":
        yield await resp.json()
        return
    async for line in resp.content:
        if line.startswith(b"data: ") and line.strip() != b"data:":
            yield json.loads(line[6:])


async def _post(http: aiohttp.ClientSession, url: str, message: dict[str, Any],
                headers: dict[str, str] | None = None) -> tuple[int, list[dict[str, Any]]]:
    async with http.post(url, json=message, headers=headers or _headers(message)) as resp:
        return resp.status, [m async for m in _events(resp)]


@pytest.fixture
async def gw(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    testkit.register(monkeypatch)
    async with running_gateway(CONFIG) as gw:
        yield gw


async def test_discover_and_listing_carry_the_new_fields(gw: Any) -> None:
    async with aiohttp.ClientSession() as http:
        status, [reply] = await _post(http, gw.mcp_url, _message(1, "server/discover"))
        assert status == 200
        result = reply["result"]
        assert result["supportedVersions"] == [MODERN]  # legacy revisions are reached through initialize
        assert "tools" in result["capabilities"] and result["resultType"] == "complete"
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-gateway"
        async with http.post(gw.mcp_url, json=_message(2, "tools/list"), headers=_headers(_message(2, "tools/list"))) as resp:
            assert "Mcp-Session-Id" not in resp.headers  # no session in this revision
            listing = (await resp.json())["result"]
        assert listing["resultType"] == "complete" and listing["cacheScope"] == "public"
        assert listing["ttlMs"] == 60_000
        names = [t["name"] for t in listing["tools"]]
        assert "kit_echo_000" in names and names == sorted(names)  # deterministic order
        # An older client on the same endpoint sees none of it.
        assert gw.gateway.sessions == {}


async def test_a_call_needs_no_session_and_answers_in_the_new_shape(gw: Any) -> None:
    async with aiohttp.ClientSession() as http:
        msg = _message(1, "tools/call", {"name": "kit_echo_001", "arguments": {"x": 1}})
        status, [reply] = await _post(http, gw.mcp_url, msg)
        assert status == 200 and reply["id"] == 1
        assert reply["result"]["resultType"] == "complete"
        assert json.loads(reply["result"]["content"][0]["text"]) == {"x": 1}
        read = _message(2, "resources/read", {"uri": "docs://runbook"})
        _, [reply] = await _post(http, gw.mcp_url, read)
        assert reply["result"]["contents"][0]["text"] == "# Runbook" and reply["result"]["cacheScope"] == "private"
        # Resource not found is -32602 in this revision (it was -32002).
        missing = _message(3, "resources/read", {"uri": "docs://nope"})
        _, [reply] = await _post(http, gw.mcp_url, missing)
        assert reply["error"]["code"] == -32602


async def test_refusals_are_modern_errors_a_dual_era_client_can_recognise(gw: Any) -> None:
    async with aiohttp.ClientSession() as http:
        msg = _message(1, "tools/call", {"name": "kit_echo_001", "arguments": {}})
        headers = {**_headers(msg), "Mcp-Name": "kit_echo_000"}
        status, [reply] = await _post(http, gw.mcp_url, msg, headers)
        assert status == 400 and reply["error"]["code"] == -32020 and "Mcp-Name" in reply["error"]["message"]
        headers = _headers(msg)
        del headers["Mcp-Method"]
        status, [reply] = await _post(http, gw.mcp_url, msg, headers)
        assert status == 400 and reply["error"]["code"] == -32020
        old = {**_headers(msg), "MCP-Protocol-Version": "1900-01-01"}
        status, [reply] = await _post(http, gw.mcp_url, msg, old)
        assert status == 400 and reply["error"]["code"] == -32020  # header and body disagree
        msg["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "1900-01-01"
        status, [reply] = await _post(http, gw.mcp_url, msg, old)
        assert status == 400 and reply["id"] == 1 and reply["error"]["code"] == -32022
        assert reply["error"]["data"] == {"supported": [MODERN], "requested": "1900-01-01"}
        del msg["params"]["_meta"]
        status, [reply] = await _post(http, gw.mcp_url, msg)
        assert status == 400 and reply["id"] == 1 and reply["error"]["code"] == -32602  # _meta is required
        unknown = _message(2, "tools/frobnicate")
        status, [reply] = await _post(http, gw.mcp_url, unknown)
        assert status == 404 and reply["error"]["code"] == -32601
        ping = _message(3, "ping")
        status, [reply] = await _post(http, gw.mcp_url, ping)
        assert status == 404 and reply["error"]["code"] == -32601  # ping is gone in 2026-07-28


async def test_progress_and_logs_go_to_the_request_stream_logs_only_when_asked(gw: Any) -> None:
    async with aiohttp.ClientSession() as http:
        msg = _message(1, "tools/call", {"name": "kit_progress", "arguments": {"steps": 2}})
        msg["params"]["_meta"]["progressToken"] = "p1"
        _, events = await _post(http, gw.mcp_url, msg)
        assert [e["params"]["progress"] for e in events if e.get("method") == "notifications/progress"] == [1, 2]
        assert events[-1]["result"]["content"][0]["text"] == "2 steps"
        quiet = _message(2, "tools/call", {"name": "kit_log", "arguments": {"level": "error"}})
        _, events = await _post(http, gw.mcp_url, quiet)
        assert [e for e in events if e.get("method") == "notifications/message"] == []
        loud = _message(3, "tools/call", {"name": "kit_log", "arguments": {"level": "warning"}}, log_level="info")
        _, events = await _post(http, gw.mcp_url, loud)
        assert [e["params"]["level"] for e in events if e.get("method") == "notifications/message"] == ["warning"]


async def test_an_upstream_request_mid_call_becomes_an_input_required_round_trip(gw: Any) -> None:
    """An older-style connector asks for sampling in the middle of its call: the client gets
    InputRequiredResult, retries with inputResponses, and gets the call's result."""
    caps = {"sampling": {}}
    async with aiohttp.ClientSession() as http:
        msg = _message(1, "tools/call", {"name": "kit_sample", "arguments": {"q": "2+2?"}}, caps=caps)
        _, [first] = await _post(http, gw.mcp_url, msg)
        result = first["result"]
        assert result["resultType"] == "input_required"
        [(key, request)] = result["inputRequests"].items()
        assert request["method"] == "sampling/createMessage"
        assert request["params"]["messages"][0]["content"]["text"] == "2+2?"
        assert len(gw.gateway.parked) == 1
        retry = _message(2, "tools/call", {"name": "kit_sample", "arguments": {"q": "2+2?"},
                                           "requestState": result["requestState"],
                                           "inputResponses": {key: {"role": "assistant", "model": "m",
                                                                    "content": {"type": "text", "text": "4"}}}},
                         caps=caps)
        _, [final] = await _post(http, gw.mcp_url, retry)
        assert final["id"] == 2 and final.get("result", {}).get("content", [{}])[0].get("text") == "sampled: 4", final
        assert len(gw.gateway.parked) == 0
        # The same state again: the call it continued is over.
        _, [again] = await _post(http, gw.mcp_url, {**retry, "id": 3})
        assert again["error"]["code"] == -32602


async def test_request_state_is_bound_to_the_request_and_refused_when_tampered(gw: Any) -> None:
    caps = {"sampling": {}}
    async with aiohttp.ClientSession() as http:
        msg = _message(1, "tools/call", {"name": "kit_sample", "arguments": {"q": "a"}}, caps=caps)
        _, [first] = await _post(http, gw.mcp_url, msg)
        state = first["result"]["requestState"]
        tampered = state[:-2] + ("AA" if not state.endswith("AA") else "BB")
        for bad_state, args in ((tampered, {"q": "a"}), (state, {"q": "other"})):
            retry = _message(2, "tools/call", {"name": "kit_sample", "arguments": args, "requestState": bad_state,
                                               "inputResponses": {}}, caps=caps)
            _, [reply] = await _post(http, gw.mcp_url, retry)
            assert reply["error"]["code"] == -32602, reply
        # The genuine state still works after the refused attempts.
        key = next(iter(first["result"]["inputRequests"]))
        retry = _message(3, "tools/call", {"name": "kit_sample", "arguments": {"q": "a"}, "requestState": state,
                                           "inputResponses": {key: {"role": "assistant", "model": "m",
                                                                    "content": {"type": "text", "text": "ok"}}}},
                         caps=caps)
        _, [final] = await _post(http, gw.mcp_url, retry)
        assert final["result"]["content"][0]["text"] == "sampled: ok"


async def test_no_input_request_without_the_client_capability(gw: Any) -> None:
    async with aiohttp.ClientSession() as http:
        msg = _message(1, "tools/call", {"name": "kit_sample", "arguments": {}})
        status, [reply] = await _post(http, gw.mcp_url, msg)
        assert status == 400 and reply["id"] == 1 and reply["error"]["code"] == -32021, reply
        assert reply["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}
        assert len(gw.gateway.parked) == 0


async def test_a_connector_asking_the_new_way_reaches_a_new_client_with_a_sealed_state(gw: Any) -> None:
    caps = {"elicitation": {}}
    async with aiohttp.ClientSession() as http:
        state = None
        key = ""
        answers = iter(["ada", "grace"])
        for rid in range(1, 4):
            params = {"name": "kit_ask", "arguments": {"rounds": 2}}
            if state is not None:
                params.update(requestState=state, inputResponses={key: {"action": "accept", "content": {"name": next(answers)}}})
            _, [reply] = await _post(http, gw.mcp_url, _message(rid, "tools/call", params, caps=caps))
            result = reply["result"]
            if result["resultType"] == "complete":
                break
            assert not result["requestState"].startswith("kit-round-")  # sealed, not the connector's own
            [key] = result["inputRequests"]
            state = result["requestState"]
        assert result["content"][0]["text"] == "answers: ada,grace"


async def test_listen_acknowledges_then_delivers_tagged_list_changes(gw: Any) -> None:
    kit = gw.gateway.connectors["kit"]
    async with aiohttp.ClientSession() as http:
        msg = _message(7, "subscriptions/listen", {"notifications": {"toolsListChanged": True,
                                                                     "resourceSubscriptions": ["docs://runbook"]}})
        async with http.post(gw.mcp_url, json=msg, headers=_headers(msg)) as resp:
            assert resp.content_type == "text/event-stream"
            events = _events(resp)
            ack = await asyncio.wait_for(events.__anext__(), 5)
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 7
            assert ack["params"]["notifications"] == {"toolsListChanged": True, "resourceSubscriptions": ["docs://runbook"]}
            kit.add_tool("added_later")
            change = await asyncio.wait_for(events.__anext__(), 5)
            assert change["method"] == "notifications/tools/list_changed"
            assert change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 7
            assert len(gw.gateway.listeners) == 1
        for _ in range(50):  # the client closed the stream: the listener goes away
            if len(gw.gateway.listeners) == 0:
                break
            await asyncio.sleep(0.1)
        assert len(gw.gateway.listeners) == 0


async def test_legacy_sessions_still_work_beside_it(gw: Any) -> None:
    async with aiohttp.ClientSession() as http:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}}
        async with http.post(gw.mcp_url, json=init, headers={"Accept": "application/json, text/event-stream"}) as resp:
            assert resp.status == 200 and "Mcp-Session-Id" in resp.headers
            body = await resp.json()
        assert body["result"]["protocolVersion"] == "2025-11-25"
        assert "resultType" not in body["result"]
