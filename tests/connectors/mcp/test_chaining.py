"""End to end: downstream clients → the gateway → SDK 2.x upstreams of every era (issue 12,
"Chaining (upstream)").

The connector's ``protocol: auto`` speaks 2026-07-28 to a dual-era or modern-only upstream and the
legacy revisions to a legacy-only one, over stdio and Streamable HTTP. Whichever it speaks, a
downstream 2025-11-25 SDK client sees the same server: listings (paginated upstream and
downstream), calls, reads, prompts, progress, logs, list changes, resource updates, cancellation,
and sampling/elicitation (a modern upstream asks with an InputRequiredResult, which the gateway
turns into requests over the client's session). A 2026-07-28 client gets the upstream's
InputRequiredResult with its requestState sealed by the gateway, and change notifications on its
own ``subscriptions/listen``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import aiohttp
import pytest
from mcp import Client, ClientSession, types
from mcp.client.streamable_http import streamable_http_client

from tests.connectors.mcp.helpers import upstream_http
from tests.connectors.mcp.test_gateway_e2e import Client as Recorder
from tests.connectors.mcp.test_gateway_e2e import all_tools, config, mcp_entry
from tests.e2e.clients import LEGACY, MODERN, connect
from tests.support import RunningGateway, running_gateway

ERA_SPOKEN = {"dual": MODERN, "modern": MODERN, "legacy": LEGACY}


class Answers(Recorder):
    """A downstream client that answers sampling (Recorder) and elicitation."""

    def __init__(self, label: str) -> None:
        super().__init__(label)
        self.elicited: list[str] = []

    def logs(self) -> list[Any]:
        return [m.params.data for m in self.messages if isinstance(m, types.LoggingMessageNotification)]

    async def elicitation(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.elicited.append(params.message)
        return types.ElicitResult(action="accept", content={"name": self.label})


@asynccontextmanager
async def chained(transport: str, era: str, *extra: str, **entry: Any) -> AsyncIterator[RunningGateway]:
    """A gateway chaining the test upstream (serving ``era`` over ``transport``) as ``up``."""
    args = ["--era", era, *extra]
    async with AsyncExitStack() as stack:
        if transport == "stdio":
            target = " ".join(args)
        else:
            target, _proc = await stack.enter_async_context(upstream_http(transport, *args))
        gw = await stack.enter_async_context(running_gateway(config(mcp_entry("up", transport, target, **entry),
                                                                    page_size=8)))
        yield gw


@asynccontextmanager
async def legacy_client(url: str, label: str = "c") -> AsyncIterator[tuple[ClientSession, Answers]]:
    rec = Answers(label)
    async with connect(streamable_http_client(url), LEGACY, sampling_callback=rec.sampling,
                       elicitation_callback=rec.elicitation, list_roots_callback=rec.roots,
                       message_handler=rec.on_message) as session:
        yield session, rec


def text(result: Any) -> str:
    return result.content[0].text if result.content else ""  # type: ignore[no-any-return]


# Streamable HTTP with a legacy-only or modern-only upstream is a row of the bridging matrix
# (tests/e2e/test_bridging_matrix.py); here: stdio upstreams of every era, and a dual-era one.
@pytest.mark.parametrize("transport, era", [("stdio", "dual"), ("stdio", "modern"), ("stdio", "legacy"),
                                            ("streamable_http", "dual")])
async def test_a_legacy_client_sees_the_same_server_whatever_the_upstream_speaks(transport: str, era: str) -> None:
    async with chained(transport, era, "--mrtr", "--tools", "12", "--page-size", "5") as gw, \
            legacy_client(gw.mcp_url, "Ada") as (session, rec):
        connector = gw.connectors["up"]
        assert connector.health().up and connector.health().extra["protocol_version"] == ERA_SPOKEN[era]
        # listings: the upstream's pages (5) followed to the end, re-paginated by the gateway (8)
        names = await all_tools(session)
        assert len([n for n in names if n.startswith("up_extra_")]) == 12 and "up_echo" in names
        assert text(await session.call_tool("up_echo", {"text": "hi"})) == "hi"
        read = await session.read_resource("mem://item/9")  # type: ignore[arg-type]
        assert read.contents[0].text == "item 9"  # type: ignore[union-attr]
        prompt = await session.get_prompt("up_greet", {"name": "Ada"})
        assert prompt.messages[0].content.text == "Hello Ada"  # type: ignore[union-attr]
        # progress and logs of a call reach its caller
        progress: list[float] = []

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            progress.append(p)
        await session.call_tool("up_progress", {"steps": 3}, progress_callback=on_progress)
        assert progress == [1, 2, 3]
        await session.call_tool("up_log_then_echo", {"text": "x"})
        assert rec.logs() == ["first x", "second x"]
        # sampling and elicitation: a modern-only upstream asks with InputRequiredResult (the gateway
        # asks this client over its session and retries); a legacy one, and a dual-era one (reached
        # over a session of this client's era, issue 25), ask over their own session
        if era == "modern":
            assert text(await session.call_tool("up_ask_llm", {"prompt": "q"})) == "sampled: Ada saw q"
            assert text(await session.call_tool("up_ask_name", {})) == "Hello, Ada!"
        else:
            assert text(await session.call_tool("up_sample", {"prompt": "q"})) == "sampled: Ada saw q"
            assert text(await session.call_tool("up_elicit_name", {})) == "Hello, Ada!"
        assert rec.elicited == ["Your name?"]
        assert rec.sampled == ["q"]
        # list changes and resource updates (over stdio a dual-era upstream's legacy session is a
        # second process: what it lists and what changes in it reach this client too,
        # connectors/mcp/era_process.py; its subscription is made here after it started)
        before = rec.list_changed()
        grown = text(await session.call_tool("up_grow", {}))
        await rec.signal.wait(lambda: rec.list_changed() > before)
        assert f"up_{grown}" in await all_tools(session)
        assert text(await session.call_tool(f"up_{grown}", {})) == grown
        await session.subscribe_resource("mem://static")  # type: ignore[arg-type]
        await session.call_tool("up_touch", {})

        def updated() -> list[str]:
            return [m.params.uri for m in rec.messages if isinstance(m, types.ResourceUpdatedNotification)]
        await rec.signal.wait(lambda: updated() == ["mem://static"])
        # cancellation reaches the upstream
        call = asyncio.create_task(session.call_tool("up_hang", {"seconds": 30}))
        await rec.signal.wait(lambda: "hanging" in rec.logs())
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert text(await session.call_tool("up_cancelled", {"wait": 10})) == "hang"


@pytest.mark.parametrize("transport", ["stdio", "streamable_http"])
async def test_a_2026_client_gets_the_upstreams_input_request_with_a_sealed_state(transport: str) -> None:
    async with chained(transport, "modern", "--mrtr") as gw, \
            connect(streamable_http_client(gw.mcp_url), MODERN) as session:
        first = await session.call_tool("up_ask_name", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        assert first.input_requests is not None and first.input_requests["who"].method == "elicitation/create"
        assert isinstance(first.request_state, str)
        answer: dict[str, Any] = {"who": types.ElicitResult(action="accept", content={"name": "Grace"})}
        done = await session.call_tool("up_ask_name", {}, input_responses=answer, request_state=first.request_state)
        assert text(done) == "Hello, Grace!"
        # The state the client holds is the gateway's seal around the upstream's: a forged one is refused.
        forged = first.request_state[:-4] + ("AAAA" if not first.request_state.endswith("AAAA") else "BBBB")
        with pytest.raises(Exception, match="requestState|Invalid"):
            await session.call_tool("up_ask_name", {}, input_responses=answer, request_state=forged)
        # prompts/get and resources/read ask the same way
        asked = await session.get_prompt("up_ask_prompt", {}, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult)
        got = await session.get_prompt("up_ask_prompt", {}, input_responses=answer, request_state=asked.request_state)
        assert got.messages[0].content.text == "A prompt for Grace"  # type: ignore[union-attr]
        asked_read = await session.read_resource("ask://doc", allow_input_required=True)  # type: ignore[arg-type]
        assert isinstance(asked_read, types.InputRequiredResult)
        read = await session.read_resource("ask://doc", input_responses=answer,  # type: ignore[arg-type]
                                           request_state=asked_read.request_state)
        assert read.contents[0].text == "doc read by Grace"  # type: ignore[union-attr]


async def test_the_sdk_2026_client_drives_the_rounds_with_its_callbacks() -> None:
    sampled: list[str] = []

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        sampled.append(params.messages[0].content.text)  # type: ignore[union-attr]
        return types.CreateMessageResult(role="assistant", model="m", content=types.TextContent(type="text", text="42"))

    async with chained("streamable_http", "dual", "--mrtr") as gw, \
            Client(streamable_http_client(gw.mcp_url), mode=MODERN, sampling_callback=sampling) as client:
        result = await client.call_tool("up_ask_llm", {"prompt": "meaning?"})
        assert text(result) == "sampled: 42" and sampled == ["meaning?"]
        # the modern client mirrors the tool's x-mcp-header parameter to the gateway, which sends
        # the upstream its own headers: the upstream's local tool name and the parameter
        sent = json.loads(text(await client.call_tool("up_headers", {"zone": "eu"})))
        assert sent["mcp-name"] == "headers" and sent["mcp-param-zone"] == "eu"
        assert sent["mcp-method"] == "tools/call" and sent["mcp-protocol-version"] == MODERN


def _listen_message(rid: int, notifications: dict[str, Any]) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}}
    return {"jsonrpc": "2.0", "id": rid, "method": "subscriptions/listen",
            "params": {"notifications": notifications, "_meta": meta}}


async def _messages(resp: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    async for line in resp.content:
        if line.startswith(b"data: "):
            yield json.loads(line[6:])


@pytest.mark.parametrize("transport", ["stdio", "streamable_http"])
async def test_a_2026_listen_downstream_gets_a_modern_upstreams_changes(transport: str) -> None:
    async with chained(transport, "modern") as gw, \
            connect(streamable_http_client(gw.mcp_url), MODERN) as session, aiohttp.ClientSession() as http:
        msg = _listen_message(5, {"toolsListChanged": True, "resourceSubscriptions": ["mem://static"]})
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN,
                   "Mcp-Method": "subscriptions/listen"}
        async with http.post(gw.mcp_url, json=msg, headers=headers) as resp:
            assert resp.status == 200
            stream = _messages(resp)
            ack = await asyncio.wait_for(stream.__anext__(), 10)
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            # the gateway subscribed upstream: the connector's own listen now names the URI
            listener = gw.connectors["up"]._listener
            assert listener is not None and listener.uris == frozenset({"mem://static"})
            await asyncio.wait_for(listener._ack.wait(), 10)
            await session.call_tool("up_touch", {})
            updated = await asyncio.wait_for(stream.__anext__(), 10)
            assert updated["method"] == "notifications/resources/updated"
            assert updated["params"]["uri"] == "mem://static"
            await session.call_tool("up_grow", {})
            changed = await asyncio.wait_for(stream.__anext__(), 10)
            assert changed["method"] == "notifications/tools/list_changed"
            assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 5
