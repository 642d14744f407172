"""The real exporter: with ``telemetry.otlp_endpoint`` set, spans reach an OTLP/HTTP collector
(a loopback server decoding the protobuf requests) by the time the gateway has stopped."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from gateway.config import TelemetryConfig
from gateway.telemetry import tracing
from tests.filters.mcp_http import McpHttp
from tests.support import running_gateway
from tests.telemetry.backend import backend, openapi_connector_yaml


async def test_spans_are_exported_over_otlp_http():
    received: list[ExportTraceServiceRequest] = []
    arrived = asyncio.Event()

    async def traces(request: web.Request) -> web.Response:
        assert request.content_type == "application/x-protobuf"
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.read())
        received.append(message)
        arrived.set()
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    collector = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with backend() as be, aiohttp.ClientSession() as http:
            cfg = ("gateway:\n  http: {json_response: true}\naudit: {enabled: false}\n"
                   f"telemetry: {{otlp_endpoint: '{collector}', service_name: gw-under-test}}\n"
                   "connectors:\n" + openapi_connector_yaml(be.url))
            async with running_gateway(cfg) as gw:
                assert tracing.enabled()
                client = await McpHttp(http, gw.mcp_url).initialize()
                reply = await client.call("tools/call", {"name": "api_getItem", "arguments": {"id": "5"}})
                assert "result" in reply
        # Stopping the gateway flushed the batch.
        await asyncio.wait_for(arrived.wait(), 10)
    finally:
        tracing.configure(TelemetryConfig())
        await runner.cleanup()
    assert not tracing.enabled()
    spans = {}
    services = set()
    for message in received:
        for resource_spans in message.resource_spans:
            for attr in resource_spans.resource.attributes:
                if attr.key == "service.name":
                    services.add(attr.value.string_value)
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    spans[span.name] = span
    assert services == {"gw-under-test"}
    assert {"initialize", "tools/call api_getItem", "GET /items/{id}"} <= set(spans)
    assert spans["GET /items/{id}"].parent_span_id == spans["tools/call api_getItem"].span_id
    assert spans["GET /items/{id}"].trace_id == spans["tools/call api_getItem"].trace_id
