"""Legacy HTTP+SSE on the wire: the endpoint event, POST /messages status codes, replies on the
stream, and the session's end when the stream closes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
import pytest

from gateway.transports.http_app import SSE_KEY
from tests.e2e.clients import eventually
from tests.e2e.rawhttp import sse_events
from tests.fuzz.strategies import static_config
from tests.support import RunningGateway, running_gateway


@pytest.fixture
async def gw() -> AsyncIterator[RunningGateway]:
    async with running_gateway(static_config()) as running:
        yield running


async def test_legacy_sse_session(gw: RunningGateway) -> None:
    async with aiohttp.ClientSession() as http:
        stream = await http.get(gw.sse_url)
        assert stream.status == 200 and stream.content_type == "text/event-stream"
        events = sse_events(stream)
        event, endpoint = await anext(events)
        assert event == "endpoint" and endpoint.startswith("/messages?session_id=")
        session_id = endpoint.split("=", 1)[1]
        assert gw.sessions[session_id].transport == "sse"
        url = gw.url + endpoint

        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}}
        async with http.post(url, json=init) as resp:
            assert resp.status == 202
        _, data = await anext(events)
        assert json.loads(data)["result"]["protocolVersion"] == "2024-11-05"
        async with http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "prompts/get",
                                        "params": {"name": "fz_greet", "arguments": {}}}) as resp:
            assert resp.status == 202
        _, data = await anext(events)
        assert json.loads(data)["error"]["code"] == -32602
        async with http.post(url, data=b"{broken") as resp:
            assert resp.status == 400 and (await resp.json())["error"]["code"] == -32700
        async with http.post(url, json=[{"jsonrpc": "2.0", "id": 3, "method": "ping"}]) as resp:
            assert resp.status == 400  # no batches in 2024-11-05
        async with http.post(gw.url + "/messages", json=init) as resp:
            assert resp.status == 400
        async with http.post(gw.url + "/messages?session_id=unknown", json=init) as resp:
            assert resp.status == 404 and "error" in await resp.json()

        # Closing the stream from the server side ends the session too.
        await gw.app[SSE_KEY].close_all()
        await eventually(lambda: session_id not in gw.sessions)
        async with http.post(url, json=init) as resp:
            assert resp.status == 404
        stream.close()


async def test_a_client_that_disconnects_ends_its_session_promptly(gw: RunningGateway) -> None:
    """The gateway notices a closed SSE socket within about a second, without waiting for the
    next keepalive write, so a departed client's session does not linger."""
    async with aiohttp.ClientSession() as http:
        stream = await http.get(gw.sse_url)
        _, endpoint = await anext(sse_events(stream))
        session_id = endpoint.split("=", 1)[1]
        assert session_id in gw.sessions
        stream.close()
        await eventually(lambda: session_id not in gw.sessions, timeout=5.0)
