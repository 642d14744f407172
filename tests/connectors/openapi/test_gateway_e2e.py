"""End to end: the official MCP SDK client → the gateway (Streamable HTTP) → the OpenAPI connector
→ a loopback upstream that validates every request against the spec."""

from __future__ import annotations

import json

import httpx2
from aiohttp import web
from mcp.client.streamable_http import streamable_http_client
from mcp.types import PaginatedRequestParams

from tests.e2e.clients import LEGACY, connect
from tests.support import running_gateway

from .upstream import SPECS, load_doc, mock_upstream


async def test_petstore_through_the_gateway_with_the_sdk_client() -> None:
    def respond(request: web.Request, body: bytes) -> web.Response:
        if request.path.endswith("/pet/404"):
            return web.json_response({"message": "Pet not found"}, status=404)
        if request.path.endswith("/inventory"):
            return web.json_response({"available": 3, "sold": 1})
        return web.json_response({"id": 7, "name": "rex", "photoUrls": [], "status": "available"})

    async with mock_upstream(load_doc(SPECS["petstore"]), respond) as up:
        config = f"""
        gateway: {{page_size: 7}}
        audit: {{enabled: false}}
        connectors:
          - name: petstore
            type: openapi
            spec: {SPECS["petstore"]}
            base_url: {up.url}
            auth: {{api_key: key-1, bearer: tok-1}}
            exclude: {{operations: [deleteUser]}}
            routes: [{{methods: [GET], path: "/pet/{{petId}}", route: resource}}]
        """
        async with running_gateway(config) as gw, connect(streamable_http_client(gw.mcp_url), LEGACY) as session:
            names: list[str] = []
            cursor = None
            while True:
                page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
                names += [t.name for t in page.tools]
                cursor = page.next_cursor
                if not cursor:
                    break
            assert len(names) == 18 and "petstore_addPet" in names  # 20 - deleteUser - getPetById
            assert "petstore_deleteUser" not in names
            result = await session.call_tool("petstore_getInventory", {})
            assert not result.is_error and result.structured_content == {"available": 3, "sold": 1}
            created = await session.call_tool("petstore_addPet", {"name": "rex", "photoUrls": []})
            assert not created.is_error and created.structured_content["name"] == "rex"
            assert json.loads(up.seen[-1]["body"]) == {"name": "rex", "photoUrls": []}
            bad = await session.call_tool("petstore_updatePet", {"name": 5, "photoUrls": []})
            assert bad.is_error and "name" in bad.content[0].text
            templates = await session.list_resource_templates()
            assert [t.uri_template for t in templates.resource_templates] == ["openapi://petstore/pet/{petId}"]
            read_back = await session.read_resource("openapi://petstore/pet/7")
            assert json.loads(read_back.contents[0].text)["id"] == 7
            assert all(not s["errors"] for s in up.seen)


async def test_caller_credentials_are_forwarded_only_when_enabled() -> None:
    """With auth.forward_caller the backend sees the downstream caller's own Authorization header;
    without it the caller's credential never reaches the backend (getInventory uses api_key)."""
    async with mock_upstream(load_doc(SPECS["petstore"]), check_security=False) as up:
        for forward, expected in ((True, "Bearer caller-key"), (False, None)):
            config = f"""
            audit: {{enabled: false}}
            auth: {{api_keys: [{{name: alice, key: caller-key}}]}}
            connectors:
              - name: petstore
                type: openapi
                spec: {SPECS["petstore"]}
                base_url: {up.url}
                auth: {{bearer: tok-1, forward_caller: {str(forward).lower()}}}
            """
            async with running_gateway(config) as gw, \
                    httpx2.AsyncClient(headers={"Authorization": "Bearer caller-key"}) as http, \
                    connect(streamable_http_client(gw.mcp_url, http_client=http), LEGACY) as session:
                result = await session.call_tool("petstore_getInventory", {})
                assert not result.is_error
                assert up.seen[-1]["headers"].get("Authorization") == expected
