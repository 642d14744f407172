"""The connector against loopback upstreams: results, errors, retries, limits, loading from files
and URLs (YAML, external refs, ETag refresh), broken specs and resource templates."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from connectors.openapi.config import OpenAPIConfig
from connectors.openapi.connector import OpenAPIConnector
from connectors.openapi.loader import SpecError
from gateway.protocol.errors import ToolExecutionError

from .upstream import SPECS, RecordingEvents, ctx, load_doc, mock_upstream


def make(spec: str | Path, **kw: Any) -> OpenAPIConnector:
    return OpenAPIConnector(OpenAPIConfig.model_validate({"name": "pets", "type": "openapi", "spec": str(spec), **kw}))


async def test_results_structured_content_and_http_errors() -> None:
    calls = {"n": 0}

    def respond(request: web.Request, body: bytes) -> web.Response:
        calls["n"] += 1
        if request.path.endswith("/pet/404"):
            return web.json_response({"message": "Pet not found"}, status=404)
        if request.path.endswith("/inventory"):
            return web.json_response({"available": 3})
        if request.path.endswith("/findByStatus"):
            return web.json_response([{"id": 1, "name": "rex", "photoUrls": []}])
        return web.Response(text="plain", content_type="text/plain")

    async with mock_upstream(load_doc(SPECS["petstore"]), respond) as up:
        conn = make(SPECS["petstore"], base_url=up.url, auth={"api_key": "k-secret", "bearer": "b-secret"})
        await conn.start(RecordingEvents())
        try:
            result = await conn.call_tool("getInventory", {}, ctx())
            assert result["structuredContent"] == {"available": 3}
            assert json.loads(result["content"][0]["text"]) == {"available": 3}
            listed = await conn.call_tool("findPetsByStatus", {"status": "sold"}, ctx())
            assert listed["structuredContent"] == {"result": [{"id": 1, "name": "rex", "photoUrls": []}]}
            c = ctx()
            with pytest.raises(ToolExecutionError) as err:
                await conn.call_tool("getPetById", {"petId": 404}, c)
            assert err.value.status == 404 and c.record.backend_status == 404
            assert "HTTP 404" in err.value.message and "Pet not found" in err.value.message
            # No structuredContent: it would have to match getPetById's outputSchema (a Pet).
            assert "structuredContent" not in err.value.to_result()
            assert "k-secret" not in err.value.message
            # Invalid arguments: the model learns which one; nothing is sent.
            before = calls["n"]
            with pytest.raises(ToolExecutionError, match="petId"):
                await conn.call_tool("getPetById", {"petId": "abc"}, ctx())
            with pytest.raises(ToolExecutionError, match="argument 'nope': is not a parameter"):
                await conn.call_tool("getPetById", {"petId": 1, "nope": 1}, ctx())
            assert calls["n"] == before
            assert "k-secret" not in json.dumps([t.definition for t in conn.tools()])
        finally:
            await conn.stop()


async def test_retries_only_idempotent_and_limits() -> None:
    hits: dict[str, int] = {}

    def respond(request: web.Request, body: bytes) -> web.Response:
        hits[request.method] = hits.get(request.method, 0) + 1
        if request.path.endswith("/inventory"):
            return web.Response(body=b"x" * 5000, content_type="application/octet-stream")
        return web.json_response({"error": "busy"}, status=503)

    async with mock_upstream(load_doc(SPECS["petstore"]), respond) as up:
        conn = make(SPECS["petstore"], base_url=up.url, retries=2, max_response_bytes=4096,
                    auth={"api_key": "k", "bearer": "t"})
        await conn.start(RecordingEvents())
        try:
            with pytest.raises(ToolExecutionError) as err:
                await conn.call_tool("getPetById", {"petId": 1}, ctx())
            assert err.value.status == 503 and hits["GET"] == 3
            with pytest.raises(ToolExecutionError):
                await conn.call_tool("addPet", {"name": "a", "photoUrls": []}, ctx())
            assert hits["POST"] == 1
            with pytest.raises(ToolExecutionError, match="exceeded 4096 bytes"):
                await conn.call_tool("getInventory", {}, ctx())
        finally:
            await conn.stop()


async def test_timeout_becomes_tool_error() -> None:
    release = asyncio.Event()

    async def respond(request: web.Request, body: bytes) -> web.Response:
        await asyncio.wait_for(release.wait(), 5)
        return web.json_response({})

    async with mock_upstream(load_doc(SPECS["petstore"]), respond) as up:
        conn = make(SPECS["petstore"], base_url=up.url, request_timeout_s=0.2, retries=0, auth={"api_key": "k", "bearer": "b"})
        await conn.start(RecordingEvents())
        try:
            with pytest.raises(ToolExecutionError, match="timed out"):
                await conn.call_tool("getInventory", {}, ctx())
        finally:
            release.set()
            await conn.stop()


async def test_yaml_external_refs_and_broken_refs(tmp_path: Path) -> None:
    (tmp_path / "schemas.yaml").write_text(
        "Node:\n  type: object\n  properties:\n    name: {type: string}\n"
        "    children: {type: array, items: {$ref: '#/Node'}}\n"
        "    meta: {$ref: 'more/meta.yaml#/Meta'}\n")
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "meta.yaml").write_text("Meta: {type: object, properties: {tag: {type: string}}}\n")
    (tmp_path / "api.yaml").write_text(
        "openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths:\n  /nodes:\n    post:\n      operationId: addNode\n"
        "      requestBody:\n        content:\n          application/json:\n            schema: {$ref: 'schemas.yaml#/Node'}\n"
        "      responses: {'200': {description: ok}}\n")
    conn = make(tmp_path / "api.yaml")
    await conn.start(RecordingEvents())
    schema = conn.tools()[0].definition["inputSchema"]
    await conn.stop()
    assert set(schema["properties"]) == {"name", "children", "meta"}
    assert len(schema["$defs"]) == 2  # Node (recursive) and Meta, each once
    (tmp_path / "bad.json").write_text(json.dumps({
        "openapi": "3.0.3", "info": {"title": "t", "version": "1"},
        "paths": {"/x": {"get": {"parameters": [{"$ref": "#/components/parameters/missing"}]}}}}))
    with pytest.raises(SpecError) as err:
        await make(tmp_path / "bad.json").start(RecordingEvents())
    assert "#/components/parameters/missing" in str(err.value) and "/paths/~1x/get" in str(err.value)
    (tmp_path / "old.json").write_text(json.dumps({"swagger": "1.2", "paths": {}}))
    with pytest.raises(SpecError, match="Swagger '1.2' is not supported"):
        await make(tmp_path / "old.json").start(RecordingEvents())


async def test_spec_from_url_refresh_with_etag_emits_list_changed() -> None:
    doc = load_doc(SPECS["petstore"])
    state = {"version": 1, "conditional": 0, "served": asyncio.Event()}

    async def spec(request: web.Request) -> web.Response:
        etag = f'"v{state["version"]}"'
        if request.headers.get("If-None-Match") == etag:
            state["conditional"] += 1
            state["served"].set()
            return web.Response(status=304)
        body = dict(doc)
        if state["version"] > 1:
            body["paths"] = {k: v for k, v in doc["paths"].items() if k != "/user/logout"}
        state["served"].set()
        return web.json_response(body, headers={"ETag": etag})

    app = web.Application()
    app.router.add_get("/openapi.json", spec)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/openapi.json"
    events = RecordingEvents()
    conn = make(url, refresh_s=0.05)
    try:
        await conn.start(events)
        assert "logoutUser" in {t.name for t in conn.tools()}
        state["served"].clear()
        await asyncio.wait_for(state["served"].wait(), 5)  # a conditional re-fetch: 304, nothing changes
        assert state["conditional"] >= 1 and events.changes == 0
        state["version"] = 2
        await asyncio.wait_for(events.changed.wait(), 5)
        assert "logoutUser" not in {t.name for t in conn.tools()}
    finally:
        await conn.stop()
        await runner.cleanup()


async def test_get_operations_as_resource_templates() -> None:
    def respond(request: web.Request, body: bytes) -> web.Response:
        return web.json_response({"id": int(request.path.rsplit("/", 1)[1]), "name": "rex", "photoUrls": []})

    async with mock_upstream(load_doc(SPECS["petstore"]), respond) as up:
        conn = make(SPECS["petstore"], base_url=up.url, auth={"api_key": "k", "bearer": "b"},
                    routes=[{"methods": ["GET"], "path": "/pet/{petId}", "route": "resource"}])
        await conn.start(RecordingEvents())
        try:
            templates = conn.resource_templates()
            assert [t.uri_template for t in templates] == ["openapi://pets/pet/{petId}"]
            assert "getPetById" not in {t.name for t in conn.tools()}
            assert conn.owns_uri("openapi://pets/pet/7") and not conn.owns_uri("openapi://pets/user/7")
            result = await conn.read_resource("openapi://pets/pet/7", ctx())
            assert json.loads(result["contents"][0]["text"])["id"] == 7
            assert up.seen[-1]["path"] == "/base/pet/7"
        finally:
            await conn.stop()


async def test_a_request_without_a_body_carries_no_content_type(tmp_path: Path) -> None:
    """Issue 27: a POST without a body went out as application/octet-stream (aiohttp's default);
    a body goes with the spec's media type."""
    doc = {"openapi": "3.0.3", "info": {"title": "jobs", "version": "1"}, "paths": {
        "/jobs/{id}/run": {"post": {"operationId": "runJob", "parameters": [
            {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}],
            "responses": {"204": {"description": "started"}}}},
        "/notes": {"put": {"operationId": "putNote", "requestBody": {"required": False, "content": {
            "application/json": {"schema": {"type": "object", "properties": {"text": {"type": "string"}}}}}},
            "responses": {"204": {"description": "stored"}}}}}}
    spec = tmp_path / "jobs.json"
    spec.write_text(json.dumps(doc))
    seen: list[tuple[str, str | None, bytes]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append((request.method, request.headers.get("Content-Type"), await request.read()))
        return web.Response(status=204)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    conn = make(spec, base_url=f"http://127.0.0.1:{runner.addresses[0][1]}")
    await conn.start(RecordingEvents())
    try:
        await conn.call_tool("runJob", {"id": 7}, ctx())
        await conn.call_tool("putNote", {}, ctx())
        await conn.call_tool("putNote", {"text": "hi"}, ctx())
    finally:
        await conn.stop()
        await runner.cleanup()
    assert seen == [("POST", None, b""), ("PUT", None, b""), ("PUT", "application/json", b'{"text":"hi"}')]
