"""Tracing with an in-memory span exporter: the span tree of a tool call through an OpenAPI backend,
W3C trace context in (HTTP header or ``params._meta.traceparent``) and out (to the backend), trace
ids in audit events and in the JSON logs."""

from __future__ import annotations

import io
import json
import logging

import aiohttp
from opentelemetry.trace import SpanKind, StatusCode

from gateway.telemetry import tracing
from gateway.telemetry.logging import JsonFormatter, TraceContextFilter
from tests.filters.mcp_http import McpHttp
from tests.support import running_gateway
from tests.telemetry.backend import backend, openapi_connector_yaml

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


def cfg(url: str, tmp_path, audit: bool = False) -> str:
    audit_yaml = (f"audit: {{store: 'sqlite:///{tmp_path}/a.db', jsonl: '{tmp_path}/audit.jsonl', "
                  f"spill_path: '{tmp_path}/spill.jsonl'}}\n") if audit else "audit: {enabled: false}\n"
    return "gateway:\n  http: {json_response: true}\n" + audit_yaml + "connectors:\n" + openapi_connector_yaml(url)


def call(name: str, meta: dict | None = None, **arguments: str) -> dict:
    params: dict = {"name": name, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}


async def test_span_tree_of_a_tool_call_through_openapi(tmp_path):
    with tracing.capture_spans() as exporter:
        async with backend() as be, running_gateway(cfg(be.url, tmp_path)) as gw, aiohttp.ClientSession() as http:
            client = await McpHttp(http, gw.mcp_url).initialize()
            exporter.clear()
            resp = await client.http.post(gw.mcp_url, json=call("api_getItem", id="42"),
                                          headers={**client.headers, "traceparent": TRACEPARENT})
            body = await resp.json()
            assert body["result"]["structuredContent"] == {"id": "42", "name": "widget"}
            session_id = client.headers["Mcp-Session-Id"]
        spans = exporter.get_finished_spans()

    (server,) = [s for s in spans if s.kind == SpanKind.SERVER]
    (child,) = [s for s in spans if s.kind == SpanKind.CLIENT]
    assert len(spans) == 2
    # The server span continues the client's trace; the backend call is its child.
    assert format(server.context.trace_id, "032x") == TRACE_ID
    assert server.parent is not None and format(server.parent.span_id, "016x") == PARENT_ID
    assert server.parent.is_remote
    assert child.parent is not None and child.parent.span_id == server.context.span_id
    assert child.context.trace_id == server.context.trace_id

    assert server.name == "tools/call api_getItem"
    attrs = dict(server.attributes or {})
    assert attrs["mcp.method.name"] == "tools/call"
    assert attrs["gen_ai.tool.name"] == "api_getItem"
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["mcp.session.id"] == session_id
    assert attrs["enduser.id"] == "anonymous"
    assert attrs["mcp.gateway.outcome"] == "ok"
    assert attrs["mcp.gateway.connector"] == "api"
    assert attrs["jsonrpc.request.id"] == "7"
    assert server.status.status_code != StatusCode.ERROR

    assert child.name == "GET /items/{id}"
    child_attrs = dict(child.attributes or {})
    assert child_attrs["http.request.method"] == "GET"
    assert child_attrs["http.response.status_code"] == 200
    assert child_attrs["mcp.gateway.connector"] == "api"

    # The backend received the trace context, with the child span as parent.
    (path, headers), = [r for r in be.requests if r[0] == "/items/42"]
    version, trace_id, parent_id, flags = headers["traceparent"].split("-")
    assert (version, trace_id, parent_id) == ("00", TRACE_ID, format(child.context.span_id, "016x"))
    assert int(flags, 16) & 1  # sampled


async def test_traceparent_from_params_meta_and_new_traces(tmp_path):
    with tracing.capture_spans() as exporter:
        async with backend() as be, running_gateway(cfg(be.url, tmp_path)) as gw, aiohttp.ClientSession() as http:
            client = await McpHttp(http, gw.mcp_url).initialize()
            exporter.clear()
            await (await client.http.post(gw.mcp_url, json=call("api_getItem", {"traceparent": TRACEPARENT}, id="1"),
                                          headers=client.headers)).read()
            await (await client.http.post(gw.mcp_url, json=call("api_getItem", id="2"), headers=client.headers)).read()
            await (await client.http.post(gw.mcp_url, json=call("api_fail"), headers=client.headers)).read()
        spans = exporter.get_finished_spans()
    servers = [s for s in spans if s.kind == SpanKind.SERVER]
    assert len(servers) == 3
    from_meta, fresh, failed = servers
    assert format(from_meta.context.trace_id, "032x") == TRACE_ID
    # No incoming context: a new trace, rooted at the gateway, still propagated to the backend.
    assert fresh.parent is None
    fresh_trace = format(fresh.context.trace_id, "032x")
    assert fresh_trace != TRACE_ID
    headers = dict(next(h for p, h in be.requests if p == "/items/2"))
    assert headers["traceparent"].split("-")[1] == fresh_trace
    # A backend failure: the tool result is an error, and both spans say so.
    assert failed.attributes["mcp.gateway.outcome"] == "tool_error"
    assert failed.attributes["error.type"] == "tool_error"
    assert failed.status.status_code == StatusCode.ERROR
    (failed_child,) = [s for s in spans if s.kind == SpanKind.CLIENT and s.parent.span_id == failed.context.span_id]
    assert failed_child.status.status_code == StatusCode.ERROR
    assert failed_child.attributes["http.response.status_code"] == 500


async def test_sampling_honours_the_callers_decision(tmp_path):
    with tracing.capture_spans(sample_ratio=0.0) as exporter:
        async with backend() as be, running_gateway(cfg(be.url, tmp_path)) as gw, aiohttp.ClientSession() as http:
            client = await McpHttp(http, gw.mcp_url).initialize()
            exporter.clear()
            # Not sampled here (ratio 0), but the context still reaches the backend, unsampled.
            await (await client.http.post(gw.mcp_url, json=call("api_getItem", id="1"), headers=client.headers)).read()
            assert exporter.get_finished_spans() == ()
            # The caller sampled its trace: the gateway follows (parent-based sampling).
            await (await client.http.post(gw.mcp_url, json=call("api_getItem", id="2"),
                                          headers={**client.headers, "traceparent": TRACEPARENT})).read()
            spans = exporter.get_finished_spans()
    assert {format(s.context.trace_id, "032x") for s in spans} == {TRACE_ID} and len(spans) == 2
    headers = {p: h for p, h in be.requests}
    assert int(headers["/items/1"]["traceparent"].split("-")[3], 16) & 1 == 0


async def test_with_tracing_off_the_client_traceparent_is_passed_on(tmp_path):
    assert not tracing.enabled()
    async with backend() as be, running_gateway(cfg(be.url, tmp_path)) as gw, aiohttp.ClientSession() as http:
        client = await McpHttp(http, gw.mcp_url).initialize()
        await (await client.http.post(gw.mcp_url, json=call("api_getItem", id="9"),
                                      headers={**client.headers, "traceparent": TRACEPARENT})).read()
        await (await client.http.post(gw.mcp_url, json=call("api_getItem", id="10"), headers=client.headers)).read()
    headers = {p: h for p, h in be.requests}
    assert headers["/items/9"]["traceparent"] == TRACEPARENT
    assert "traceparent" not in headers["/items/10"]


async def test_audit_events_carry_the_trace_id(tmp_path):
    with tracing.capture_spans() as exporter:
        async with backend() as be, running_gateway(cfg(be.url, tmp_path, audit=True)) as gw, \
                aiohttp.ClientSession() as http:
            client = await McpHttp(http, gw.mcp_url).initialize()
            await (await client.http.post(gw.mcp_url, json=call("api_getItem", id="1"),
                                          headers={**client.headers, "traceparent": TRACEPARENT})).read()
            await (await client.http.post(gw.mcp_url, json=call("api_getItem", id="2"), headers=client.headers)).read()
        servers = [s for s in exporter.get_finished_spans() if s.name.startswith("tools/call")]
    events = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    calls = [e for e in events if e.get("method") == "tools/call"]
    assert [e["trace_id"] for e in calls] == [format(s.context.trace_id, "032x") for s in servers]
    assert calls[0]["trace_id"] == TRACE_ID


def test_json_logs_carry_the_trace_id():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(TraceContextFilter())
    logger = logging.getLogger("tests.telemetry.logs")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        with tracing.capture_spans():
            with tracing.span("work") as sp:
                logger.info("inside %s", "a span", extra={"connector": "api"})
            logger.warning("outside")
    finally:
        logger.removeHandler(handler)
    inside, outside = (json.loads(line) for line in stream.getvalue().splitlines())
    assert inside["message"] == "inside a span" and inside["level"] == "info"
    assert inside["trace_id"] == format(sp.get_span_context().trace_id, "032x")
    assert inside["span_id"] == format(sp.get_span_context().span_id, "016x")
    assert inside["connector"] == "api"
    assert inside["ts"].endswith("Z")
    assert "trace_id" not in outside


def test_configure_is_off_without_an_endpoint_and_on_with_one():
    from gateway.config import TelemetryConfig

    tracing.configure(TelemetryConfig())
    assert not tracing.enabled() and tracing.tracer() is None
    with tracing.span("nothing") as sp:
        assert sp is None
    assert tracing.meta_traceparent() is None
    try:
        tracing.configure(TelemetryConfig(otlp_endpoint="http://127.0.0.1:9/"))
        assert tracing.enabled()
        with tracing.backend_call("api", "openapi", "GET /x") as call:
            headers = tracing.inject({})
            assert call.span is not None
            sc = call.span.get_span_context()
            assert headers["traceparent"].startswith(f"00-{sc.trace_id:032x}-{sc.span_id:016x}-")
            assert tracing.meta_traceparent() == headers["traceparent"]
            assert tracing.current_trace_id() == f"{sc.trace_id:032x}"
    finally:
        # Drop the exporter without exporting (nothing listens on port 9).
        provider = tracing._state.provider
        tracing._install(None)
        tracing._state.key = None
        if provider is not None:
            provider._active_span_processor._span_processors = ()
            provider.shutdown()
    assert not tracing.enabled()
