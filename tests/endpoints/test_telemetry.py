"""Metrics and traces of a request to an endpoint carry the endpoint (a bounded label: endpoint
names come from the config); ``/mcp`` requests carry none."""

from __future__ import annotations

import aiohttp
from opentelemetry.trace import SpanKind

from gateway.telemetry import tracing
from tests.filters.mcp_http import McpHttp
from tests.support import running_gateway
from tests.telemetry.metrics_client import scrape

CONFIG = """
gateway: {http: {json_response: true}}
audit: {enabled: false}
connectors:
  - name: kit
    type: static
    prompts: [{name: hello, messages: [{role: user, text: hi}]}]
endpoints:
  - {name: greeters, select: [{prompts: ["kit_*"]}], rename: {kit_hello: greet}}
"""


async def test_endpoint_requests_are_counted_and_traced_with_their_endpoint() -> None:
    with tracing.capture_spans() as exporter:
        async with running_gateway(CONFIG) as gw, aiohttp.ClientSession() as http:
            before = await scrape(http, gw.url + "/metrics")
            endpoint = await McpHttp(http, gw.url + "/mcp/greeters").initialize()
            exporter.clear()
            reply = await endpoint.call("prompts/get", {"name": "greet"})
            assert reply["result"]["messages"][0]["content"]["text"] == "hi", reply
            everything = await McpHttp(http, gw.mcp_url).initialize()
            await everything.call("prompts/get", {"name": "kit_hello"})
            after = await scrape(http, gw.url + "/metrics")
        spans = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.SERVER
                 and s.attributes.get("mcp.method.name") == "prompts/get"]
    assert after.delta(before, "mcp_gateway_endpoint_requests_total", endpoint="greeters", method="prompts/get",
                       outcome="ok") == 1
    # The catalog's name labels the request metrics, whichever endpoint it came through.
    assert after.delta(before, "mcp_gateway_requests_total", method="prompts/get", connector="kit",
                       target="kit_hello", outcome="ok", principal="") == 2
    assert [s.attributes.get("mcp.gateway.endpoint") for s in spans] == ["greeters", None]
    assert spans[0].attributes["gen_ai.prompt.name"] == "kit_hello"
