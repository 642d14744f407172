"""Three gateway processes behind HAProxy round robin, sharing Redis and a PostgreSQL audit log:
one is SIGKILLed in the middle of a run. A 2025-11-25 session (SDK client) goes on on the others, its
call in flight on the killed replica fails with a clear error on its resumed stream (``Last-Event-ID``
on a GET that lands on another replica), a 2026-07-28 SDK client (stateless, MRTR sampling) goes on
too, a 2026-07-28 call in flight on the killed replica fails at once with a broken-connection error
(no hang) and the next call is served by another replica, and every answered call of both is in the
audit log."""

from __future__ import annotations

import asyncio
import json
import secrets
from contextlib import AsyncExitStack

import aiohttp
import asyncpg
import pytest
from mcp import types
from mcp.client import ClientRequestContext

from tests.conformance.test_conformance import reference
from tests.e2e.clients import MODERN, sdk_client
from tests.scale.harness import roundrobin_proxy, sse_events, state_section, watched_upstream
from tests.support import GatewayProcess, gateway_process


async def _sample(ctx: ClientRequestContext, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    question = params.messages[0].content
    assert isinstance(question, types.TextContent)
    return types.CreateMessageResult(role="assistant", model="t",
                                     content=types.TextContent(type="text", text=question.text.upper()))


async def _in_flight(http: aiohttp.ClientSession, proc: GatewayProcess) -> float:
    """The replica's ``requests_in_flight`` gauge (MCP requests it is serving now)."""
    async with http.get(proc.url + "/metrics") as resp:
        text = await resp.text()
    [value] = [line.split()[1] for line in text.splitlines() if line.startswith("mcp_gateway_requests_in_flight ")]
    return float(value)


async def _holder(http: aiohttp.ClientSession, procs: list[GatewayProcess]) -> GatewayProcess:
    """The one replica serving a request now (waiting for the request to get there)."""
    async with asyncio.timeout(10):
        while True:
            busy = [p for p in procs if await _in_flight(http, p) > 0]
            if busy:
                [holder] = busy
                return holder
            await asyncio.sleep(0.02)


def _messages(exc: BaseException) -> list[str]:
    """Every message in ``exc``: the SDK's error arrives wrapped in task-group errors."""
    out = [f"{type(exc).__name__}: {exc}"]
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            out += _messages(inner)
    if exc.__cause__ is not None:
        out += _messages(exc.__cause__)
    return out


@pytest.mark.timeout(180)
async def test_a_session_survives_the_sigkill_of_a_replica(pg_url: str) -> None:
    run = secrets.token_hex(4)
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-11-25"}
    async with AsyncExitStack() as stack:
        upstream = await stack.enter_async_context(reference("dual"))
        holding = await stack.enter_async_context(watched_upstream())  # its ``hold``: a call that stays in flight
        entries = [{"name": "up", "type": "mcp", "prefix": "", "transport": "streamable_http", "url": upstream},
                   {"name": "slow", "type": "mcp", "transport": "streamable_http",
                    "url": holding}]
        config = json.dumps({
            "gateway": {"cursor_secret": "replicas"}, "connectors": entries,
            "state": state_section(),
            # strict: a call is answered only once its audit event is committed, so a SIGKILL loses none
            "audit": {"store": pg_url.replace("postgresql://", "postgresql+asyncpg://"), "durability": "strict"}})
        procs = [await stack.enter_async_context(gateway_process(config)) for _ in range(3)]
        url = await stack.enter_async_context(roundrobin_proxy([p.url for p in procs]))
        session = await stack.enter_async_context(sdk_client("streamable_http", url=url, sampling_callback=_sample))
        modern = await stack.enter_async_context(sdk_client("streamable_http", url=url, sampling_callback=_sample,
                                                            revision=MODERN))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        db = await asyncpg.connect(pg_url)
        stack.push_async_callback(db.close)

        answered = 0

        async def call(i: int) -> None:
            nonlocal answered
            result = await session.call_tool("test_sampling", {"prompt": f"run-{run}-{i}"})
            content = result.content[0]
            assert isinstance(content, types.TextContent) and content.text == f"LLM response: RUN-{run.upper()}-{i}"
            answered += 1

        async def modern_call(i: int) -> None:  # no session: each leg (and MRTR retry) on another replica
            nonlocal answered
            # (the reference's 2026-07-28 sampling tool: its test_sampling asks over a session; the
            # prompt, which this tool ignores, names the call in the audit log)
            tool, args = "test_input_required_result_sampling", {"prompt": f"modern-{run}-{i}"}
            first = await modern.call_tool(tool, args, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.input_requests is not None
            [(key, asked)] = first.input_requests.items()
            assert isinstance(asked, types.CreateMessageRequest)
            answer = {key: await _sample(None, asked.params)}  # type: ignore[arg-type]
            result = await modern.call_tool(tool, args, input_responses=answer,  # type: ignore[arg-type]
                                            request_state=first.request_state)
            content = result.content[0]
            assert isinstance(content, types.TextContent)
            assert content.text == "The model answered: WHAT IS THE CAPITAL OF FRANCE?", content
            answered += 1

        for i in range(6):
            await call(i)
            await modern_call(i)
        [sid] = {r["session_id"] for r in await db.fetch(
            "SELECT session_id FROM gw_audit_events WHERE arguments->>'prompt' LIKE $1", f"run-{run}-%")}

        # A 2026-07-28 call in flight (through the proxy) on the replica that dies: ``hold`` answers
        # long after the kill. The replica serving it is the victim.
        # Its own SDK client: the SDK's transport fails the whole client on a broken POST, not only
        # the call (a 2026-07-28 client has no session to lose: the next call is a new client's).
        async def held_call() -> None:
            async with sdk_client("streamable_http", url=url, revision=MODERN) as held_client:
                await held_client.call_tool("slow_hold", {"seconds": 60})
        held = asyncio.ensure_future(held_call())
        victim = await _holder(http, procs)
        # A session call in flight there too (it waits for a sampling answer nobody gives).
        pending = {"jsonrpc": "2.0", "id": "inflight", "method": "tools/call",
                   "params": {"name": "test_sampling", "arguments": {"prompt": "never answered"}}}
        async with http.post(victim.mcp_url, json=pending, headers={**headers, "Mcp-Session-Id": sid}) as resp:
            assert resp.status == 200 and resp.content_type == "text/event-stream"
            last_id = None
            async for event_id, message in sse_events(resp):
                if message is not None and message.get("method") == "sampling/createMessage":
                    last_id = event_id
                    break
            assert last_id is not None
            victim.proc.kill()
            await victim.proc.wait()
            with pytest.raises((aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError,  # noqa: PT012
                                aiohttp.ClientConnectionError)):
                async with asyncio.timeout(5):  # the break is seen at once: no hang
                    while await resp.content.readline():
                        pass
                    raise aiohttp.ServerDisconnectedError()
        # The stateless call fails at once with an error naming the broken connection, not a hang.
        with pytest.raises(BaseException) as broken:  # noqa: PT011 - what it says is checked below
            async with asyncio.timeout(10):
                await held
        assert not isinstance(broken.value, TimeoutError)
        said = _messages(broken.value)
        # Either HAProxy closes the client's connection (``Server disconnected without sending a
        # response``) or answers 502 (the SDK's spelling of a 5xx: ``Server returned an error response``).
        assert any("server disconnected" in m.lower() or "server returned an error response" in m.lower()
                   for m in said), said
        # The next call is served by another replica (a fresh client, and the other one that was
        # idle, both through the proxy).
        async with sdk_client("streamable_http", url=url, revision=MODERN) as fresh:
            again = await fresh.call_tool("slow_hold", {"seconds": 0})
        content = again.content[0]
        assert not again.is_error and isinstance(content, types.TextContent) and content.text == "held"
        again = await modern.call_tool("slow_hold", {"seconds": 0})
        assert not again.is_error
        # Its stream resumes on another replica (through the proxy) and ends with a clear error.
        async with http.get(url + "/mcp", headers={**headers, "Mcp-Session-Id": sid, "Last-Event-ID": last_id}) as resp:
            assert resp.status == 200
            resumed = [m async for _, m in sse_events(resp) if m is not None]
        assert resumed[-1]["id"] == "inflight" and "stopped before answering" in resumed[-1]["error"]["message"]

        # The session goes on: every further call lands on a live replica, sampling answers included.
        for i in range(6, 15):
            await call(i)
            await modern_call(i)
        assert answered == 30
        # Every answered call is in the audit log, whichever replica served it.
        rows = await db.fetch("SELECT arguments->>'prompt' AS p, outcome, instance FROM gw_audit_events "
                              "WHERE method = 'tools/call' AND arguments->>'prompt' LIKE $1", f"run-{run}-%")
        assert sorted(r["p"] for r in rows if r["outcome"] == "ok") == sorted(f"run-{run}-{i}" for i in range(15))
        assert len({r["instance"] for r in rows}) >= 2
        rows = await db.fetch("SELECT arguments->>'prompt' AS p, outcome, instance FROM gw_audit_events "
                              "WHERE method = 'tools/call' AND arguments->>'prompt' LIKE $1", f"modern-{run}-%")
        assert {r["p"] for r in rows if r["outcome"] == "ok"} == {f"modern-{run}-{i}" for i in range(15)}
        assert len({r["instance"] for r in rows}) >= 2
