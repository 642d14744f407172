"""The SQL connector through a real gateway, driven by the official MCP SDK client."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import aiohttp
from mcp.client.streamable_http import streamable_http_client
from mcp.types import (
    PromptReference,
    ResourceTemplateReference,
    ToolListChangedNotification,
)

from tests.e2e.clients import LEGACY, connect
from tests.support import running_gateway

from .helpers import admin_execute, admin_script, asyncpg_url, pg_database
from .test_postgres import SETUP
from .test_sqlite import DEMO, TOP

CORE_ONLY = "audit: {enabled: false}\ntelemetry: {metrics: false}\n"


def _config(url: str, extra: str = "") -> str:
    return (CORE_ONLY + "connectors:\n  - name: shop\n    type: sql\n"
            f"    url: {json.dumps(url)}\n    max_rows: 25\n"
            + ("    allow_privileged: true\n" if url.startswith("postgresql") else "") + extra)


async def test_sqlite_through_the_gateway(tmp_path: Path) -> None:
    shutil.copy(DEMO, tmp_path / "shop.db")
    queries = "    queries:\n      - " + json.dumps(TOP) + "\n"
    async with running_gateway(_config("sqlite+aiosqlite:///shop.db", queries), base_dir=tmp_path) as gw, \
            connect(streamable_http_client(gw.mcp_url), LEGACY) as session:
        caps = session.server_capabilities
        assert caps is not None and caps.completions is not None and caps.resources is not None
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert {"shop_query", "shop_list_tables", "shop_describe_table", "shop_explain",
                "shop_top_customers"} <= set(tools)
        assert "shop_execute" not in tools
        assert tools["shop_query"].annotations.read_only_hint is True
        assert tools["shop_top_customers"].input_schema["properties"]["region"]["enum"] == ["emea", "amer", "apac"]

        result = await session.call_tool("shop_query", {"sql": "SELECT id, name FROM customers ORDER BY id"})
        assert not result.is_error
        page = result.structured_content
        assert page["columns"] == ["id", "name"] and len(page["rows"]) == 25 and page["truncated"]
        nxt = await session.call_tool("shop_query", {"sql": "SELECT id, name FROM customers ORDER BY id",
                                                     "cursor": page["nextCursor"]})
        assert nxt.structured_content["rows"][0][0] == 26

        top = await session.call_tool("shop_top_customers", {"region": "emea", "n": 2})
        assert len(top.structured_content["rows"]) == 2
        refused = await session.call_tool("shop_query", {"sql": "DELETE FROM orders"})
        assert refused.is_error and "read-only" in refused.content[0].text
        bad = await session.call_tool("shop_top_customers", {"region": "moon"})
        assert bad.is_error and "must be one of" in bad.content[0].text

        uris = {str(r.uri) for r in (await session.list_resources()).resources}
        assert {"sql://shop/overview", "sql://shop/main/orders"} <= uris
        read_back = await session.read_resource("sql://shop/main/orders")
        assert "customer_id" in read_back.contents[0].text
        [template] = (await session.list_resource_templates()).resource_templates
        row = await session.read_resource("sql://shop/main/customers/row/7")
        assert json.loads(row.contents[0].text)["id"] == 7

        prompt = await session.get_prompt("shop_explore_table", {"table": "orders"})
        assert prompt.messages[0].content.resource.uri == "sql://shop/main/orders"
        done = await session.complete(PromptReference(type="ref/prompt", name="shop_explore_table"),
                                      {"name": "table", "value": "ord"})
        assert done.completion.values == ["order_items", "orders"]
        keys = await session.complete(ResourceTemplateReference(type="ref/resource", uri=template.uri_template),
                                      {"name": "key", "value": "12"},
                                      context_arguments={"schema": "main", "table": "customers"})
        assert keys.completion.values == ["12", "120"]


async def test_postgres_outage_through_the_gateway(pg_url: str) -> None:
    async with pg_database(pg_url, SETUP) as db:
        config = _config(asyncpg_url(pg_url, db, password="Gw-Secret-42"), "    connect_timeout_s: 2\n")
        changed = asyncio.Event()

        async def on_message(message: object) -> None:
            # The catalog drops a down connector's tools and restores them when it is back up.
            if isinstance(message, ToolListChangedNotification):
                changed.set()

        async with running_gateway(config) as gw, aiohttp.ClientSession() as http, \
                connect(streamable_http_client(gw.mcp_url), LEGACY, message_handler=on_message) as session:
            ok = await session.call_tool("shop_query", {"sql": "SELECT count(*) FROM customers"})
            assert ok.structured_content["rows"] == [[300]]
            async with http.get(gw.url + "/readyz?strict=1") as resp:
                assert resp.status == 200

            await admin_execute(pg_url, "postgres", f'DROP DATABASE "{db}" WITH (FORCE)')
            failed = await session.call_tool("shop_query", {"sql": "SELECT 1"})
            assert failed.is_error and "Database unavailable" in failed.content[0].text
            assert "Gw-Secret-42" not in failed.content[0].text
            async with http.get(gw.url + "/readyz?strict=1&verbose=1") as resp:
                body = await resp.text()
                assert resp.status == 503 and '"up": false' in body and "Gw-Secret-42" not in body

            await admin_execute(pg_url, "postgres", f'CREATE DATABASE "{db}_next"')
            await admin_script(pg_url, f"{db}_next", SETUP)
            await admin_execute(pg_url, "postgres", f'ALTER DATABASE "{db}_next" RENAME TO "{db}"')
            async with asyncio.timeout(15):
                while not gw.connectors["shop"].health().up:
                    await changed.wait()
                    changed.clear()
            back = await session.call_tool("shop_query", {"sql": "SELECT count(*) FROM orders"})
            assert not back.is_error and back.structured_content["rows"] == [[600]]
            async with http.get(gw.url + "/readyz?strict=1") as resp:
                assert resp.status == 200

