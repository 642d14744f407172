"""Hostile input on the HTTP transports: ``POST /mcp`` with and without a session, and
``POST /messages`` of a legacy SSE session.

The gateway runs on an event loop in a background thread (hypothesis drives synchronous tests).
Every HTTP reply body and every message on the SSE stream must be valid JSON-RPC; after every
frame the fuzzed session still answers a ping, and a bystander session that is open the whole time
keeps answering, with the same listing as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.rawhttp import ACCEPT, RawSession, initialize, sse_events
from tests.fuzz.strategies import check_reply, frames, is_json, static_config
from tests.support import running_gateway

T = TypeVar("T")


class Harness:
    """A gateway, an HTTP client and the sessions under test, on a loop in a thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.stack = contextlib.AsyncExitStack()
        self.sse_messages: list[Any] = []
        self.sse_bad: list[str] = []
        self.run(self._setup())

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 20.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _setup(self) -> None:
        self.gw = await self.stack.enter_async_context(running_gateway(static_config()))
        self.http = await self.stack.enter_async_context(aiohttp.ClientSession())
        self.sessions = {
            "2025-11-25": await initialize(self.http, self.gw.mcp_url),
            "2025-03-26": await self._initialize_old(),
        }
        self.bystander = await initialize(self.http, self.gw.mcp_url)
        self.bystander_prompts = (await self.bystander.request("prompts/list"))["result"]
        # A legacy SSE session: read the endpoint event, then validate everything that follows.
        self.sse_resp = await self.http.get(self.gw.sse_url)
        self.sse_iter = sse_events(self.sse_resp)
        event, endpoint = await anext(self.sse_iter)
        assert event == "endpoint"
        self.messages_url = self.gw.url + endpoint
        self.sse_replies: asyncio.Queue[Any] = asyncio.Queue()
        self.sse_reader = asyncio.create_task(self._read_sse())
        await self._sse_call({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                              "params": {"protocolVersion": "2024-11-05", "capabilities": {},
                                         "clientInfo": {"name": "fuzz", "version": "0"}}})

    async def _initialize_old(self) -> RawSession:
        msg = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "old", "version": "0"}}}
        async with self.http.post(self.gw.mcp_url, json=msg, headers={"Accept": ACCEPT}) as resp:
            session = RawSession(self.http, self.gw.mcp_url, resp.headers["Mcp-Session-Id"])
        return session

    async def _read_sse(self) -> None:
        async for _, data in self.sse_iter:
            try:
                message = json.loads(data)
                check_reply(message)
            except (ValueError, AssertionError) as exc:
                self.sse_bad.append(f"{data[:300]}: {exc}")
                continue
            await self.sse_replies.put(message)

    async def _sse_call(self, message: dict[str, Any]) -> dict[str, Any]:
        async with self.http.post(self.messages_url, json=message) as resp:
            assert resp.status == 202
        async with asyncio.timeout(10):
            while True:
                reply = await self.sse_replies.get()
                if isinstance(reply, dict) and reply.get("id") == message["id"]:
                    return reply  # type: ignore[no-any-return]

    async def close(self) -> None:
        self.sse_reader.cancel()
        self.sse_resp.close()
        await self.stack.aclose()

    def shutdown(self) -> None:
        try:
            self.run(self.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
            self.loop.close()


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    h = Harness()
    try:
        yield h
    finally:
        h.shutdown()


async def _body_messages(resp: aiohttp.ClientResponse) -> list[Any]:
    if resp.content_type == "text/event-stream":
        return [json.loads(data) async for _, data in sse_events(resp)]
    return [json.loads(await resp.read())]


async def _post(harness: Harness, url: str, frame: bytes, headers: dict[str, str]) -> tuple[int, list[Any], bytes]:
    async with harness.http.post(url, data=frame, headers={"Content-Type": "application/json", **headers}) as resp:
        if resp.status == 202:
            return 202, [], await resp.read()
        assert resp.status in (200, 400), (resp.status, await resp.text())
        messages = await _body_messages(resp)
    for message in messages:
        check_reply(message)
    return resp.status, messages, b""


async def _check_alive(harness: Harness, session: RawSession) -> None:
    assert (await session.request("ping"))["result"] == {}
    assert (await harness.bystander.request("ping"))["result"] == {}
    assert (await harness.bystander.request("prompts/list"))["result"] == harness.bystander_prompts


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(frame=frames, version=st.sampled_from(["2025-11-25", "2025-03-26"]))
def test_streamable_http_session_survives_any_body(harness: Harness, frame: bytes, version: str) -> None:
    session = harness.sessions[version]

    async def scenario() -> None:
        status, messages, _ = await _post(harness, harness.gw.mcp_url, frame, session.headers)
        if not is_json(frame) and frame.count(b"[") + frame.count(b"{") <= 400:
            assert status == 400 and messages[0]["error"]["code"] == -32700
        await _check_alive(harness, session)

    harness.run(scenario())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(frame=frames)
def test_streamable_http_without_session(harness: Harness, frame: bytes) -> None:
    async def scenario() -> None:
        status, messages, _ = await _post(harness, harness.gw.mcp_url, frame, {"Accept": ACCEPT})
        assert status in (200, 400)
        if status == 200:  # only a well-formed initialize opens a session
            assert "result" in messages[0] or "error" in messages[0]
        await _check_alive(harness, harness.sessions["2025-11-25"])

    harness.run(scenario())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(frame=frames)
def test_legacy_sse_messages_survive_any_body(harness: Harness, frame: bytes) -> None:
    async def scenario() -> None:
        status, messages, raw = await _post(harness, harness.messages_url, frame, {})
        if status == 202:
            assert raw == b"Accepted"
        else:
            assert messages and all("error" in m for m in messages)
        probe = await harness._sse_call({"jsonrpc": "2.0", "id": "probe", "method": "ping"})
        assert probe == {"jsonrpc": "2.0", "id": "probe", "result": {}}
        assert not harness.sse_bad, harness.sse_bad[:3]
        await _check_alive(harness, harness.sessions["2025-11-25"])

    harness.run(scenario())


def test_all_sessions_still_listed(harness: Harness) -> None:
    ids = set(harness.gw.sessions)
    assert {s.id for s in harness.sessions.values()} | {harness.bystander.id} <= ids
    assert any(s.transport == "sse" for s in harness.gw.sessions.values())
