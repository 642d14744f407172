"""The gateway's MCP connector as the client under test of the conformance suite's client scenarios.

``conformance client --command "python tests/conformance/connector_client.py"`` starts a test
server per scenario and runs this command with the server's URL appended (and
``MCP_CONFORMANCE_SCENARIO``, ``MCP_CONFORMANCE_CONTEXT`` in the environment). This command:

1. writes a gateway config with one ``mcp`` connector (``streamable_http``, ``protocol: auto``, empty
   prefix) whose ``url`` is the scenario server;
2. starts that gateway in-process on a loopback port;
3. drives the scenario through it with an official SDK 2.x client speaking 2026-07-28 to the
   gateway: lists tools, resources and prompts, calls every listed tool (with the scenario's
   ``toolCalls`` of ``MCP_CONFORMANCE_CONTEXT`` where it gives arguments, else arguments made up
   from the tool's ``inputSchema``; ``json_schema_echo`` gets the other tool's schema), reads a resource and gets a prompt when there are any; the
   SDK client answers elicitation (accept, with the schema's defaults), sampling and roots, so an
   upstream's ``input_required`` rounds complete through the gateway;
4. exits 0 when the gateway came up and the drive ran, 1 otherwise (printing why).

What the suite checks is what the connector sent upstream (``_meta``, headers, ``requestState``
echo, ...), so a tool call that the upstream answers with an error is no failure of this command.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from mcp import Client, types  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from tests.support import running_gateway  # noqa: E402

__all__ = ["gateway_config", "arguments_for", "drive", "run_scenario", "cli", "main"]

MODERN = "2026-07-28"
ROOT = "file:///conformance/root"
# The tool of json-schema-2020-12-preservation that wants the other tool's inputSchema, as the
# gateway listed it, echoed back verbatim (what the gateway preserved of the upstream's schema).
SCHEMA_ECHO = "json_schema_echo"


def gateway_config(url: str) -> str:
    """A gateway config chaining ``url`` unprefixed. The harness names its servers ``localhost``;
    the connector's egress policy trusts IP literals the config writes, so the loopback literal
    stands in for the name (the server listens on every loopback address)."""
    url = url.replace("://localhost:", "://127.0.0.1:", 1)
    entry = {"name": "scenario", "type": "mcp", "prefix": "", "transport": "streamable_http", "url": url,
             "protocol": "auto", "startup_wait_s": 10, "ping_interval_s": 0}
    return json.dumps({"audit": {"enabled": False}, "telemetry": {"metrics": False}, "connectors": [entry]})


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments satisfying the required properties of an ``inputSchema`` (a plain value per type)."""
    props = schema.get("properties") or {}
    made: dict[str, Any] = {}
    for name in schema.get("required") or ():
        kind = (props.get(name) or {}).get("type", "string")
        kind = kind[0] if isinstance(kind, list) and kind else kind
        made[name] = {"string": "x", "integer": 1, "number": 1, "boolean": True, "object": {},
                      "array": [], "null": None}.get(kind, "x")
    return made


async def _elicit(_context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Accept, with each field's ``default`` (SEP-1034: a client applies the defaults of omitted
    fields), ``true`` for a boolean without one."""
    schema = getattr(params, "requested_schema", None) or {}
    content: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        if "default" in prop:
            content[name] = prop["default"]
        elif prop.get("type") == "boolean":
            content[name] = True
    return types.ElicitResult(action="accept", content=content)


async def _sample(_context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="sampled"),
                                     model="conformance")


async def _roots(_context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri=ROOT, name="root")])


async def _all(method: Any) -> list[Any]:
    items: list[Any] = []
    cursor = None
    for _ in range(50):  # bounded: a scenario server lists a handful of items
        page = await method(cursor=cursor) if cursor else await method()
        items += getattr(page, "tools", None) or getattr(page, "resources", None) or getattr(page, "prompts", None) or []
        cursor = page.next_cursor
        if not cursor:
            break
    return items


async def drive(gateway_url: str, context: dict[str, Any]) -> list[str]:
    """Everything a scenario may observe, through the gateway at ``gateway_url``; returns notes."""
    notes: list[str] = []
    planned = {c["name"]: c.get("arguments") or {} for c in context.get("toolCalls") or ()}
    async with Client(streamable_http_client(gateway_url), mode=MODERN, elicitation_callback=_elicit,
                      sampling_callback=_sample, list_roots_callback=_roots) as client:
        session = client.session
        tools = await _all(session.list_tools)
        notes.append(f"tools: {[t.name for t in tools]}")
        for tool in tools:
            args = planned.get(tool.name, arguments_for(tool.input_schema or {}))
            if tool.name == SCHEMA_ECHO:  # json-schema-2020-12-preservation: send back what we were given
                focal = next((t for t in tools if t.name != SCHEMA_ECHO), None)
                args = {"schema": focal.input_schema if focal else {}}
            try:
                result = await client.call_tool(tool.name, args)  # the Client drives input rounds
                notes.append(f"call {tool.name}: isError={result.is_error}")
            except Exception as exc:  # an upstream error answer is the scenario's business, not ours
                notes.append(f"call {tool.name}: {type(exc).__name__}: {exc}")
        for name in planned:  # a planned call of a tool the listing did not show
            if name not in {t.name for t in tools}:
                notes.append(f"planned tool {name} not listed")
        caps = session.server_capabilities
        if caps is None or caps.resources is not None:
            try:
                resources = await _all(session.list_resources)
                if resources:
                    await session.read_resource(resources[0].uri)
                notes.append(f"resources: {len(resources)}")
            except Exception as exc:
                notes.append(f"resources: {type(exc).__name__}: {exc}")
        if caps is None or caps.prompts is not None:
            try:
                prompts = await _all(session.list_prompts)
                if prompts:
                    first = prompts[0]
                    await session.get_prompt(first.name, {a.name: "x" for a in first.arguments or () if a.required})
                notes.append(f"prompts: {len(prompts)}")
            except Exception as exc:
                notes.append(f"prompts: {type(exc).__name__}: {exc}")
    return notes


async def run_scenario(config: str, context: dict[str, Any]) -> int:
    """Start a gateway on ``config`` (its connector named ``scenario``) and drive it; 0 when done."""
    began = time.monotonic()
    async with running_gateway(config) as gw:
        health = gw.connectors["scenario"].health()
        print(f"scenario {os.environ.get('MCP_CONFORMANCE_SCENARIO')}: gateway up in {time.monotonic() - began:.1f}s, "
              f"connector up={health.up} ({health.detail})")
        for note in await drive(gw.mcp_url, context):
            print(note)
        print(f"drive done at {time.monotonic() - began:.1f}s")
    print(f"gateway stopped at {time.monotonic() - began:.1f}s")
    return 0


async def _main(url: str) -> int:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    return await run_scenario(gateway_config(url), context)


def cli(argv: list[str], run: Callable[[str], Coroutine[Any, Any, int]]) -> int:
    """A driver's command line: ``driver.py URL`` runs ``run(URL)``; 1 (with the traceback) when it raised."""
    if len(argv) != 2:
        print(f"usage: {Path(argv[0]).name} URL", file=sys.stderr)
        return 2
    try:
        return asyncio.run(run(argv[1]))
    except Exception:
        traceback.print_exc()
        return 1


def main(argv: list[str]) -> int:
    return cli(argv, _main)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
