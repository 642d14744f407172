"""Swagger 2.0 descriptions are served (connectors/openapi/swagger2.py): two published ones load
whole through the connector and convert to valid OpenAPI 3.0, and calls built from a 2.0 document
reach a loopback API exactly as the document says (basePath, collection formats, body, form and
multipart parameters, apiKey and basic security, a shared parameter)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from openapi_spec_validator import validate

from connectors.openapi.config import OpenAPIConfig
from connectors.openapi.connector import OpenAPIConnector
from connectors.openapi.loader import check_version
from connectors.openapi.swagger2 import convert

from .upstream import RecordingEvents, ctx

DATA = Path(__file__).resolve().parents[2] / "data" / "openapi"


def published(name: str) -> dict[str, Any]:
    with gzip.open(DATA / f"{name}.json.gz") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


def operations(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, item in doc["paths"].items() for method in item
            if method in ("get", "put", "post", "delete", "patch", "head", "options")}


@pytest.mark.parametrize(("name", "count"), [("opsgenie", 170), ("vikunja", 169)])
async def test_a_published_swagger_2_document_loads_whole(name: str, count: int) -> None:
    doc = published(name)
    assert check_version(doc, name) == "2.0"
    converted = convert(doc)  # (not checked by openapi-spec-validator: both published originals have
    # defects of their own, an array default of a string and a missing info.version)
    assert operations(converted) == operations(doc) and len(operations(doc)) == count
    conn = OpenAPIConnector(OpenAPIConfig.model_validate({"name": name, "type": "openapi",
                                                          "spec": str(DATA / f"{name}.json.gz")}))
    await conn.start(RecordingEvents())
    try:
        assert len(conn.tools()) == count and not conn.problems()
    finally:
        await conn.stop()


SPEC = {
    "swagger": "2.0",
    "info": {"title": "items", "version": "1"},
    "basePath": "/api/v1",
    "schemes": ["http"],
    "consumes": ["application/json"],
    "produces": ["application/json"],
    "securityDefinitions": {"key": {"type": "apiKey", "name": "X-Api-Key", "in": "header"},
                            "basic": {"type": "basic"}},
    "security": [{"key": []}],
    "parameters": {"Limit": {"name": "limit", "in": "query", "type": "integer", "maximum": 100}},
    "definitions": {"Item": {"type": "object", "required": ["name"],
                             "properties": {"name": {"type": "string"},
                                            "note": {"type": "string", "x-nullable": True}}}},
    "paths": {
        "/items": {
            "get": {"operationId": "listItems", "parameters": [
                {"$ref": "#/parameters/Limit"},
                {"name": "tags", "in": "query", "type": "array", "items": {"type": "string"}},
                {"name": "ids", "in": "query", "type": "array", "items": {"type": "integer"},
                 "collectionFormat": "multi"},
                {"name": "sort", "in": "query", "type": "array", "items": {"type": "string"},
                 "collectionFormat": "pipes"}],
                "responses": {"200": {"description": "ok", "schema": {
                    "type": "object", "properties": {"items": {"type": "array",
                                                               "items": {"$ref": "#/definitions/Item"}}}}}}},
            "post": {"operationId": "createItem",
                     "parameters": [{"name": "item", "in": "body", "required": True,
                                     "schema": {"$ref": "#/definitions/Item"}}],
                     "responses": {"201": {"description": "created", "schema": {"$ref": "#/definitions/Item"}}}},
        },
        "/items/{id}/attachments": {"post": {
            "operationId": "attach", "consumes": ["multipart/form-data"], "security": [{"basic": []}],
            "parameters": [{"name": "id", "in": "path", "required": True, "type": "integer"},
                           {"name": "file", "in": "formData", "type": "file", "required": True},
                           {"name": "caption", "in": "formData", "type": "string"}],
            "responses": {"200": {"description": "ok"}}}},
        "/login": {"post": {
            "operationId": "login", "consumes": ["application/x-www-form-urlencoded"], "security": [],
            "parameters": [{"name": "user", "in": "formData", "type": "string", "required": True}],
            "responses": {"204": {"description": "none"}}}},
    },
}


async def test_calls_from_a_swagger_2_document_go_out_as_it_says(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append({"method": request.method, "path": request.path, "query": request.query,
                     "headers": request.headers, "body": await request.read()})
        if request.path.endswith("/items") and request.method == "GET":
            return web.json_response({"items": [{"name": "a", "note": None}]})
        if request.path.endswith("/items"):
            return web.json_response({"name": "n", "note": None}, status=201)
        return web.Response(status=204) if request.path.endswith("/login") else web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host = f"127.0.0.1:{runner.addresses[0][1]}"
    (tmp_path / "items.json").write_text(json.dumps({**SPEC, "host": host}))
    conn = OpenAPIConnector(OpenAPIConfig.model_validate({
        "name": "items", "type": "openapi", "spec": str(tmp_path / "items.json"),
        "auth": {"api_key": "k-1", "basic": {"username": "u", "password": "p"}},
        "egress": {"allow_private": ["127.0.0.0/8"]}}))  # the servers come from the spec
    try:
        await conn.start(RecordingEvents())
        validate(convert({**SPEC, "host": host}))  # openapi-spec-validator: valid OpenAPI 3.0
        tools = {t.definition["name"]: t.definition for t in conn.tools()}
        assert set(tools) == {"listItems", "createItem", "attach", "login"}
        note = tools["createItem"]["inputSchema"]["properties"]["note"]
        assert note["type"] == ["string", "null"]  # x-nullable
        listed = await conn.call_tool("listItems", {"limit": 5, "tags": ["a", "b"], "ids": [1, 2], "sort": ["x", "y"]},
                                      ctx())
        assert listed["structuredContent"] == {"items": [{"name": "a", "note": None}]}
        got = seen[-1]
        assert (got["method"], got["path"]) == ("GET", "/api/v1/items")
        assert got["query"]["limit"] == "5" and got["query"]["tags"] == "a,b" and got["query"]["sort"] == "x|y"
        assert got["query"].getall("ids") == ["1", "2"]
        assert got["headers"]["X-Api-Key"] == "k-1"

        await conn.call_tool("createItem", {"name": "n", "note": None}, ctx())
        got = seen[-1]
        assert (got["method"], got["path"]) == ("POST", "/api/v1/items")
        assert got["headers"]["Content-Type"].startswith("application/json")
        assert json.loads(got["body"]) == {"name": "n", "note": None}

        await conn.call_tool("attach", {"id": 3, "file": "hello", "caption": "c"}, ctx())
        got = seen[-1]
        assert got["path"] == "/api/v1/items/3/attachments"
        assert got["headers"]["Content-Type"].startswith("multipart/form-data; boundary=")
        assert got["headers"]["Authorization"] == "Basic dTpw" and "X-Api-Key" not in got["headers"]
        assert b'name="file"; filename="file"' in got["body"] and b"hello" in got["body"]

        await conn.call_tool("login", {"user": "ann"}, ctx())
        got = seen[-1]
        assert got["headers"]["Content-Type"].startswith("application/x-www-form-urlencoded")
        assert got["body"] == b"user=ann"
        assert "X-Api-Key" not in got["headers"] and "Authorization" not in got["headers"]  # security: []
    finally:
        await conn.stop()
        await runner.cleanup()
