"""Streamable HTTP on the wire (raw aiohttp client): session ids, status codes, DNS-rebinding
guards, the GET stream, progress on the POST stream, cancellation and sampling."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from tests.e2e import testkit
from tests.e2e.clients import CORE_ONLY
from tests.e2e.rawhttp import ACCEPT, initialize, messages_of, sse_events
from tests.support import RunningGateway, running_gateway

CONFIG = CORE_ONLY + """
gateway: {name: raw, page_size: 4}
connectors:
  - {name: kit, type: testkit, tools: 3}
"""


@pytest.fixture
async def gw(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RunningGateway]:
    testkit.register(monkeypatch)
    async with running_gateway(CONFIG) as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


def _kit(gw: RunningGateway) -> testkit.KitConnector:
    connector = gw.connectors["kit"]
    assert isinstance(connector, testkit.KitConnector)
    return connector


async def _next_message(events: AsyncIterator[tuple[str, str]]) -> dict[str, Any]:
    async with asyncio.timeout(5):
        event, data = await anext(events)
    assert event == "message"
    return json.loads(data)  # type: ignore[no-any-return]


async def test_session_id_lifecycle(gw: RunningGateway, http: aiohttp.ClientSession) -> None:
    session = await initialize(http, gw.mcp_url)
    assert len(session.id) >= 16 and session.id in gw.sessions
    assert gw.sessions[session.id].transport == "streamable_http"
    assert (await session.request("ping")) == {"jsonrpc": "2.0", "id": session._next, "result": {}}

    ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
    async with http.post(gw.mcp_url, json=ping, headers={"Accept": ACCEPT}) as resp:
        assert resp.status == 400
        assert (await resp.json())["error"]["code"] == -32600
    async with http.post(gw.mcp_url, json=ping, headers={"Accept": ACCEPT, "Mcp-Session-Id": "nope"}) as resp:
        assert resp.status == 404
        assert "error" in await resp.json()

    async with http.delete(gw.mcp_url, headers={"Mcp-Session-Id": session.id}) as resp:
        assert resp.status == 204
    assert session.id not in gw.sessions
    async with session.post(ping) as resp:
        assert resp.status == 404
    async with http.delete(gw.mcp_url, headers={"Mcp-Session-Id": session.id}) as resp:
        assert resp.status == 404
    async with http.delete(gw.mcp_url) as resp:
        assert resp.status == 400


async def test_protocol_version_header(gw: RunningGateway, http: aiohttp.ClientSession) -> None:
    session = await initialize(http, gw.mcp_url)
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with session.post(ping, **{"MCP-Protocol-Version": "1999-01-01"}) as resp:
        assert resp.status == 400  # UnsupportedProtocolVersion, listing what is served (2026-07-28)
        error = (await resp.json())["error"]
        assert error["code"] == -32022 and "2025-11-25" in error["data"]["supported"]
    async with session.post(ping, **{"MCP-Protocol-Version": "2025-03-26"}) as resp:
        assert resp.status == 200  # a supported revision is fine
    # initialize with an unknown revision negotiates the latest one
    msg = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
           "params": {"protocolVersion": "1999-01-01", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}}
    async with http.post(gw.mcp_url, json=msg, headers={"Accept": ACCEPT}) as resp:
        assert (await resp.json())["result"]["protocolVersion"] == "2025-11-25"
    msg["params"]["protocolVersion"] = "2024-11-05"  # type: ignore[index]
    async with http.post(gw.mcp_url, json=msg, headers={"Accept": ACCEPT}) as resp:
        assert (await resp.json())["result"]["protocolVersion"] == "2024-11-05"


async def test_origin_and_host_guards(gw: RunningGateway, http: aiohttp.ClientSession) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}}
    for origin in ("http://evil.example", "https://attacker.test:8080", "null"):
        async with http.post(gw.mcp_url, json=init, headers={"Accept": ACCEPT, "Origin": origin}) as resp:
            assert resp.status == 403, origin
            assert (await resp.json())["error"]["code"] == -32600
    for origin in ("http://localhost:3000", "http://127.0.0.1:6274", "http://[::1]:1234"):
        async with http.post(gw.mcp_url, json=init, headers={"Accept": ACCEPT, "Origin": origin}) as resp:
            assert resp.status == 200, origin
    port = gw.url.rsplit(":", 1)[1]
    for host in ("evil.example", f"rebind.attacker.test:{port}", "10.0.0.1"):
        async with http.post(gw.mcp_url, json=init, headers={"Accept": ACCEPT, "Host": host}) as resp:
            assert resp.status == 403, host
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost"):
        async with http.post(gw.mcp_url, json=init, headers={"Accept": ACCEPT, "Host": host}) as resp:
            assert resp.status == 200, host
    # The guards cover GET and DELETE and the legacy endpoints too.
    async with http.get(gw.mcp_url, headers={"Accept": "text/event-stream", "Origin": "http://evil.example"}) as resp:
        assert resp.status == 403
    async with http.delete(gw.mcp_url, headers={"Mcp-Session-Id": "x", "Host": "evil.example"}) as resp:
        assert resp.status == 403
    async with http.get(gw.sse_url, headers={"Origin": "http://evil.example"}) as resp:
        assert resp.status == 403
    # Probes are not guarded (kubelets send their own Host).
    async with http.get(gw.url + "/healthz", headers={"Host": "10.1.2.3"}) as resp:
        assert resp.status == 200


async def test_health_probes(gw: RunningGateway, http: aiohttp.ClientSession) -> None:
    async with http.get(gw.url + "/healthz") as resp:
        assert resp.status == 200 and (await resp.json())["status"] == "ok"
    async with http.get(gw.url + "/readyz") as resp:  # public: the status alone
        assert resp.status == 200 and await resp.json() == {"status": "ready"}
    async with http.get(gw.url + "/readyz?verbose=1") as resp:  # auth is off: anyone may see the detail
        body = await resp.json()
        assert resp.status == 200 and body["ready"] is True and body["connectors"] == {"kit": {"up": True}}


async def test_notification_only_and_invalid_posts(gw: RunningGateway, http: aiohttp.ClientSession) -> None:
    session = await initialize(http, gw.mcp_url)
    async with session.post({"jsonrpc": "2.0", "method": "notifications/whatever"}) as resp:
        assert resp.status == 202
    async with session.post(b"{not json") as resp:
        assert resp.status == 400
        assert (await resp.json())["error"]["code"] == -32700
    async with session.post({"jsonrpc": "1.0", "id": 3, "method": "ping"}) as resp:
        assert resp.status == 400
        body = await resp.json()
        assert body["error"]["code"] == -32600 and body["id"] == 3
    async with session.post([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]) as resp:
        assert resp.status == 400  # batches only existed in 2025-03-26
    assert (await session.request("ping"))["result"] == {}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}}
    async with http.post(gw.mcp_url, json=[init], headers={"Accept": ACCEPT}) as resp:
        assert resp.status == 400 and "Mcp-Session-Id" not in resp.headers  # initialize is never batched
    async with http.post(gw.mcp_url, json={**init, "params": {}}, headers={"Accept": ACCEPT}) as resp:
        body = await resp.json()
        assert body["error"]["code"] == -32602 and "Mcp-Session-Id" not in resp.headers


async def test_batches_on_a_2025_03_26_session(gw: RunningGateway, http: aiohttp.ClientSession) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}}
    async with http.post(gw.mcp_url, json=init, headers={"Accept": ACCEPT}) as resp:
        session_id = resp.headers["Mcp-Session-Id"]
    headers = {"Mcp-Session-Id": session_id, "Accept": ACCEPT, "MCP-Protocol-Version": "2025-03-26"}
    batch = [{"jsonrpc": "2.0", "id": "a", "method": "ping"},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": "b", "method": "tools/call", "params": {"name": "kit_echo_001", "arguments": {"x": 1}}},
             {"jsonrpc": "2.0", "id": "c", "method": "nope"},
             7]
    async with http.post(gw.mcp_url, json=batch, headers=headers) as resp:
        assert resp.status == 200
        replies = await resp.json()
    assert [r["id"] for r in replies] == ["a", "b", "c", None]
    assert replies[1]["result"]["content"][0]["text"] == '{"x": 1}'
    assert replies[2]["error"]["code"] == -32601 and replies[3]["error"]["code"] == -32600
    async with http.post(gw.mcp_url, json=[{"jsonrpc": "2.0", "method": "notifications/initialized"}],
                         headers=headers) as resp:
        assert resp.status == 202


async def test_get_stream_receives_list_changed(gw: RunningGateway, http: aiohttp.ClientSession) -> None:
    one = await initialize(http, gw.mcp_url)
    two = await initialize(http, gw.mcp_url)
    streams = []
    for session in (one, two):
        resp = await http.get(gw.mcp_url, headers={**session.headers, "Accept": "text/event-stream"})
        assert resp.status == 200 and resp.content_type == "text/event-stream"
        streams.append(resp)
    # a second GET stream for the same session is refused
    async with http.get(gw.mcp_url, headers={**one.headers, "Accept": "text/event-stream"}) as resp:
        assert resp.status == 409
    try:
        _kit(gw).add_tool("added_tool")
        for resp in streams:
            message = await _next_message(sse_events(resp))
            assert message == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        names = []
        cursor = None
        while True:
            page = (await one.request("tools/list", {"cursor": cursor} if cursor else {}))["result"]
            names += [t["name"] for t in page["tools"]]
            cursor = page.get("nextCursor")
            if not cursor:
                break
        assert "kit_added_tool" in names and names == sorted(names)
    finally:
        for resp in streams:
            resp.close()


async def test_progress_goes_to_the_requesting_post_only(gw: RunningGateway, http: aiohttp.ClientSession) -> None:
    caller = await initialize(http, gw.mcp_url)
    bystander = await initialize(http, gw.mcp_url)
    watch = await http.get(gw.mcp_url, headers={**bystander.headers, "Accept": "text/event-stream"})
    own_get = await http.get(gw.mcp_url, headers={**caller.headers, "Accept": "text/event-stream"})
    try:
        call = {"jsonrpc": "2.0", "id": 42, "method": "tools/call",
                "params": {"name": "kit_progress", "arguments": {"steps": 3}, "_meta": {"progressToken": "tok"}}}
        async with caller.post(call) as resp:
            assert resp.content_type == "text/event-stream"
            messages = await messages_of(resp)
        progress = [m for m in messages if m.get("method") == "notifications/progress"]
        assert [(p["params"]["progressToken"], p["params"]["progress"], p["params"]["total"]) for p in progress] == \
            [("tok", 1, 3), ("tok", 2, 3), ("tok", 3, 3)]
        assert messages[-1]["id"] == 42 and messages[-1]["result"]["content"][0]["text"] == "3 steps"
        # Nothing reached either GET stream: a ping-triggered list_changed is the next thing they see.
        _kit(gw).add_tool("after_progress")
        for resp in (watch, own_get):
            assert (await _next_message(sse_events(resp)))["method"] == "notifications/tools/list_changed"
    finally:
        watch.close()
        own_get.close()

    # Without a progress token no progress is sent, and the reply stays plain JSON.
    async with caller.post({"jsonrpc": "2.0", "id": 43, "method": "tools/call",
                            "params": {"name": "kit_progress", "arguments": {"steps": 2}}}) as resp:
        assert resp.content_type == "application/json"
        assert (await resp.json())["result"]["content"][0]["text"] == "2 steps"


async def test_cancelled_notification_cancels_the_request(gw: RunningGateway, http: aiohttp.ClientSession) -> None:
    session = await initialize(http, gw.mcp_url)
    other = await initialize(http, gw.mcp_url)
    kit = _kit(gw)
    call = {"jsonrpc": "2.0", "id": "slow-1", "method": "tools/call", "params": {"name": "kit_slow", "arguments": {}}}

    async def slow_call() -> tuple[int, bytes]:
        async with session.post(call) as resp:
            return resp.status, await resp.read()

    task = asyncio.create_task(slow_call())
    async with asyncio.timeout(5):
        await kit.started.wait()
    assert gw.sessions[session.id].inflight() == 1
    # Another session cancelling the same id does nothing to this one.
    async with other.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": "slow-1"}}) as resp:
        assert resp.status == 202
    assert not kit.cancelled.is_set()
    async with session.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                             "params": {"requestId": "slow-1", "reason": "user"}}) as resp:
        assert resp.status == 202
    async with asyncio.timeout(5):
        await kit.cancelled.wait()
        status, body = await task
    assert status == 202 and body == b""  # a cancelled request gets no response
    assert gw.sessions[session.id].inflight() == 0
    assert (await session.request("ping"))["result"] == {}
    assert (await other.request("ping"))["result"] == {}


async def test_sampling_round_trip_on_the_post_stream(gw: RunningGateway, http: aiohttp.ClientSession) -> None:
    session = await initialize(http, gw.mcp_url, capabilities={"sampling": {}})
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "kit_sample", "arguments": {"q": "2+2"}}}
    async with session.post(call) as resp:
        assert resp.content_type == "text/event-stream"
        events = sse_events(resp)
        request = await _next_message(events)
        assert request["method"] == "sampling/createMessage"
        assert request["params"]["messages"][0]["content"]["text"] == "2+2"
        answer = {"jsonrpc": "2.0", "id": request["id"],
                  "result": {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}}
        async with session.post(answer) as ack:
            assert ack.status == 202
        reply = await _next_message(events)
    assert reply["id"] == 5 and reply["result"]["content"][0]["text"] == "sampled: 4"

    # A client that did not declare sampling gets -32601 from the tool's request.
    plain = await initialize(http, gw.mcp_url)
    reply = await plain.request("tools/call", {"name": "kit_sample", "arguments": {}})
    assert reply["error"]["code"] == -32601


async def test_log_notifications_respect_the_level(gw: RunningGateway, http: aiohttp.ClientSession) -> None:
    session = await initialize(http, gw.mcp_url)
    assert (await session.request("logging/setLevel", {"level": "warning"}))["result"] == {}
    async with session.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                             "params": {"name": "kit_log", "arguments": {"level": "info"}}}) as resp:
        assert [m.get("method") for m in await messages_of(resp)] == [None]  # filtered out
    async with session.post({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                             "params": {"name": "kit_log", "arguments": {"level": "error", "data": "boom"}}}) as resp:
        messages = await messages_of(resp)
    assert messages[0]["method"] == "notifications/message"
    assert messages[0]["params"] == {"level": "error", "data": "boom", "logger": "testkit"}
    assert "result" in messages[1]
    assert (await session.request("logging/setLevel", {"level": "loud"}))["error"]["code"] == -32602


async def test_draining_gateway_refuses_new_sessions(gw: RunningGateway, http: aiohttp.ClientSession) -> None:
    session = await initialize(http, gw.mcp_url)
    await gw.gateway.drain(grace_s=0)
    async with http.get(gw.url + "/readyz") as resp:
        assert resp.status == 503
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}}
    async with http.post(gw.mcp_url, json=init, headers={"Accept": ACCEPT}) as resp:
        assert resp.status == 503
    assert (await session.request("ping"))["result"] == {}  # existing sessions still work


@pytest.mark.parametrize("json_response", [False, True])
async def test_a_long_call_streams_keepalives_so_proxies_keep_it(monkeypatch: pytest.MonkeyPatch,
                                                                 http: aiohttp.ClientSession,
                                                                 json_response: bool) -> None:
    testkit.register(monkeypatch)
    config = CORE_ONLY + f"""
gateway: {{http: {{keepalive_s: 0.05, json_response: {str(json_response).lower()}}}}}
connectors:
  - {{name: kit, type: testkit, tools: 1}}
"""
    async with running_gateway(config) as running:
        session = await initialize(http, running.mcp_url)
        slow = {"jsonrpc": "2.0", "id": "long-1", "method": "tools/call",
                "params": {"name": "kit_slow", "arguments": {"seconds": 0.55}}}
        async with session.post(slow) as resp:
            assert resp.status == 200
            body = await resp.read()
        if json_response:  # no stream to carry keepalives: one JSON body, as configured
            assert resp.content_type == "application/json" and b"keepalive" not in body
            assert json.loads(body)["result"]["content"][0]["text"] == "finished"
            return
        assert resp.content_type == "text/event-stream"
        head, _, last = body.rpartition(b"event: message")
        assert head.count(b": keepalive\n\n") >= 3  # about one per 0.05 s before the answer
        reply = json.loads(last.split(b"data: ", 1)[1])
        assert reply == {"jsonrpc": "2.0", "id": "long-1",
                         "result": {"content": [{"type": "text", "text": "finished"}]}}
        quick = {"jsonrpc": "2.0", "id": "quick-1", "method": "tools/call",
                 "params": {"name": "kit_echo_000", "arguments": {"a": 1}}}
        async with session.post(quick) as resp:  # quick calls stay plain JSON
            assert resp.content_type == "application/json"
            assert (await resp.json())["result"]["content"][0]["text"] == '{"a": 1}'


RESUMABLE = CORE_ONLY + """
gateway: {http: {keepalive_s: 0.05}}
connectors:
  - {name: kit, type: testkit, tools: 1}
"""


async def _cut_after_priming(session: Any, seconds: float) -> str:
    """POST a slow call, read its stream's priming event, then drop the connection; returns the
    priming event's id."""
    call = {"jsonrpc": "2.0", "id": "cut-1", "method": "tools/call",
            "params": {"name": "kit_slow", "arguments": {"seconds": seconds}}}
    resp = await session.post(call)
    assert resp.content_type == "text/event-stream"
    async with asyncio.timeout(5):
        while not (line := (await resp.content.readline()).decode()).startswith("id:"):
            pass
    resp.close()  # the connection breaks, as a flaky network would break it
    return line[3:].strip()


def _stream(gw: RunningGateway, session_id: str, event_id: str) -> Any:
    from gateway.transports.http_app import HTTP_KEY
    return gw.app[HTTP_KEY].channels[session_id].streams[event_id.split(":")[0]]


async def test_a_cut_stream_is_resumed_while_its_request_runs(monkeypatch: pytest.MonkeyPatch,
                                                              http: aiohttp.ClientSession) -> None:
    testkit.register(monkeypatch)
    async with running_gateway(RESUMABLE) as running:
        session = await initialize(http, running.mcp_url)
        primed = await _cut_after_priming(session, 0.5)
        assert primed.endswith(":0")
        async with http.get(running.mcp_url, headers={**session.headers, "Accept": "text/event-stream",
                                                      "Last-Event-ID": primed}) as resp:
            assert resp.status == 200 and resp.content_type == "text/event-stream"
            body = await resp.read()  # ends when the request has answered
        reply = json.loads(body.rpartition(b"data: ")[2])
        assert reply == {"jsonrpc": "2.0", "id": "cut-1", "result": {"content": [{"type": "text", "text": "finished"}]}}
        assert f"id: {primed[:-1]}1\n".encode() in body  # the response's own event id
        # Collected: there is nothing left to resume, and the session's own GET stream is unaffected.
        async with http.get(running.mcp_url, headers={**session.headers, "Accept": "text/event-stream",
                                                      "Last-Event-ID": primed}) as resp:
            assert resp.status == 400 and "nothing to resume" in (await resp.json())["error"]["message"]
        async with http.get(running.mcp_url, headers={**session.headers, "Accept": "text/event-stream"}) as resp:
            assert resp.status == 200


async def test_a_response_nobody_received_is_kept_for_resumption(monkeypatch: pytest.MonkeyPatch,
                                                                http: aiohttp.ClientSession) -> None:
    testkit.register(monkeypatch)
    async with running_gateway(RESUMABLE) as running:
        session = await initialize(http, running.mcp_url)
        # The call must outlast the cut (a loaded machine may take a while to read the priming
        # event): answered before it, the response would count as received and be collected.
        primed = await _cut_after_priming(session, 1.0)
        stream = _stream(running, session.id, primed)
        async with asyncio.timeout(5):
            await stream._done.wait()  # answered while the client was away
        headers = {**session.headers, "Accept": "text/event-stream"}
        async with http.get(running.mcp_url, headers={**headers, "Last-Event-ID": primed}) as resp:
            assert resp.status == 200
            events = [m async for m in sse_events(resp)]
        assert [json.loads(data)["result"]["content"][0]["text"] for _, data in events] == ["finished"]
        for bad in ("nonsense", "999:0", f"{primed[:-2]}:x"):
            async with http.get(running.mcp_url, headers={**headers, "Last-Event-ID": bad}) as resp:
                assert resp.status == 400
