"""Rare-event counters are exported at 0 before their first event (issue 27, finding 9b).

A real gateway (OpenAPI connector on a loopback backend, a static connector, access rules, rate
limits) is scraped before any call: the reconnect, refusal and limit counters of its known
connectors and tools are there at 0, so ``increase()`` answers 0 and a panel shows 0, not "No
data". Connector names are fresh per test because the registry is the process's (a child made by
another test would prove nothing). A refused call then increments the very series primed; a
reload primes the connectors it adds.
"""

from __future__ import annotations

import secrets

import aiohttp

from gateway.telemetry import known
from tests.filters.mcp_http import McpHttp
from tests.support import config_from, running_gateway
from tests.telemetry.backend import backend, openapi_connector_yaml
from tests.telemetry.metrics_client import Samples, scrape


def config(url: str, api: str, docs: str, extra_connectors: str = "") -> str:
    return (
        "gateway:\n  http: {json_response: true}\n"
        "audit: {enabled: false}\n"
        "auth:\n  api_keys: [{name: ops, key: k-ops}]\n"
        f"access:\n  - {{principals: ['*'], allow: ['*'], deny: [{api}_slow]}}\n"
        "rate_limits:\n  rules:\n"
        f"    - {{scope: tool, match: {api}_fail, rate: 1/h, burst: 1}}\n"
        "    - {scope: principal, rate: 1000/s}\n"
        "connectors:\n" + openapi_connector_yaml(url, api)
        + f"  - name: {docs}\n    type: static\n    max_concurrency: 4\n"
        "    resources: [{uri: 'docs://about', name: about, text: hi}]\n" + extra_connectors)


def present(samples: Samples, name: str, **labels: str) -> float | None:
    """The value of exactly this series, or None when it is not exported."""
    return samples.value(name, **labels) if labels in samples.series(name) else None


async def test_known_counters_are_zero_before_their_first_event(tmp_path):
    api, docs = f"api{secrets.token_hex(3)}", f"docs{secrets.token_hex(3)}"
    headers = {"Authorization": "Bearer k-ops"}
    async with backend() as be, aiohttp.ClientSession(headers=headers) as http, \
            running_gateway(config(be.url, api, docs)) as gw:
        first = await scrape(http, gw.url + "/metrics")
        for connector in (api, docs):
            assert present(first, "mcp_gateway_connector_reconnects_total", connector=connector) == 0.0
            assert present(first, "mcp_gateway_rate_limited_total", connector=connector, scope="principal",
                           tool="", principal="") == 0.0
        # max_concurrency refuses with scope connector; the tool rule only tools/call.
        assert present(first, "mcp_gateway_rate_limited_total", connector=docs, scope="connector", tool="",
                       principal="") == 0.0
        assert present(first, "mcp_gateway_rate_limited_total", connector=api, scope="tool", tool="",
                       principal="") is None
        for tool in (f"{api}_getItem", f"{api}_fail", f"{api}_slow"):
            assert present(first, "mcp_gateway_denied_total", method="tools/call", connector=api, tool=tool,
                           principal="") == 0.0
            assert present(first, "mcp_gateway_rate_limited_total", connector=api, scope="tool", tool=tool,
                           principal="") == 0.0
        for method in ("sampling/createMessage", "elicitation/create", "roots/list"):
            for cap in ("per_call", "per_session"):
                assert present(first, "mcp_gateway_server_requests_refused_total", method=method, cap=cap) is not None
        for limit in known.HTTP_LIMITS:
            assert present(first, "mcp_gateway_http_refused_total", limit=limit) is not None
        for reason in known.AUTH_REASONS:
            assert present(first, "mcp_gateway_auth_failures_total", reason=reason) is not None
        for result in ("ok", "failed"):
            assert present(first, "mcp_gateway_config_reloads_total", result=result) is not None

        # The first refusals land on the primed series: no second series with other label values.
        client = await McpHttp(http, gw.mcp_url).initialize()
        assert (await client.call("tools/call", {"name": f"{api}_slow", "arguments": {}}))["error"]["code"] == -32003
        assert "result" in await client.call("tools/call", {"name": f"{api}_fail", "arguments": {}})
        refused = await client.call("tools/call", {"name": f"{api}_fail", "arguments": {}})
        assert refused["error"]["code"] == -32029, refused
        after = await scrape(http, gw.url + "/metrics")
        assert present(after, "mcp_gateway_denied_total", method="tools/call", connector=api, tool=f"{api}_slow",
                       principal="") == 1.0
        assert present(after, "mcp_gateway_rate_limited_total", connector=api, scope="tool", tool=f"{api}_fail",
                       principal="") == 1.0
        assert len([s for s in after.series("mcp_gateway_denied_total") if s["connector"] == api]) == 3

        # A reload primes the connector it adds.
        added = f"more{secrets.token_hex(3)}"
        extra = f"  - name: {added}\n    type: static\n    resources: [{{uri: 'more://a', name: a, text: hi}}]\n"
        await gw.gateway.reload(config_from(config(be.url, api, docs, extra)))
        reloaded = await scrape(http, gw.url + "/metrics")
        assert present(reloaded, "mcp_gateway_connector_reconnects_total", connector=added) == 0.0
        assert present(reloaded, "mcp_gateway_rate_limited_total", connector=added, scope="principal", tool="",
                       principal="") == 0.0


async def test_a_large_catalog_gets_no_zero_series_per_tool(tmp_path, monkeypatch):
    """Past MAX_TOOL_SERIES tools the per-tool children are not primed (connector-level ones are)."""
    monkeypatch.setattr(known, "MAX_TOOL_SERIES", 2)
    api, docs = f"api{secrets.token_hex(3)}", f"docs{secrets.token_hex(3)}"
    async with backend() as be, aiohttp.ClientSession(headers={"Authorization": "Bearer k-ops"}) as http, \
            running_gateway(config(be.url, api, docs)) as gw:
        samples = await scrape(http, gw.url + "/metrics")
    assert not [s for s in samples.series("mcp_gateway_denied_total") if s["connector"] == api]
    assert present(samples, "mcp_gateway_rate_limited_total", connector=api, scope="principal", tool="",
                   principal="") == 0.0
