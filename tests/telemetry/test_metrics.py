"""/metrics after real traffic: values, not only names.

A gateway with an OpenAPI connector (loopback REST backend), a static connector, an access rule and
a rate limit serves a real MCP session over Streamable HTTP; the test then scrapes /metrics and
checks each counter moved by exactly what the traffic should have caused.
"""

from __future__ import annotations

import asyncio

import aiohttp

from gateway.telemetry import metrics
from gateway.telemetry.http import add_routes
from tests.filters.mcp_http import McpHttp
from tests.support import free_port, running_gateway
from tests.telemetry.backend import backend, openapi_connector_yaml
from tests.telemetry.metrics_client import scrape
from tests.telemetry.streams import NotificationStream

STATIC = """\
  - name: docs
    type: static
    resources:
      - {uri: "docs://about", name: about, mime_type: text/plain, text: "about the gateway"}
"""


def config(url: str, tmp_path, extra: str = "") -> str:
    return (
        "gateway:\n  http: {json_response: true}\n"
        f"audit: {{store: 'sqlite:///{tmp_path}/audit.db', spill_path: '{tmp_path}/spill.jsonl'}}\n"
        "access:\n  - {principals: ['*'], allow: ['*'], deny: [api_slow]}\n"
        "rate_limits:\n  rules:\n    - {scope: tool, match: api_fail, rate: 1/h, burst: 2}\n"
        + extra + "connectors:\n" + openapi_connector_yaml(url) + STATIC
    )


async def call_tool(client: McpHttp, name: str, **arguments: str) -> dict:
    return await client.call("tools/call", {"name": name, "arguments": arguments})


async def test_metrics_after_real_traffic(tmp_path):
    async with backend() as be, aiohttp.ClientSession() as http:
        async with running_gateway(config(be.url, tmp_path)) as gw:
            before = await scrape(http, gw.url + "/metrics")
            client = await McpHttp(http, gw.mcp_url).initialize()
            for i in range(3):
                assert "result" in await call_tool(client, "api_getItem", id=str(i))
            for _ in range(2):
                first = await call_tool(client, "api_fail")
                assert first.get("result", {}).get("isError") is True, first
            assert (await call_tool(client, "api_fail"))["error"]["code"] == -32029
            assert (await call_tool(client, "api_slow"))["error"]["code"] == -32003
            assert (await call_tool(client, "api_nope"))["error"]["code"] == -32602
            assert "result" in await client.call("tools/list")
            assert "result" in await client.call("resources/read", {"uri": "docs://about"})
            assert (await client.call("resources/read", {"uri": "nowhere://x"}))["error"]["code"] == -32002
            after = await scrape(http, gw.url + "/metrics")

        def requests(target: str, outcome: str, connector: str = "api", method: str = "tools/call") -> float:
            labels = {"method": method, "connector": connector, "target": target, "outcome": outcome}
            count = after.delta(before, "mcp_gateway_request_duration_seconds_count", **labels)
            assert count == after.delta(before, "mcp_gateway_requests_total", **labels)
            return after.delta(before, "mcp_gateway_requests_total", **labels)

        assert requests("api_getItem", "ok") == 3
        assert requests("api_fail", "tool_error") == 2
        assert requests("api_fail", "rate_limited") == 1
        assert requests("api_slow", "denied") == 1
        # Unknown names never become label values (-32602, "invalid" as in the audit log).
        assert requests("", "invalid", connector="") == 1
        assert requests("", "ok", connector="", method="tools/list") == 1
        assert requests("docs_about", "ok", connector="docs", method="resources/read") == 1
        assert requests("", "not_found", connector="", method="resources/read") == 1
        assert not [s for s in after.series("mcp_gateway_requests_total") if s["target"] in ("api_nope", "nowhere://x")]

        latency = after.delta(before, "mcp_gateway_request_duration_seconds_sum", method="tools/call",
                              connector="api", target="api_getItem", outcome="ok")
        assert 0 < latency < 10
        # Every getItem call took longer than 1 µs and less than 10 s: all three in the <= 10 s bucket.
        assert after.delta(before, "mcp_gateway_request_duration_seconds_bucket", method="tools/call",
                           connector="api", target="api_getItem", outcome="ok", le="10.0") == 3

        # Refusals name the tool they refused (issue 15: "who is being rate limited, on what").
        assert after.delta(before, "mcp_gateway_rate_limited_total", connector="api", scope="tool",
                           tool="api_fail") == 1
        assert after.delta(before, "mcp_gateway_denied_total", method="tools/call", connector="api",
                           tool="api_slow") == 1
        # Off by default: no series this traffic moved has a principal (the registry is the
        # process's: other tests' gateways may have left principal series in it).
        for name in ("mcp_gateway_requests_total", "mcp_gateway_rate_limited_total", "mcp_gateway_denied_total"):
            moved = [s for s in after.series(name) if after.delta(before, name, **s)]
            assert moved and all(not s.get("principal") for s in moved), (name, moved)
        assert after.value("mcp_gateway_requests_in_flight") == 0
        # Scrape-time state of the live gateway.
        assert after.value("mcp_gateway_sessions_active", transport="streamable_http") == 1
        assert after.value("mcp_gateway_connector_up", connector="api", type="openapi") == 1
        assert after.value("mcp_gateway_connector_up", connector="docs", type="static") == 1
        assert after.value("mcp_gateway_catalog_items", connector="api", kind="tools") == 3
        assert after.value("mcp_gateway_catalog_items", connector="docs", kind="resources") == 1
        assert after.value("mcp_gateway_build_info", version="0.1.0") == 1

    # After stop the audit queue was flushed into the store: one event per audited request.
    assert metrics.AUDIT_QUEUE_DEPTH._value.get() == 0
    written = metrics.REGISTRY.get_sample_value("mcp_gateway_audit_events_written_total", {"sink": "store"})
    assert written is not None and written - before.value("mcp_gateway_audit_events_written_total", sink="store") >= 10


async def test_backend_call_durations_by_connector(tmp_path):
    async with backend() as be, aiohttp.ClientSession() as http:
        async with running_gateway(config(be.url, tmp_path, "audit: {enabled: false}\n").replace(
                f"audit: {{store: 'sqlite:///{tmp_path}/audit.db', spill_path: '{tmp_path}/spill.jsonl'}}\n", "")) as gw:
            before = await scrape(http, gw.url + "/metrics")
            client = await McpHttp(http, gw.mcp_url).initialize()
            await call_tool(client, "api_getItem", id="1")
            await call_tool(client, "api_getItem", id="2")
            await call_tool(client, "api_fail")
            after = await scrape(http, gw.url + "/metrics")
    ok = after.delta(before, "mcp_gateway_backend_call_duration_seconds_count", connector="api", kind="openapi",
                     outcome="ok")
    failed = after.delta(before, "mcp_gateway_backend_call_duration_seconds_count", connector="api",
                         kind="openapi", outcome="error")
    assert (ok, failed) == (2, 1)


async def test_sessions_and_in_flight_while_a_call_runs(tmp_path):
    cfg = ("gateway:\n  http: {json_response: true}\naudit: {enabled: false}\nconnectors:\n")
    async with backend() as be, aiohttp.ClientSession() as http:
        async with running_gateway(cfg + openapi_connector_yaml(be.url)) as gw:
            a = await McpHttp(http, gw.mcp_url).initialize()
            await McpHttp(http, gw.mcp_url).initialize()
            slow = asyncio.create_task(call_tool(a, "api_slow"))
            await asyncio.wait_for(be.slow_started.wait(), 10)
            during = await scrape(http, gw.url + "/metrics")
            assert during.value("mcp_gateway_sessions_active", transport="streamable_http") == 2
            async with NotificationStream(http, gw.url + "/sse", {}) as legacy:
                await legacy.wait_for_event("endpoint")
                with_sse = await scrape(http, gw.url + "/metrics")
                assert with_sse.value("mcp_gateway_sessions_active", transport="sse") == 1
            assert during.value("mcp_gateway_requests_in_flight") == 1
            be.release()
            assert "result" in await asyncio.wait_for(slow, 10)
            after = await scrape(http, gw.url + "/metrics")
            assert after.value("mcp_gateway_requests_in_flight") == 0
            async with http.delete(gw.mcp_url, headers=a.headers) as resp:
                assert resp.status in (200, 204)
            closed = await scrape(http, gw.url + "/metrics")
            assert closed.value("mcp_gateway_sessions_active", transport="streamable_http") == 1


async def test_metrics_on_their_own_port():
    port = free_port()
    cfg = f"audit: {{enabled: false}}\ntelemetry: {{metrics_port: {port}}}\n"
    async with running_gateway(cfg) as gw, aiohttp.ClientSession() as http:
        samples = await scrape(http, f"http://127.0.0.1:{port}/metrics")
        assert "mcp_gateway_sessions_active" in samples.text
        # Not on the public port: metrics reveal tool names.
        async with http.get(gw.url + "/metrics") as resp:
            assert resp.status == 404
        # OpenMetrics when asked for it.
        async with http.get(f"http://127.0.0.1:{port}/metrics",
                            headers={"Accept": "application/openmetrics-text; version=1.0.0"}) as resp:
            assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
            assert (await resp.text()).rstrip().endswith("# EOF")
    # Stopped with the gateway.
    async with aiohttp.ClientSession() as http:
        try:
            async with http.get(f"http://127.0.0.1:{port}/metrics") as resp:
                raise AssertionError(f"metrics port still serving: {resp.status}")
        except aiohttp.ClientConnectionError:
            pass


async def test_everything_off_builds_no_filter_and_no_route():
    from gateway.filters import telemetry as telemetry_filter

    cfg = "audit: {enabled: false}\ntelemetry: {metrics: false}\n"
    async with running_gateway(cfg) as gw, aiohttp.ClientSession() as http:
        assert not any(isinstance(f, telemetry_filter.TelemetryFilter) for f in gw.filters)
        async with http.get(gw.url + "/metrics") as resp:
            assert resp.status == 404
        from aiohttp import web

        app = web.Application()
        add_routes(app, gw.gateway.config.telemetry)
        assert not [r for r in app.router.routes() if r.resource and r.resource.canonical == "/metrics"]


def test_label_values_are_bounded(monkeypatch):
    monkeypatch.setattr(metrics, "MAX_LABEL_VALUES", 3)
    values = [metrics.bounded("test_bounded_label", f"v{i}") for i in range(5)]
    assert values == ["v0", "v1", "v2", metrics.OTHER, metrics.OTHER]
    assert metrics.bounded("test_bounded_label", "v1") == "v1"
    assert metrics.method_label("tools/call") == "tools/call"
    assert metrics.method_label("x-custom/anything") == metrics.OTHER


def test_connector_reconnects_count_down_to_up_transitions():
    before = metrics.REGISTRY.get_sample_value("mcp_gateway_connector_reconnects_total",
                                               {"connector": "flappy"}) or 0.0
    for up in (True, False, True, True, False, True):
        metrics.connector_health_changed("flappy", up)
    after = metrics.REGISTRY.get_sample_value("mcp_gateway_connector_reconnects_total", {"connector": "flappy"})
    assert after - before == 2


PRINCIPAL_COUNTERS = {"mcp_gateway_requests_total", "mcp_gateway_rate_limited_total", "mcp_gateway_denied_total"}


def test_every_metric_is_namespaced_and_documented():
    for family in metrics.REGISTRY.collect():
        if family.name.startswith(("process_", "python_")):
            continue
        assert family.name.startswith("mcp_gateway_"), family.name
        assert family.documentation, family.name
        assert family.name in metrics.METRIC_NAMES or family.name + "_total" in metrics.METRIC_NAMES
        for sample in family.samples:
            assert not {"session", "session_id", "arguments"} & set(sample.labels), sample
            # The opt-in, capped principal label exists on the call and refusal counters only.
            if "principal" in sample.labels:
                assert sample.name in PRINCIPAL_COUNTERS, sample
