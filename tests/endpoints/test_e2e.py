"""End to end: endpoints (virtual servers) with the official SDK client over Streamable HTTP (both
revisions), legacy SSE and stdio, a real upstream MCP server (``upstream_server.py`` over stdio)
and a static connector behind them."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
import pytest
from mcp import MCPError, StdioServerParameters, types
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.connectors.mcp.helpers import SERVER
from tests.e2e.clients import LEGACY, MODERN, Revision, connect
from tests.support import REPO, config_from, running_gateway

ALICE = "alice-key-0123456789"  # group oncall
BOB = "bob-key-0123456789"

CONFIG = """
audit: {{store: none, jsonl: "{tmp}/audit.jsonl", flush_interval_s: 0.01}}
telemetry: {{metrics: false}}
gateway: {{name: e2e, page_size: 2, instructions: Everything.}}
auth:
  stdio_principal: local
  api_keys:
    - {{name: alice, key: {alice}, groups: [oncall]}}
    - {{name: bob, key: {bob}}}
access:
  - {{principals: ["*"], allow: ["*"], deny: [up_pid]}}
rate_limits:
  rules: [{{scope: tool, match: up_big, rate: 1/h, burst: 1}}]
connectors:
  # protocol modern: one upstream process for every caller (under auto a legacy caller of this
  # dual-era stdio server gets a process of its own, whose grown tools the catalog never lists)
  - {{name: up, type: mcp, transport: stdio, protocol: modern, command: {python}, args: [{server}, --transport, stdio]}}
  - name: kit
    type: static
    prompts:
      - {{name: p00, description: Prompt 0, messages: [{{role: user, text: zero}}]}}
      - {{name: p01, description: Prompt 1, messages: [{{role: user, text: one}}]}}
      - {{name: p02, description: Prompt 2, messages: [{{role: user, text: two}}]}}
      - {{name: p03, description: Prompt 3, messages: [{{role: user, text: three}}]}}
    resources:
      - {{uri: 'mem://r00', name: r00, mime_type: text/plain, text: 'text 0'}}
      - {{uri: 'mem://r01', name: r01, mime_type: text/plain, text: 'text 1'}}
      - {{uri: 'docs://runbook', name: runbook, mime_type: text/plain, text: 'runbook'}}
endpoints:
  - name: oncall
    title: On-call tools
    instructions: Read-only tools for incident response.
    select:
      - {{connector: up, tools: [up_echo, up_grow, "up_grown_*", up_pid]}}
      - {{resources: ["docs://runbook*"], prompts: ["kit_p0[0-2]"]}}
    rename: {{up_echo: say}}
    description: {{up_echo: Say the fixed words.}}
    defaults: {{up_echo: {{text: fixed words}}}}
    principals: ["group:oncall", local]
  - name: support
    select:
      - {{connector: kit, prompts: ["*"]}}
      - {{tools: [up_big, up_env]}}
  - name: finder
    discovery: search
    select: [{{connector: up}}]
    search: {{semantic: off}}  # the rankings asserted here are the lexical ones
"""

ONCALL_TOOLS = {"say", "up_grow", "up_pid"}  # up_pid is selected but denied by access rules: hidden
SUPPORT_TOOLS = {"up_big", "up_env"}


def config_text(tmp: Path) -> str:
    return CONFIG.format(tmp=tmp, alice=ALICE, bob=BOB, python=sys.executable, server=SERVER)


async def all_pages(fetch: Callable[[str | None], Awaitable[Any]], key: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    while True:
        page = await fetch(cursor)
        items += getattr(page, key)
        cursor = page.next_cursor
        if not cursor:
            return items


async def tool_names(session: ClientSession) -> set[str]:
    return {t.name for t in await all_pages(lambda c: session.list_tools(params=types.PaginatedRequestParams(cursor=c)), "tools")}


@asynccontextmanager
async def endpoint_session(transport: str, url: str, endpoint: str, key: str = ALICE, revision: Revision = LEGACY,
                           config_path: Path | None = None, **kwargs: Any) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {key}"}
    if transport == "streamable_http":
        async with httpx2.AsyncClient(headers=headers) as http, \
                connect(streamable_http_client(f"{url}/mcp/{endpoint}", http_client=http), revision,
                        **kwargs) as session:
            yield session
    elif transport == "sse":
        async with connect(sse_client(f"{url}/sse/{endpoint}", headers=headers), revision, **kwargs) as session:
            yield session
    else:
        assert config_path is not None
        params = StdioServerParameters(command=sys.executable, cwd=str(REPO), args=[
            "-m", "gateway.cli", "stdio", "--config", str(config_path), "--endpoint", endpoint])
        with config_path.with_suffix(f".{endpoint}.log").open("w") as err:
            async with connect(stdio_client(params, errlog=err), revision, **kwargs) as session:
                yield session


@pytest.mark.parametrize("transport", ["streamable_http", "sse", "stdio"])
async def test_two_endpoints_serve_exactly_their_selections(tmp_path: Path, transport: str) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_text(config_text(tmp_path))
    async with running_gateway(path.read_text(), base_dir=tmp_path) as gw:
        async with endpoint_session(transport, gw.url, "oncall", config_path=path) as oncall, \
                endpoint_session(transport, gw.url, "support", config_path=path) as support:
            assert oncall.server_info.name == "e2e/oncall"
            assert oncall.server_info.title == "On-call tools"
            assert oncall.instructions == "Read-only tools for incident response."
            assert await tool_names(oncall) == ONCALL_TOOLS - {"up_pid"}  # up_pid: denied to everyone
            assert await tool_names(support) == SUPPORT_TOOLS
            prompts = await all_pages(lambda c: oncall.list_prompts(params=types.PaginatedRequestParams(cursor=c)), "prompts")
            assert [p.name for p in prompts] == ["kit_p00", "kit_p01", "kit_p02"]
            resources = await all_pages(lambda c: oncall.list_resources(params=types.PaginatedRequestParams(cursor=c)), "resources")
            assert [str(r.uri) for r in resources] == ["docs://runbook"]
            assert [p.name for p in await all_pages(lambda c: support.list_prompts(params=types.PaginatedRequestParams(cursor=c)), "prompts")] == \
                ["kit_p00", "kit_p01", "kit_p02", "kit_p03"]
            # The renamed tool, its fixed argument hidden from the schema and set on the call.
            say = next(t for t in await all_pages(lambda c: oncall.list_tools(params=types.PaginatedRequestParams(cursor=c)), "tools") if t.name == "say")
            assert "text" not in say.input_schema.get("properties", {})
            assert say.description == "Say the fixed words."
            result = await oncall.call_tool("say", {"text": "something else"})
            assert not result.is_error and result.content[0].text == "fixed words"
            # What an endpoint does not serve is unknown there, by either name.
            for name in ("up_echo", "up_big"):
                with pytest.raises(MCPError) as info:
                    await oncall.call_tool(name, {"text": "x"})
                assert info.value.error.code == -32602
            with pytest.raises(MCPError):
                await oncall.get_prompt("kit_p03")
            with pytest.raises(MCPError):
                await oncall.read_resource("mem://r00")
            assert (await oncall.read_resource("docs://runbook")).contents[0].text == "runbook"


async def test_modern_revision_and_discover_on_an_endpoint(tmp_path: Path) -> None:
    async with running_gateway(config_text(tmp_path), base_dir=tmp_path) as gw, \
            endpoint_session("streamable_http", gw.url, "oncall", revision=MODERN, discover=True) as oncall:
        assert await tool_names(oncall) == ONCALL_TOOLS - {"up_pid"}
        result = await oncall.call_tool("say", {})
        assert result.content[0].text == "fixed words"
        assert oncall.instructions == "Read-only tools for incident response."


async def _post(url: str, body: dict[str, Any], key: str | None, session_id: str | None = None
                ) -> tuple[int, dict[str, Any], dict[str, str]]:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if session_id:
        headers["Mcp-Session-Id"] = session_id
    async with aiohttp.ClientSession() as http, http.post(url, json=body, headers=headers) as resp:
        text = await resp.text()
        if resp.content_type == "text/event-stream":
            text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
        return resp.status, json.loads(text) if text else {}, dict(resp.headers)


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


async def test_principals_refused_with_401_or_403(tmp_path: Path) -> None:
    async with running_gateway(config_text(tmp_path), base_dir=tmp_path) as gw:
        status, body, headers = await _post(f"{gw.url}/mcp/oncall", INIT, None)
        assert status == 401 and "WWW-Authenticate" in headers
        status, body, _ = await _post(f"{gw.url}/mcp/oncall", INIT, BOB)
        assert status == 403 and "bob" in body["error"]["message"]
        async with aiohttp.ClientSession() as http, \
                http.get(f"{gw.url}/sse/oncall", headers={"Authorization": f"Bearer {BOB}"}) as resp:
            assert resp.status == 403
        status, _, _ = await _post(f"{gw.url}/mcp/nowhere", INIT, ALICE)
        assert status == 404
        status, body, _ = await _post(f"{gw.url}/mcp/oncall", INIT, ALICE)
        assert status == 200 and body["result"]["serverInfo"]["name"] == "e2e/oncall"
        # bob may use the endpoint without principals
        status, _, _ = await _post(f"{gw.url}/mcp/support", INIT, BOB)
        assert status == 200


async def test_a_cursor_of_one_endpoint_is_refused_by_another(tmp_path: Path) -> None:
    async with running_gateway(config_text(tmp_path), base_dir=tmp_path) as gw, \
            endpoint_session("streamable_http", gw.url, "oncall") as oncall, \
            endpoint_session("streamable_http", gw.url, "support") as support, \
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}) as http, \
            connect(streamable_http_client(f"{gw.url}/mcp", http_client=http), LEGACY) as everything:
        page = await oncall.list_prompts()
        assert page.next_cursor
        again = await oncall.list_prompts(params=types.PaginatedRequestParams(cursor=page.next_cursor))
        assert [p.name for p in again.prompts] == ["kit_p02"]
        for other in (support, everything):
            with pytest.raises(MCPError) as info:
                await other.list_prompts(params=types.PaginatedRequestParams(cursor=page.next_cursor))
            assert info.value.error.code == -32602
        main_page = await everything.list_prompts()
        with pytest.raises(MCPError) as info:
            await oncall.list_prompts(params=types.PaginatedRequestParams(cursor=main_page.next_cursor))
        assert info.value.error.code == -32602


async def test_list_changed_reaches_only_the_endpoints_whose_selection_changed(tmp_path: Path) -> None:
    seen: dict[str, list[str]] = {"oncall": [], "support": []}
    changed = asyncio.Event()

    def recorder(name: str) -> Callable[[Any], Awaitable[None]]:
        async def handle(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                seen[name].append("tools")
                if name == "oncall":
                    changed.set()
        return handle

    async with running_gateway(config_text(tmp_path), base_dir=tmp_path) as gw, \
            endpoint_session("streamable_http", gw.url, "oncall", message_handler=recorder("oncall")) as oncall, \
            endpoint_session("sse", gw.url, "support", message_handler=recorder("support")) as support:
        assert "up_grown_0" not in await tool_names(oncall)
        # up_grow adds up_grown_0 upstream: in oncall's selection (up_grown_*), not in support's.
        assert (await oncall.call_tool("up_grow", {})).content[0].text == "grown_0"
        async with asyncio.timeout(10):
            await changed.wait()
        assert "up_grown_0" in await tool_names(oncall)
        # The same rebuild would have queued support's notification before oncall's was sent;
        # a round trip on its stream after that shows it never came.
        await support.send_ping()
        await support.list_tools()
        assert seen["support"] == [] and seen["oncall"] == ["tools"]


def _audit(tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def _audited(tmp: Path, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    async with asyncio.timeout(10):
        while True:
            for event in _audit(tmp):
                if predicate(event):
                    return event
            await asyncio.sleep(0.02)  # the JSON lines are written by the batching writer: poll the file


async def test_search_endpoint_find_and_call_as_the_real_tool(tmp_path: Path) -> None:
    async with running_gateway(config_text(tmp_path), base_dir=tmp_path) as gw, \
            endpoint_session("streamable_http", gw.url, "finder") as finder:
        listed = await finder.list_tools()
        assert [t.name for t in listed.tools] == ["find_tools", "call_tool"]
        found = await finder.call_tool("find_tools", {"query": "echo the text back", "limit": 3})
        assert not found.is_error
        tools = found.structured_content["tools"]
        assert 1 <= len(tools) <= 3 and tools[0]["name"] == "up_echo"
        assert tools[0]["inputSchema"]["properties"]["text"]
        assert "up_echo" in found.content[0].text
        # Visibility before ranking: a tool the caller may not use is never found.
        pid = await finder.call_tool("find_tools", {"query": "process id pid of the server", "limit": 50})
        assert "up_pid" not in {t["name"] for t in pid.structured_content["tools"]}
        bad = await finder.call_tool("find_tools", {"query": ""})
        assert bad.is_error

        result = await finder.call_tool("call_tool", {"name": "up_echo", "arguments": {"text": "hi"}})
        assert result.content[0].text == "hi"
        direct = await finder.call_tool("up_echo", {"text": "direct"})  # found tools are callable by name
        assert direct.content[0].text == "direct"
        event = await _audited(tmp_path, lambda e: e["method"] == "tools/call" and e["target"] == "up_echo"
                               and (e.get("arguments") or {}).get("text") == "hi")
        assert event["connector"] == "up" and event["outcome"] == "ok" and event["endpoint"] == "finder"

        with pytest.raises(MCPError) as info:  # access rules, as up_pid
            await finder.call_tool("call_tool", {"name": "up_pid", "arguments": {}})
        assert info.value.error.code == -32003
        denied = await _audited(tmp_path, lambda e: e["target"] == "up_pid")
        assert denied["outcome"] == "denied" and denied["connector"] == "up" and denied["endpoint"] == "finder"

        first = await finder.call_tool("call_tool", {"name": "up_big", "arguments": {"size": 3}})
        assert first.content[0].text == "xxx"
        with pytest.raises(MCPError) as info:  # the rate limit of up_big, not of call_tool
            await finder.call_tool("call_tool", {"name": "up_big", "arguments": {"size": 3}})
        assert info.value.error.code == -32029
        limited = await _audited(tmp_path, lambda e: e["target"] == "up_big" and e["outcome"] == "rate_limited")
        assert limited["connector"] == "up"
        with pytest.raises(MCPError) as info:
            await finder.call_tool("call_tool", {"name": "nope", "arguments": {}})
        assert info.value.error.code == -32602


async def test_a_reload_adds_an_endpoint_and_reselects_one_keeping_its_sessions(tmp_path: Path) -> None:
    got = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.PromptListChangedNotification):
            got.set()

    text = config_text(tmp_path)
    async with running_gateway(text, base_dir=tmp_path) as gw, \
            endpoint_session("streamable_http", gw.url, "support", key=BOB, message_handler=on_message) as support:
        assert len((await support.list_prompts()).prompts) == 2  # page_size 2: first page of 4
        status, _, _ = await _post(f"{gw.url}/mcp/late", INIT, BOB)
        assert status == 404
        new = text.replace("      - {connector: kit, prompts: [\"*\"]}", "      - {connector: kit, prompts: [kit_p03]}")
        new += "  - {name: late, select: [{prompts: [kit_p00]}]}\n"
        assert new != text + "  - {name: late, select: [{prompts: [kit_p00]}]}\n"
        await gw.gateway.reload(config_from(new, tmp_path))
        async with asyncio.timeout(10):
            await got.wait()  # the same session, told its selection changed
        assert [p.name for p in (await support.list_prompts()).prompts] == ["kit_p03"]
        async with endpoint_session("streamable_http", gw.url, "late", key=BOB) as late:
            assert [p.name for p in (await late.list_prompts()).prompts] == ["kit_p00"]
