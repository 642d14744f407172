"""Server→client requests from a shared stdio upstream are attributed without guessing.

Two official-SDK clients call the same shared stdio SDK upstream concurrently; its ``sample`` tool
asks the client to sample. Session A's sampling callback answers only once session B's call is
under way, so the two calls overlap for certain. With ``shared_calls: queued`` (the default) each
client gets its own answer; with ``concurrent`` B gets the documented error naming
``session: per_client``; never the other client's answer. Plus the turns themselves
(connectors/mcp/turns.py), ``roots/list`` outside any call, and what ``validate`` says.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from mcp import types
from mcp.client.streamable_http import streamable_http_client

from connectors.mcp.connector import MCPConnector
from connectors.mcp.turns import SessionTurns
from gateway.checks import shared_calls_problems
from tests.e2e.clients import LEGACY, connect, eventually
from tests.support import config_from, running_gateway

from .helpers import stdio_config

Sampler = Callable[[Any, types.CreateMessageRequestParams], Awaitable[types.CreateMessageResult]]


def _config(**extra: Any) -> str:
    entry = stdio_config("ev", "--era", "legacy", ping_interval_s=0, **extra)
    return json.dumps({"audit": {"enabled": False}, "connectors": [entry]})


def _answer(text: str) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=text),
                                     model="test")


def _answers(text: str, before: Callable[[], Awaitable[None]] | None = None) -> Sampler:
    async def sampling(_ctx: Any, _params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        if before is not None:
            await before()
        return _answer(text)
    return sampling


async def _two_clients(mode: str, b_under_way: Callable[[MCPConnector, asyncio.Task[Any]], object]
                       ) -> tuple[types.CallToolResult, types.CallToolResult]:
    """A's call samples; its callback starts B's call and answers once ``b_under_way`` holds."""
    extra = {} if mode == "queued" else {"shared_calls": mode}
    async with running_gateway(_config(**extra)) as gw:
        connector = gw.connectors["ev"]
        assert isinstance(connector, MCPConnector)
        b_call: list[asyncio.Task[Any]] = []
        async with connect(streamable_http_client(gw.mcp_url), LEGACY, sampling_callback=_answers("B")) as b:
            async def start_b_and_wait() -> None:
                b_call.append(asyncio.create_task(b.call_tool("ev_sample", {"prompt": "from B"})))
                await eventually(lambda: b_under_way(connector, b_call[0]), timeout=20)

            async with connect(streamable_http_client(gw.mcp_url), LEGACY,
                               sampling_callback=_answers("A", start_b_and_wait)) as a:
                async with asyncio.timeout(60):
                    a_result = await a.call_tool("ev_sample", {"prompt": "from A"})
                    b_result = await b_call[0]
    return a_result, b_result


def _text(result: types.CallToolResult) -> str:
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    return content.text


def _waiting(connector: MCPConnector) -> int:
    return sum(turns.waiting() for turns in connector._turns.values())


async def test_queued_two_sessions_sampling_through_a_shared_stdio_upstream_each_get_their_own_answer() -> None:
    # B's call waits for its session's turn while A's is in flight (B's sampling cannot arrive yet).
    a, b = await _two_clients("queued", lambda connector, _task: _waiting(connector) == 1)
    assert not a.is_error and _text(a) == "sampled: A"
    assert not b.is_error and _text(b) == "sampled: B"


async def test_concurrent_sessions_get_the_documented_error_naming_per_client_never_the_other_answer() -> None:
    # B's call runs at once; its sampling arrives while A's call is in flight too: refused.
    a, b = await _two_clients("concurrent", lambda _connector, task: task.done())
    assert not a.is_error and _text(a) == "sampled: A"
    assert b.is_error and "session: per_client" in _text(b) and "sampled: A" not in _text(b)


async def test_roots_asked_outside_any_call_are_answered_with_none() -> None:
    async with running_gateway(_config()) as gw:
        connector = gw.connectors["ev"]
        assert isinstance(connector, MCPConnector) and connector._shared is not None
        assert await connector.on_request(connector._shared, "roots/list", {}, None) == {"roots": []}


async def test_turns_admit_one_session_at_a_time_first_come_first_served() -> None:
    turns = SessionTurns()
    order: list[str] = []
    release = {sid: asyncio.Event() for sid in ("a", "b", "c")}

    async def call(sid: str, tag: str) -> None:
        async with turns.turn(sid):
            order.append(tag)
            await release[sid].wait()

    a1 = asyncio.create_task(call("a", "a1"))
    a2 = asyncio.create_task(call("a", "a2"))
    await eventually(lambda: order == ["a1", "a2"])  # one session's calls run together
    c1 = asyncio.create_task(call("c", "c1"))
    b1 = asyncio.create_task(call("b", "b1"))
    await eventually(lambda: turns.waiting() == 2)
    # The holder's new call joins its turn (it may be what its waiting call needs: no deadlock).
    a3 = asyncio.create_task(call("a", "a3"))
    await eventually(lambda: order == ["a1", "a2", "a3"])
    cancelled = asyncio.create_task(call("b", "never"))
    await eventually(lambda: turns.waiting() == 3)
    cancelled.cancel()
    await eventually(lambda: turns.waiting() == 2)
    release["a"].set()
    await eventually(lambda: order[3:] == ["c1"] and turns.holder == "c")  # first come, first served
    release["c"].set()
    await eventually(lambda: order[4:] == ["b1"] and turns.holder == "b")
    release["b"].set()
    await asyncio.wait_for(asyncio.gather(a1, a2, a3, b1, c1), 5)
    assert order == ["a1", "a2", "a3", "c1", "b1"] and turns.holder is None and turns.waiting() == 0


def test_validate_warns_where_a_config_can_hit_it() -> None:
    found = shared_calls_problems(config_from(_config(shared_calls="concurrent")))
    assert [p.path for p in found] == [("connectors", 0, "shared_calls")]
    assert "session: per_client" in found[0].message
    assert shared_calls_problems(config_from(_config())) == []
    assert shared_calls_problems(config_from(_config(shared_calls="concurrent", session="per_client"))) == []
