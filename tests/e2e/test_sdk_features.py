"""Session features through the official SDK client on both HTTP transports, with the ``testkit``
connector: tool pagination, tools/call, progress, sampling, log messages and list_changed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp import MCPError, types
from mcp.client import ClientRequestContext

from gateway.transports.http_app import HTTP_KEY
from tests.e2e import testkit
from tests.e2e.clients import CORE_ONLY, eventually, sdk_client
from tests.support import running_gateway

CONFIG = CORE_ONLY + """
gateway: {name: features, page_size: 7}
connectors:
  - {name: kit, type: testkit, tools: 20}
  - {name: other, type: testkit, tools: 2, prefix: "z.", names: upstream}
"""

pytestmark = pytest.mark.parametrize("transport", ["streamable_http", "sse"])


@pytest.fixture(autouse=True)
def _kind(monkeypatch: pytest.MonkeyPatch) -> None:
    testkit.register(monkeypatch)


async def test_tools_pagination_and_call(transport: str) -> None:
    async with running_gateway(CONFIG) as gw, sdk_client(transport, url=gw.url) as session:
        names: list[str] = []
        cursor = None
        while True:
            page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
            assert len(page.tools) <= 7
            names += [t.name for t in page.tools]
            cursor = page.next_cursor
            if cursor is None:
                break
        expected = sorted([f"kit_echo_{i:03d}" for i in range(20)] + [f"z.echo_{i:03d}" for i in range(2)]
                          + [f"{p}{n}" for p in ("kit_", "z.") for n in ("slow", "progress", "sample", "log", "ask")])
        assert names == expected
        result = await session.call_tool("z.echo_001", {"b": 2, "a": 1})
        assert not result.is_error
        assert isinstance(result.content[0], types.TextContent) and result.content[0].text == '{"a": 1, "b": 2}'
        with pytest.raises(MCPError) as info:
            await session.call_tool("kit_nope", {})
        assert info.value.error.code == -32602


async def test_progress_sampling_and_logging(transport: str) -> None:
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def on_sampling(ctx: ClientRequestContext, params: types.CreateMessageRequestParams
                          ) -> types.CreateMessageResult:
        question = params.messages[0].content
        assert isinstance(question, types.TextContent)
        return types.CreateMessageResult(role="assistant", model="test",
                                         content=types.TextContent(type="text", text=question.text.upper()))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with running_gateway(CONFIG) as gw, \
            sdk_client(transport, url=gw.url, sampling_callback=on_sampling, logging_callback=on_log) as session:
        result = await session.call_tool("kit_progress", {"steps": 4}, progress_callback=on_progress)
        assert isinstance(result.content[0], types.TextContent) and result.content[0].text == "4 steps"
        assert progress == [(i, 4, f"step {i}") for i in range(1, 5)]

        sampled = await session.call_tool("kit_sample", {"q": "shout"})
        assert isinstance(sampled.content[0], types.TextContent) and sampled.content[0].text == "sampled: SHOUT"

        await session.set_logging_level("info")
        await session.call_tool("kit_log", {"level": "debug", "data": "hidden"})
        await session.call_tool("kit_log", {"level": "warning", "data": "shown"})
        async with asyncio.timeout(5):
            while not logs:
                await session.send_ping()  # the SSE transport may deliver the notification a beat later
        assert [(entry.level, entry.data) for entry in logs] == [("warning", "shown")]


async def test_list_changed_reaches_every_session(transport: str) -> None:
    seen: dict[str, asyncio.Event] = {"a": asyncio.Event(), "b": asyncio.Event()}

    def handler(key: str) -> Any:
        async def handle(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                seen[key].set()
        return handle

    async with running_gateway(CONFIG) as gw, \
            sdk_client(transport, url=gw.url, message_handler=handler("a")) as one, \
            sdk_client(transport, url=gw.url, message_handler=handler("b")) as two:
        kit = gw.connectors["kit"]
        assert isinstance(kit, testkit.KitConnector)
        await one.send_ping()
        await two.send_ping()
        if transport == "streamable_http":
            # the SDK opens its GET stream in the background after initialized: wait until it is there
            channels = gw.app[HTTP_KEY].channels
            await eventually(lambda: len(channels) == 2 and all(c.get_stream for c in channels.values()))
        kit.add_tool("added_late")
        async with asyncio.timeout(5):
            await seen["a"].wait()
            await seen["b"].wait()
        assert (await two.list_tools()).tools[0].name == "kit_added_late"
