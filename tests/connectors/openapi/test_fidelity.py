"""Call fidelity: arguments generated from each tool's inputSchema (hypothesis) become requests that
the original spec accepts. The upstream validates every request with openapi-core; the share of
valid requests is printed per spec and must be 100%."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable

from tests.e2e.rawhttp import initialize
from tests.support import running_gateway

from .strategies import from_schema
from .upstream import SPECS, load_doc, mock_upstream

# (examples per tool, take every n-th tool): GitHub has 1,200 tools, a spread sample keeps this fast.
PLAN = {"petstore": (6, 1), "openapi31": (4, 1), "composition": (6, 1), "recursion": (6, 1), "github": (1, 6)}


def generate(schema: dict[str, Any], n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    strategy = from_schema(schema)

    @settings(max_examples=n, database=None, deadline=None, derandomize=True, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value: dict[str, Any]) -> None:
        out.append(value)

    try:
        collect()
    except Unsatisfiable:
        return []  # the spec itself is contradictory (e.g. allOf of string and integer)
    return out


@pytest.mark.parametrize("spec", list(PLAN))
async def test_generated_arguments_make_valid_requests(spec: str) -> None:
    """Arguments go through the whole gateway: Streamable HTTP, the filter chain, the catalog and
    the connector, to the validating upstream."""
    per_tool, step = PLAN[spec]
    doc = load_doc(SPECS[spec])
    async with mock_upstream(doc) as up:
        config = json.dumps({
            "audit": {"enabled": False}, "telemetry": {"metrics": False},
            "connectors": [{"name": spec, "type": "openapi", "prefix": "", "spec": str(SPECS[spec]),
                            "base_url": up.url,
                            "auth": {"api_key": "key-1", "bearer": "token-1",
                                     "basic": {"username": "u", "password": "p"}}}]})
        async with running_gateway(config) as gw, aiohttp.ClientSession() as http:
            session = await initialize(http, gw.mcp_url)
            tools = [e.wire for e in gw.catalog.snapshot("tools").entries][::step]
            rejected_locally: list[str] = []
            unsatisfiable = []
            for tool in tools:
                examples = generate(tool["inputSchema"], per_tool)
                if not examples:
                    unsatisfiable.append(tool["name"])
                for args in examples:
                    reply = await session.request("tools/call", {"name": tool["name"], "arguments": args})
                    assert "result" in reply, reply
                    text = " ".join(c.get("text", "") for c in reply["result"]["content"])
                    if reply["result"].get("isError") and "No request was sent" in text:
                        rejected_locally.append(f"{tool['name']}({args}): {text}")
    bad = [s for s in up.seen if s["errors"]]
    share = 100.0 * up.valid / max(1, len(up.seen))
    print(f"\n[fidelity] {spec}: {len(tools)} tools, {len(up.seen)} requests, {share:.1f}% valid upstream, "
          f"{len(rejected_locally)} rejected before sending, unsatisfiable inputSchemas: {unsatisfiable or 'none'}")
    assert up.seen, "no request reached the upstream"
    assert not bad, "\n".join(f"{s['method']} {s['path']}?{s['query']}: {s['errors']}" for s in bad[:10])
    # Arguments valid for the inputSchema must also pass the connector's own openapi-core check.
    assert not rejected_locally, "\n".join(rejected_locally[:10])
