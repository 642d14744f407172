"""Every security scheme kind against a loopback server that checks the credentials, including
OAuth2 client-credentials token caching and refresh."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from aiohttp import web

from connectors.openapi.config import OpenAPIConfig
from connectors.openapi.connector import OpenAPIConnector
from gateway.protocol.errors import ToolExecutionError

from .upstream import RecordingEvents, ctx, mock_upstream


def spec(scheme: dict[str, Any]) -> dict[str, Any]:
    return {
        "openapi": "3.0.3", "info": {"title": "auth", "version": "1"}, "servers": [{"url": "https://api.test/v1"}],
        "components": {"securitySchemes": {"s": scheme}},
        "security": [{"s": []}],
        "paths": {"/me": {"get": {"operationId": "me", "responses": {"200": {"description": "ok"}}}},
                  "/open": {"get": {"operationId": "open", "security": [],
                                    "responses": {"200": {"description": "ok"}}}}},
    }


CASES = [
    ({"type": "apiKey", "in": "header", "name": "X-Key"}, {"api_key": "sekret"},
     lambda r: r.headers.get("X-Key") == "sekret"),
    ({"type": "apiKey", "in": "query", "name": "key"}, {"api_key": "sek ret"},
     lambda r: r.query.get("key") == "sek ret"),
    ({"type": "apiKey", "in": "cookie", "name": "sid"}, {"api_key": "sekret"},
     lambda r: r.cookies.get("sid") == "sekret"),
    ({"type": "http", "scheme": "bearer"}, {"bearer": "tok"},
     lambda r: r.headers.get("Authorization") == "Bearer tok"),
    ({"type": "http", "scheme": "basic"}, {"basic": {"username": "u", "password": "p@ss"}},
     lambda r: r.headers.get("Authorization") == "Basic " + base64.b64encode(b"u:p@ss").decode()),
]


@pytest.mark.parametrize(("scheme", "auth", "check"), CASES, ids=["header", "query", "cookie", "bearer", "basic"])
async def test_scheme_is_applied(scheme: dict[str, Any], auth: dict[str, Any], check: Any) -> None:
    def respond(request: web.Request, body: bytes) -> web.Response:
        if request.path.endswith("/open"):
            return web.json_response({"authorization": request.headers.get("Authorization")})
        return web.json_response({"ok": True}) if check(request) else web.json_response({"no": 1}, status=401)

    doc = spec(scheme)
    async with mock_upstream(doc, respond) as up:
        conn = OpenAPIConnector(OpenAPIConfig.model_validate(
            {"name": "a", "type": "openapi", "spec": "unused", "base_url": up.url, "auth": auth}))
        await _start_with(conn, doc)
        try:
            assert (await conn.call_tool("me", {}, ctx()))["structuredContent"] == {"ok": True}
            # An operation with `security: []` gets no credentials.
            assert (await conn.call_tool("open", {}, ctx()))["structuredContent"] == {"authorization": None}
        finally:
            await conn.stop()
    assert "sekret" not in repr(conn.config) and "p@ss" not in repr(conn.config)


async def test_without_credentials_the_api_refuses() -> None:
    doc = spec({"type": "http", "scheme": "bearer"})
    async with mock_upstream(doc) as up:
        conn = OpenAPIConnector(OpenAPIConfig.model_validate(
            {"name": "a", "type": "openapi", "spec": "unused", "base_url": up.url}))
        await _start_with(conn, doc)
        try:
            with pytest.raises(ToolExecutionError) as err:
                await conn.call_tool("me", {}, ctx())
            assert err.value.status == 400  # the upstream's openapi-core found no credentials
        finally:
            await conn.stop()


async def test_oauth2_client_credentials_fetch_cache_and_refresh() -> None:
    issued: list[str] = []
    expires = {"in": 3600}

    async def token(request: web.Request) -> web.Response:
        form = await request.post()
        expected = "Basic " + base64.b64encode(b"cid:csecret").decode()
        if request.headers.get("Authorization") != expected or form.get("grant_type") != "client_credentials":
            return web.json_response({"error": "invalid_client"}, status=401)
        assert form.get("scope") == "read"
        issued.append(f"tok{len(issued) + 1}")
        return web.json_response({"access_token": issued[-1], "token_type": "bearer", "expires_in": expires["in"]})

    doc = spec({"type": "oauth2", "flows": {"clientCredentials": {"tokenUrl": "/placeholder", "scopes": {"read": "r"}}}})
    doc["security"] = [{"s": ["read"]}]

    def respond(request: web.Request, body: bytes) -> web.Response:
        ok = request.headers.get("Authorization") == f"Bearer {issued[-1]}" if issued else False
        return web.json_response({"token": issued[-1]}) if ok else web.json_response({}, status=401)

    async with mock_upstream(doc, respond) as up:
        token_app = web.Application()
        token_app.router.add_post("/token", token)
        runner = web.AppRunner(token_app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        token_url = f"http://127.0.0.1:{runner.addresses[0][1]}/token"
        conn = OpenAPIConnector(OpenAPIConfig.model_validate({
            "name": "a", "type": "openapi", "spec": "unused", "base_url": up.url,
            "auth": {"oauth2": {"client_id": "cid", "client_secret": "csecret", "token_url": token_url,
                                "scopes": ["read"], "refresh_margin_s": 60}}}))
        await _start_with(conn, doc)
        try:
            assert (await conn.call_tool("me", {}, ctx()))["structuredContent"] == {"token": "tok1"}
            assert (await conn.call_tool("me", {}, ctx()))["structuredContent"] == {"token": "tok1"}
            assert len(issued) == 1  # cached
            expires["in"] = 30  # shorter than the refresh margin: refreshed before every use
            conn._state.auth._tokens.clear()  # type: ignore[union-attr]
            await conn.call_tool("me", {}, ctx())
            assert (await conn.call_tool("me", {}, ctx()))["structuredContent"] == {"token": "tok3"}
            assert len(issued) == 3
        finally:
            await conn.stop()
            await runner.cleanup()


async def _start_with(conn: OpenAPIConnector, doc: dict[str, Any]) -> None:
    """Start the connector on an in-memory spec (file-less)."""
    import json

    async def fetch(conditional: bool) -> bytes:
        return json.dumps(doc).encode()

    conn._fetch_spec = fetch  # type: ignore[method-assign]
    await conn.start(RecordingEvents())
