"""The Session on its own (no transport): lifecycle, negotiation, in-flight requests and
cancellation, log level filtering and server→client requests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.protocol.errors import InternalError, MethodNotFound, ProtocolError, RequestTimeout
from gateway.session import Session
from tests.e2e import testkit
from tests.e2e.clients import CORE_ONLY
from tests.support import config_from

CONFIG = CORE_ONLY + """
gateway: {name: unit, version: 9.9.9, instructions: Use the kit tools., request_timeout_s: 5}
connectors:
  - {name: kit, type: testkit, tools: 1}
"""


class Recorder:
    """The ``send`` of a session: keeps what was sent and signals each message."""

    def __init__(self) -> None:
        self.sent: list[tuple[dict[str, Any], Any]] = []
        self.arrived = asyncio.Condition()

    async def __call__(self, message: dict[str, Any], related: Any = None) -> None:
        async with self.arrived:
            self.sent.append((message, related))
            self.arrived.notify_all()

    async def wait_for(self, method: str) -> tuple[dict[str, Any], Any]:
        async with asyncio.timeout(5), self.arrived:
            await self.arrived.wait_for(lambda: any(m.get("method") == method for m, _ in self.sent))
        return next((m, r) for m, r in self.sent if m.get("method") == method)


@pytest.fixture
async def gateway(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Gateway]:
    testkit.register(monkeypatch)
    gw = Gateway(config_from(CONFIG))
    await gw.start()
    try:
        yield gw
    finally:
        await gw.stop(grace_s=0)


def _req(rid: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


async def _ready(gateway: Gateway, version: str = "2025-11-25", caps: dict[str, Any] | None = None
                 ) -> tuple[Session, Recorder]:
    rec = Recorder()
    session = Session(gateway, "test", rec)
    gateway.add_session(session)
    reply = await session.handle_request(_req(0, "initialize", {"protocolVersion": version, "capabilities": caps or {},
                                                                "clientInfo": {"name": "t", "version": "1"}}))
    assert reply is not None and "result" in reply
    return session, rec


async def test_lifecycle(gateway: Gateway) -> None:
    session = Session(gateway, "test", Recorder())
    assert await session.handle_request(_req(1, "ping")) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    early = await session.handle_request(_req(2, "tools/list"))
    assert early is not None and early["error"]["code"] == -32600
    bad = await session.handle_request(_req(3, "initialize", {"capabilities": {}}))
    assert bad is not None and bad["error"]["code"] == -32602
    reply = await session.handle_request(_req(4, "initialize", {"protocolVersion": "2025-06-18",
                                                                "capabilities": {"sampling": {}},
                                                                "clientInfo": {"name": "c", "version": "2"}}))
    assert reply is not None
    result = reply["result"]
    assert result["protocolVersion"] == "2025-06-18"
    assert result["serverInfo"] == {"name": "unit", "version": "9.9.9"}
    assert result["instructions"] == "Use the kit tools."
    assert result["capabilities"]["tools"] == {"listChanged": True} and "prompts" not in result["capabilities"]
    assert session.client_info == {"name": "c", "version": "2"} and "sampling" in session.client_capabilities
    again = await session.handle_request(_req(5, "initialize", {"protocolVersion": "2025-06-18"}))
    assert again is not None and again["error"]["code"] == -32600
    await session.handle_notification({"jsonrpc": "2.0", "method": "notifications/initialized"})
    unknown = await session.handle_request(_req(6, "no/such"))
    assert unknown is not None and unknown["error"]["code"] == -32601


@pytest.mark.parametrize("asked, agreed", [("2024-11-05", "2024-11-05"), ("2025-03-26", "2025-03-26"),
                                           ("2025-06-18", "2025-06-18"), ("2025-11-25", "2025-11-25"),
                                           ("2030-01-01", "2025-11-25")])
async def test_version_negotiation(gateway: Gateway, asked: str, agreed: str) -> None:
    session, _ = await _ready(gateway, asked)
    assert session.protocol_version == agreed


async def test_params_are_validated_before_dispatch(gateway: Gateway) -> None:
    session, _ = await _ready(gateway)
    cases = [("tools/call", {"name": 5}), ("tools/call", {"name": "kit_echo_000", "arguments": [1]}),
             ("prompts/get", {"name": "x", "arguments": {"a": 1}}), ("resources/read", {}),
             ("tools/list", {"cursor": 7}), ("completion/complete", {"ref": {"type": "ref/other"}}),
             ("logging/setLevel", {"level": "verbose"})]
    for i, (method, params) in enumerate(cases):
        reply = await session.handle_request(_req(i, method, params))
        assert reply is not None and reply["error"]["code"] == -32602, (method, reply)


async def test_cancellation_and_duplicate_ids(gateway: Gateway) -> None:
    session, _ = await _ready(gateway)
    kit = gateway.connectors["kit"]
    assert isinstance(kit, testkit.KitConnector)
    task = asyncio.create_task(session.handle_request(_req("s", "tools/call", {"name": "kit_slow"})))
    async with asyncio.timeout(5):
        await kit.started.wait()
    dup = await session.handle_request(_req("s", "ping"))
    assert dup is not None and dup["error"]["code"] == -32600 and session.inflight() == 1
    # Unknown or malformed request ids are ignored.
    for rid in ("other", None, [1]):
        await session.handle_notification({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                           "params": {"requestId": rid}})
    assert not task.done()
    await session.handle_notification({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                       "params": {"requestId": "s"}})
    async with asyncio.timeout(5):
        assert await task is None
    assert kit.cancelled.is_set() and session.inflight() == 0
    # The id is free again.
    assert await session.handle_request(_req("s", "ping")) == {"jsonrpc": "2.0", "id": "s", "result": {}}


async def test_log_level_filters_notifications(gateway: Gateway) -> None:
    session, rec = await _ready(gateway)
    await session.notify("notifications/message", {"level": "debug", "data": "no"})
    await session.notify("notifications/message", {"level": "info", "data": "yes"})
    assert (await session.handle_request(_req(1, "logging/setLevel", {"level": "error"}))) is not None
    await session.notify("notifications/message", {"level": "warning", "data": "no"})
    await session.notify("notifications/message", {"level": "critical", "data": "yes"})
    await session.notify("notifications/tools/list_changed")  # other notifications are not filtered
    assert [m.get("params", {}).get("data") for m, _ in rec.sent] == ["yes", "yes", None]


async def test_server_to_client_requests(gateway: Gateway) -> None:
    session, rec = await _ready(gateway, caps={"sampling": {}, "roots": {}})
    pending = asyncio.create_task(session.request("sampling/createMessage", {"messages": []}, related_request_id=9))
    message, related = await rec.wait_for("sampling/createMessage")
    assert related == 9 and message["id"].startswith("gw-")
    session.handle_response({"jsonrpc": "2.0", "id": message["id"], "result": {"role": "assistant"}})
    assert await pending == {"role": "assistant"}

    failing = asyncio.create_task(session.request("roots/list"))
    message, _ = await rec.wait_for("roots/list")
    session.handle_response({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -1, "message": "nope"}})
    with pytest.raises(ProtocolError) as info:
        await failing
    assert info.value.code == -1 and info.value.message == "nope"
    session.handle_response({"jsonrpc": "2.0", "id": "gw-unknown", "result": {}})  # ignored

    with pytest.raises(MethodNotFound):
        await session.request("elicitation/create", {})  # not declared by this client

    with pytest.raises(RequestTimeout):
        await session.request("roots/list", timeout=0.05)
    cancel, _ = await rec.wait_for("notifications/cancelled")
    assert cancel["params"]["reason"] == "timeout"

    orphan = asyncio.create_task(session.request("roots/list"))
    await rec.wait_for("roots/list")
    await session.close()
    with pytest.raises(InternalError):
        await orphan
    assert session.id not in gateway.sessions
    with pytest.raises(InternalError):
        await session.request("roots/list")
    await session.notify("notifications/message", {"level": "emergency", "data": "dropped"})
    assert rec.sent[-1][0]["method"] != "notifications/message"


async def test_progress_is_related_to_its_request(gateway: Gateway) -> None:
    session, rec = await _ready(gateway)
    reply = await session.handle_request(_req("p", "tools/call", {"name": "kit_progress", "arguments": {"steps": 2},
                                                                  "_meta": {"progressToken": 77}}))
    assert reply is not None and reply["result"]["content"][0]["text"] == "2 steps"
    progress = [(m["params"], r) for m, r in rec.sent if m.get("method") == "notifications/progress"]
    assert progress == [({"progressToken": 77, "progress": 1, "total": 2, "message": "step 1"}, "p"),
                        ({"progressToken": 77, "progress": 2, "total": 2, "message": "step 2"}, "p")]


async def test_a_failing_send_does_not_break_the_sender(gateway: Gateway) -> None:
    async def broken(message: dict[str, Any], related: Any = None) -> None:
        raise ConnectionResetError("gone")

    session = Session(gateway, "test", broken)
    await session.notify("notifications/tools/list_changed")  # swallowed
    reply = await session.handle_request(_req(1, "ping"))
    assert reply == {"jsonrpc": "2.0", "id": 1, "result": {}}


async def test_an_older_client_answers_a_backend_that_asks_the_new_way(gateway: Gateway) -> None:
    """A connector answering ``input_required`` (a 2026-07-28 upstream) meets a 2025-11-25 client:
    the gateway asks the client over its session, round after round, and calls again."""
    session, rec = await _ready(gateway, caps={"elicitation": {}})
    answered: set[str] = set()
    call = asyncio.create_task(session.handle_request(_req("a", "tools/call", {"name": "kit_ask",
                                                                                "arguments": {"rounds": 2}})))
    for name in ("ada", "grace"):
        async with asyncio.timeout(5), rec.arrived:
            await rec.arrived.wait_for(lambda: any(m.get("method") == "elicitation/create" and m["id"] not in answered
                                                   for m, _ in rec.sent))
        message, related = next((m, r) for m, r in rec.sent if m.get("method") == "elicitation/create"
                                and m["id"] not in answered)
        assert related == "a" and message["params"]["mode"] == "form"
        answered.add(message["id"])
        session.handle_response({"jsonrpc": "2.0", "id": message["id"],
                                 "result": {"action": "accept", "content": {"name": name}}})
    reply = await asyncio.wait_for(call, 5)
    assert reply is not None and reply["result"]["content"][0]["text"] == "answers: ada,grace"
    assert "resultType" not in reply["result"]  # an older client never sees the new fields


async def test_an_older_client_without_the_capability_gets_an_error_not_a_hang(gateway: Gateway) -> None:
    session, _ = await _ready(gateway)
    reply = await asyncio.wait_for(session.handle_request(_req("b", "tools/call", {"name": "kit_ask"})), 5)
    assert reply is not None and ("error" in reply or reply["result"].get("isError"))


async def test_a_tool_timeout_on_the_connectors_own_clock_reads_like_the_deadlines(
        gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    """The deterministic half of tests/connectors/mcp/test_outage.py's race: the connector's clock
    runs out before the request deadline (the MCP connector then raises ``RequestTimeout``): the
    client sees what the deadline's ``TimeoutFilter`` answers, an ``isError`` result saying it timed
    out, not a differently worded failure."""
    async def times_out(name: str, arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
        raise RequestTimeout("upstream kit did not answer tools/call within 0.3s")

    monkeypatch.setattr(gateway.connectors["kit"], "call_tool", times_out)
    session, _ = await _ready(gateway)
    reply = await asyncio.wait_for(session.handle_request(_req(1, "tools/call", {"name": "kit_echo_000"})), 5)
    assert reply is not None and "error" not in reply
    [content] = reply["result"]["content"]
    assert reply["result"]["isError"] is True and "timed out" in content["text"], reply
    assert "upstream kit did not answer tools/call within 0.3s" in content["text"]  # the connector's detail kept
