"""Issue 14, row 6: server→client request floods passed through (247 of 1,000 sampling requests
one upstream sent in one call reached the client).

The attacks: a hostile upstream MCP server (:mod:`tests.security.hostile_upstream`, a real SDK
server over stdio behind the ``mcp`` connector) sends 1,000 sampling / elicitation / roots
requests at once in one tool call, to a client of the 2025 revisions (Streamable HTTP, SSE) and to
a 2026-07-28 client (the requests become ``inputRequests`` of MRTR rounds); and an upstream that
asks the 2026-07-28 way, with 1,000 ``inputRequests`` in one ``input_required`` result. Now at
most ``gateway.server_requests.max_per_call`` reach the client, no faster than the session's
``max_per_session_per_s`` (and ``burst``), and the upstream gets -32029 naming the cap for each
request over it; the gateway answers /healthz meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import aiohttp
import pytest

from connectors.base import Connector, ConnectorEvents, ToolSpec
from connectors.config import ConnectorConfig
from connectors.instrumentation import NO_INSTRUMENTATION, Instrumentation
from connectors.registry import ConnectorKind
from gateway.context import CallContext
from gateway.protocol.revisions import MODERN_RATE_LIMITED
from gateway.telemetry import metrics
from tests.e2e.rawhttp import RawSession, initialize, sse_events
from tests.support import running_gateway

from .support import healthz, probing

HOSTILE = Path(__file__).with_name("hostile_upstream.py")
MODERN = "2026-07-28"
_ANSWERS = {
    "sampling/createMessage": {"role": "assistant", "model": "m", "content": {"type": "text", "text": "ok"}},
    "elicitation/create": {"action": "accept", "content": {}},
    "roots/list": {"roots": []},
}
_CAPS = {"sampling": {}, "elicitation": {"form": {}}, "roots": {}}
_KIND_METHOD = {"sampling": "sampling/createMessage", "elicitation": "elicitation/create", "roots": "roots/list"}


def _refused(method: str, cap: str) -> float:
    """mcp_gateway_server_requests_refused_total{method, cap} in this process's registry."""
    return metrics.REGISTRY.get_sample_value("mcp_gateway_server_requests_refused_total",
                                             {"method": method, "cap": cap}) or 0.0


def _config(limits: str = "") -> str:
    return f"""
        audit: {{enabled: false}}
        telemetry: {{metrics: false}}
        gateway: {{request_timeout_s: 30, cursor_secret: flood-tests{", server_requests: " + limits if limits else ""}}}
        connectors:
          - name: evil
            type: mcp
            transport: stdio
            command: {json.dumps(sys.executable)}
            args: [{json.dumps(str(HOSTILE))}]
          - name: asker
            type: flooder
        """


class FlooderConfig(ConnectorConfig):
    type: Literal["flooder"]


class Flooder(Connector):
    """An upstream that asks the 2026-07-28 way: ``ask`` answers ``input_required`` with
    ``count`` elicitation requests at once, then the number of answers it got."""

    kind = "flooder"

    async def start(self, events: ConnectorEvents, instrumentation: Instrumentation = NO_INSTRUMENTATION) -> None:
        self.attach(events, instrumentation)

    def capabilities(self) -> set[str]:
        return {"tools"}

    def tools(self) -> tuple[ToolSpec, ...]:
        return (ToolSpec("ask", {"name": "ask", "description": "asks a lot", "inputSchema": {"type": "object"}}),)

    async def call_tool(self, name: str, arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        answers = ctx.params.get("inputResponses")
        if answers:
            return {"content": [{"type": "text", "text": f"{len(answers)} answers"}]}
        requests = {f"q{i}": {"method": "elicitation/create", "params": {
            "mode": "form", "message": f"#{i}", "requestedSchema": {"type": "object", "properties": {}}}}
            for i in range(int(arguments.get("count", 1000)))}
        return {"resultType": "input_required", "requestState": "flooder", "inputRequests": requests}


@pytest.fixture
def flooder(monkeypatch: pytest.MonkeyPatch) -> None:
    from connectors import registry

    monkeypatch.setitem(registry.KINDS, "flooder", ConnectorKind(lambda: FlooderConfig, lambda: Flooder))


# -- a client of the 2025 revisions: server→client requests arrive on the call's SSE stream -------

async def _legacy_call(session: RawSession, name: str, arguments: dict[str, Any], rid: int = 7
                       ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Call a tool, answering every server→client request on its stream at once; returns the
    requests that reached the client and the call's response."""
    seen: list[dict[str, Any]] = []
    answering: list[asyncio.Task[None]] = []

    async def answer(message: dict[str, Any]) -> None:
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": _ANSWERS[message["method"]]}
        async with session.post(reply) as resp:
            assert resp.status == 202, resp.status

    call = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    async with session.post(call) as resp:
        assert resp.content_type == "text/event-stream", resp.content_type
        async for _, data in sse_events(resp):
            message = json.loads(data)
            if message.get("method") in _ANSWERS and "id" in message:
                seen.append(message)
                answering.append(asyncio.create_task(answer(message)))
            elif message.get("id") == rid:
                await asyncio.gather(*answering)
                return seen, message
    raise AssertionError("the call's stream ended without its response")


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def _report(response: dict[str, Any]) -> dict[str, Any]:
    assert "result" in response, response
    report: dict[str, Any] = json.loads(response["result"]["content"][0]["text"])
    return report


@pytest.mark.parametrize("kind", ["sampling", "elicitation", "roots"])
async def test_a_flood_in_one_call_stops_at_the_per_call_cap(kind: str, flooder: None,
                                                             http: aiohttp.ClientSession) -> None:
    refused_before = _refused(_KIND_METHOD[kind], "per_call")
    async with running_gateway(_config("{max_per_call: 20, max_per_session_per_s: 1000, burst: 1000}")) as gw:
        session = await initialize(http, gw.mcp_url, _CAPS)
        async with probing(healthz(http, gw.url)) as probe:
            seen, response = await _legacy_call(session, "evil_flood", {"count": 1000, "kind": kind})
        report = _report(response)
    assert len(seen) == 20 and {m["method"] for m in seen} == {_KIND_METHOD[kind]}
    assert report["answered"] == 20 and report["refused"] == 980 and report["codes"] == {"-32029": 980}, report
    # Operators see the flood (issue 15: a metric for what the caps refuse).
    assert _refused(_KIND_METHOD[kind], "per_call") - refused_before == 980
    assert "max_per_call" in report["message"] and report["data"]["scope"] == "server_requests", report
    assert report["other_errors"] == []
    assert probe.worst < 0.1, probe.worst


async def test_the_defaults_cap_a_flood(flooder: None, http: aiohttp.ClientSession) -> None:
    """No ``server_requests`` in the config: the session's burst (20) lets the first through, the
    rate (10/s) a few more; nowhere near the 247 of the finding."""
    refused_before = _refused("sampling/createMessage", "per_session")
    async with running_gateway(_config()) as gw:
        session = await initialize(http, gw.mcp_url, _CAPS)
        started = time.monotonic()
        seen, response = await _legacy_call(session, "evil_flood", {"count": 1000})
        elapsed = time.monotonic() - started
        report = _report(response)
    assert 20 <= len(seen) <= min(50, 20 + 10 * elapsed + 1), (len(seen), elapsed)
    assert report["answered"] == len(seen) and report["refused"] == 1000 - len(seen), report
    assert "max_per_session_per_s" in report["message"], report
    assert _refused("sampling/createMessage", "per_session") - refused_before == 1000 - len(seen)


async def test_a_session_is_held_to_its_rate_across_calls(flooder: None, http: aiohttp.ClientSession) -> None:
    async with running_gateway(_config("{max_per_call: 1000, max_per_session_per_s: 5, burst: 10}")) as gw:
        session = await initialize(http, gw.mcp_url, _CAPS)
        started = time.monotonic()
        first, response = await _legacy_call(session, "evil_flood", {"count": 1000}, rid=7)
        report = _report(response)
        assert "max_per_session_per_s" in report["message"] and report["data"]["retryAfterMs"] > 0, report
        second, response = await _legacy_call(session, "evil_flood", {"count": 1000}, rid=8)
        elapsed = time.monotonic() - started
        assert _report(response)["refused"] == 1000 - len(second)
    # The second call found the bucket empty: both together stay within burst + rate x time.
    assert len(first) >= 10 and len(first) + len(second) <= 10 + 5 * elapsed + 1, (len(first), len(second), elapsed)


async def test_an_upstream_asking_the_new_way_reaches_an_older_client_only_up_to_the_cap(
        flooder: None, http: aiohttp.ClientSession) -> None:
    async with running_gateway(_config("{max_per_call: 20, max_per_session_per_s: 1000, burst: 1000}")) as gw:
        session = await initialize(http, gw.mcp_url, _CAPS)
        seen, response = await _legacy_call(session, "asker_ask", {"count": 1000})
    assert len(seen) == 20
    assert response["error"]["code"] == -32029 and "max_per_call" in response["error"]["message"], response


# -- a 2026-07-28 client: server→client requests become inputRequests of MRTR rounds ---------------

def _modern(rid: int, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": _CAPS}
    message = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {**params, "_meta": meta}}
    headers = {"Content-Type": "application/json", "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call",
               "Mcp-Name": params["name"], "Accept": "application/json"}
    return message, headers


async def _modern_call(http: aiohttp.ClientSession, url: str, name: str, arguments: dict[str, Any]
                       ) -> tuple[int, dict[str, Any]]:
    """Call a tool, answering every round of input requests; returns how many input requests
    reached the client in all, and the final response."""
    asked = 0
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    for rid in range(1, 100):
        message, headers = _modern(rid, params)
        async with http.post(url, json=message, headers=headers) as resp:
            reply: dict[str, Any] = await resp.json()
        result = reply.get("result")
        if result is None or result.get("resultType") != "input_required":
            return asked, reply
        requests = result["inputRequests"]
        asked += len(requests)
        params = {"name": name, "arguments": arguments, "requestState": result["requestState"],
                  "inputResponses": {key: _ANSWERS[r["method"]] for key, r in requests.items()}}
    raise AssertionError("more than 100 rounds")


async def test_a_flood_to_a_new_client_becomes_at_most_the_cap_in_input_requests(
        flooder: None, http: aiohttp.ClientSession) -> None:
    async with running_gateway(_config("{max_per_call: 20, max_per_session_per_s: 1000, burst: 1000}")) as gw:
        async with probing(healthz(http, gw.url)) as probe:
            asked, response = await _modern_call(http, gw.mcp_url, "evil_flood", {"count": 1000})
        report = _report(response)
        assert len(gw.gateway.parked) == 0
    assert asked == 20
    assert report["answered"] == 20 and report["refused"] == 980 and report["codes"] == {"-32029": 980}, report
    assert probe.worst < 0.1, probe.worst


async def test_input_requests_of_an_upstream_over_the_cap_are_not_passed_to_a_new_client(
        flooder: None, http: aiohttp.ClientSession) -> None:
    refused_before = _refused("elicitation/create", "per_call")
    async with running_gateway(_config("{max_per_call: 20, max_per_session_per_s: 1000, burst: 1000}")) as gw:
        asked, response = await _modern_call(http, gw.mcp_url, "asker_ask", {"count": 1000})
        assert _refused("elicitation/create", "per_call") - refused_before == 1000
        # -32029 at 2026-07-28 (whose -32020..-32099 holds only the specification's codes)
        assert asked == 0 and response["error"]["code"] == MODERN_RATE_LIMITED, response
        assert "none were passed on" in response["error"]["message"]
        # Within the cap the same connector works, the count carried through the sealed state.
        asked, response = await _modern_call(http, gw.mcp_url, "asker_ask", {"count": 20})
    assert asked == 20 and response["result"]["content"][0]["text"] == "20 answers", response
