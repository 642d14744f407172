"""The dashboards against a real /metrics scrape: every metric a panel, variable or annotation
queries is exported by a running gateway, with every label the query matches on or groups by.

The gateway runs with the opt-in principal label, API keys, access rules and a Redis-backed rate
limit, and serves real traffic (ok calls, tool errors, denials, rate limits, resource reads), so
the refusal panels' ``principal`` and ``tool`` labels are checked on series that exist. Counters
of rare events (a Redis outage, a server→client flood, a reload...) are exported at 0 from the
start (gateway/telemetry/known.py), so every query reads a series of the scrape itself.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import promql_parser

from gateway.telemetry import metrics
from tests.filters.mcp_http import McpHttp
from tests.support import running_gateway
from tests.telemetry.backend import backend
from tests.telemetry.metrics_client import scrape
from tests.telemetry.test_dashboards import DASHBOARDS, grafana_to_promql, queries
from tests.telemetry.test_who import each_bot_gets_twice, who_config

# Labels Prometheus attaches when it scrapes (target labels), never in the exposition itself.
TARGET_LABELS = {"cluster", "namespace", "job", "instance", "pod"}
# Counters with labels not in this scrape. The rare-event counters (reconnects, refusals, Redis
# errors and breaker trips, reloads) are exported at 0 for what the gateway knows from its start
# (gateway/telemetry/known.py), so the queries read them before anything has gone wrong (issue 27,
# finding 9b); audit writes are exported when the audit is on, and this config has it off; tool
# search's counters exist only for search endpoints with semantic ranking, and this config has none
# (tests/discovery/test_embeddings.py, test_encoder_search.py, test_shared_vectors.py count them).
BORN_ON_FIRST_EVENT = {"mcp_gateway_audit_events_written_total": metrics.AUDIT_EVENTS_WRITTEN,
                       "mcp_gateway_search_lexical_fallbacks_total": metrics.SEARCH_LEXICAL_FALLBACKS,
                       "mcp_gateway_search_shared_vectors_total": metrics.SEARCH_SHARED_VECTORS,
                       "mcp_gateway_embedding_requests_total": metrics.EMBEDDING_REQUESTS}


def used_labels(expr: str) -> tuple[list[tuple[str, set[str]]], set[str]]:
    """([(metric, labels its matchers name)], labels the aggregations group by)."""
    selected: list[tuple[str, set[str]]] = []
    grouped: set[str] = set()

    def visit(node: Any) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            selected.append((node.name, {m.name for m in node.matchers.matchers}))
        elif isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            grouped.update(node.modifier.labels)
        return True

    text = grafana_to_promql(expr)
    # label_values(metric{...}, label) is Grafana's, not PromQL: check metric{...} and the label.
    if text.startswith("label_values("):
        inner, label = text[len("label_values("):-1].rsplit(",", 1)
        text, grouped = inner, {label.strip()}
    promql_parser.walk(promql_parser.parse(text), visit)
    return selected, grouped


async def test_every_dashboard_query_reads_series_a_running_gateway_exports(tmp_path, redis_url):
    metrics.PrincipalLabels.forget()
    config = who_config("{url}", "principal", 50, n=6, rate_backend=redis_url)
    async with backend() as be, running_gateway(config.replace("{url}", be.url)) as gw, \
            aiohttp.ClientSession() as http:
        await each_bot_gets_twice(http, gw.mcp_url, 6)
        client = await McpHttp(http, gw.mcp_url, "key-1").initialize()
        assert "result" in await client.call("tools/call", {"name": "api_getItem", "arguments": {"id": "1"}})
        assert (await client.call("tools/call", {"name": "api_fail"}))["result"]["isError"] is True
        samples = await scrape(http, gw.url + "/metrics", Authorization="Bearer key-1")
    metrics.PrincipalLabels.forget()

    # Label names as exported (an empty value is still the label: it is how the opt-in principal
    # label reads when it is off, and a query grouping by it gets one empty group).
    exported: dict[str, set[str]] = {}
    for (name, _labels) in samples.values:
        exported[name] = {k for series in samples.series(name) for k in series}
    # The traffic made the "who" series: principals on the refusal counters, tools on them.
    assert {s.get("principal") for s in samples.series("mcp_gateway_rate_limited_total")} >= {"bot-0", "bot-5"}
    assert "api_slow" in {s.get("tool") for s in samples.series("mcp_gateway_denied_total")}

    checked = 0
    for path in DASHBOARDS:
        board = json.loads(path.read_text(encoding="utf-8"))
        for expr in queries(board):
            selected, grouped = used_labels(expr)
            available: set[str] = set()
            for name, matched in selected:
                if name in exported:
                    labels = exported[name] | {"le"} if name.endswith("_bucket") else exported[name]
                else:
                    assert name in BORN_ON_FIRST_EVENT, f"{path.name}: {name} is not in the scrape: {expr}"
                    labels = set(BORN_ON_FIRST_EVENT[name]._labelnames)
                missing = matched - labels - TARGET_LABELS - {"__name__"}
                assert not missing, f"{path.name}: {name} has no label {sorted(missing)}: {expr}"
                available |= labels
                checked += 1
            missing = grouped - available - TARGET_LABELS
            assert not missing, f"{path.name}: grouped by {sorted(missing)}, which its series lack: {expr}"
    assert checked > 50
