"""Merging workers' expositions (gateway/telemetry/aggregate.py), on real expositions of the
gateway's registry and on hand-written ones where a rule needs values that differ by worker."""

from __future__ import annotations

import pytest

from gateway.telemetry import metrics
from gateway.telemetry.aggregate import AggregateError, merge
from gateway.telemetry.http import render
from tests.telemetry.metrics_client import Samples


def exposition(ok: int, ping: int | None, fast: int, total_s: float, up: int, in_flight: int, started: int) -> str:
    """One worker's exposition (text format) with the values a merge rule needs to differ."""
    pings = f'mcp_gateway_requests_total{{method="ping",outcome="ok"}} {ping}\n' if ping is not None else ""
    return (
        "# HELP mcp_gateway_requests_total Requests.\n# TYPE mcp_gateway_requests_total counter\n"
        f'mcp_gateway_requests_total{{method="tools/call",outcome="ok"}} {ok}\n{pings}'
        "# HELP mcp_gateway_request_duration_seconds Durations.\n"
        "# TYPE mcp_gateway_request_duration_seconds histogram\n"
        f'mcp_gateway_request_duration_seconds_bucket{{le="0.1"}} {fast}\n'
        f'mcp_gateway_request_duration_seconds_bucket{{le="+Inf"}} {ok}\n'
        f"mcp_gateway_request_duration_seconds_sum {total_s}\nmcp_gateway_request_duration_seconds_count {ok}\n"
        "# HELP mcp_gateway_connector_up Up.\n# TYPE mcp_gateway_connector_up gauge\n"
        f'mcp_gateway_connector_up{{connector="api",type="openapi"}} {up}\n'
        "# HELP mcp_gateway_catalog_items Items.\n# TYPE mcp_gateway_catalog_items gauge\n"
        'mcp_gateway_catalog_items{connector="api",kind="tools"} 12\n'
        "# HELP mcp_gateway_requests_in_flight In flight.\n# TYPE mcp_gateway_requests_in_flight gauge\n"
        f"mcp_gateway_requests_in_flight {in_flight}\n"
        "# HELP process_start_time_seconds Start.\n# TYPE process_start_time_seconds gauge\n"
        f"process_start_time_seconds {started}\n")


WORKER_A = exposition(ok=3, ping=1, fast=2, total_s=0.5, up=1, in_flight=2, started=200)
WORKER_B = exposition(ok=4, ping=None, fast=1, total_s=2.0, up=0, in_flight=1, started=100)


def test_counters_and_histograms_are_summed_and_gauges_follow_their_rule():
    merged = Samples(merge([WORKER_A, WORKER_B]).decode())
    assert merged.value("mcp_gateway_requests_total", method="tools/call", outcome="ok") == 7.0
    assert merged.value("mcp_gateway_requests_total", method="ping", outcome="ok") == 1.0  # one worker's
    assert merged.value("mcp_gateway_request_duration_seconds_bucket", le="0.1") == 3.0
    assert merged.value("mcp_gateway_request_duration_seconds_bucket", le="+Inf") == 7.0
    assert merged.value("mcp_gateway_request_duration_seconds_count") == 7.0
    assert merged.value("mcp_gateway_request_duration_seconds_sum") == 2.5
    assert merged.value("mcp_gateway_requests_in_flight") == 3.0  # summed: the pod's calls
    assert merged.value("mcp_gateway_connector_up", connector="api", type="openapi") == 0.0  # the worst
    assert merged.value("mcp_gateway_catalog_items", connector="api", kind="tools") == 12.0  # not 24
    assert merged.value("process_start_time_seconds") == 100.0  # the oldest


def test_the_gateways_own_exposition_merges_to_twice_itself():
    """Every family the registry renders (process, GC, info, scrape-time gauges) parses and merges."""
    metrics.REQUESTS.labels("tools/call", "agg", "agg_tool", "ok", "").inc(5)
    text = render()[0].decode()
    one, two = Samples(text), Samples(merge([text, text]).decode())
    assert set(one.values) == set(two.values)
    assert two.value("mcp_gateway_requests_total", method="tools/call", connector="agg", target="agg_tool",
                     outcome="ok", principal="") == 2 * one.value(
        "mcp_gateway_requests_total", method="tools/call", connector="agg", target="agg_tool", outcome="ok",
        principal="")
    assert two.series("python_info") == one.series("python_info")
    assert two.value("python_info", **one.series("python_info")[0]) == 1.0
    assert merge([text]) == merge([text]) and Samples(merge([text]).decode()).values == one.values


def test_a_family_typed_differently_by_two_workers_is_refused():
    other = WORKER_B.replace("# TYPE mcp_gateway_requests_in_flight gauge",
                             "# TYPE mcp_gateway_requests_in_flight counter")
    with pytest.raises(AggregateError, match="mcp_gateway_requests_in_flight is a gauge in one worker and a "
                                             "counter in another"):
        merge([WORKER_A, other])
