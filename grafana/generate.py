"""Writes grafana/dashboards/*.json: the overview and the per-connector drill-down.

The dashboards are generated so that panels stay consistent (same units, same rate windows, same
template variables) and so that every query is written against the names in
``gateway/telemetry/metrics.py``; tests/telemetry/test_dashboards.py checks the committed JSON
(tests/telemetry/test_dashboards_scrape.py checks every query against a real gateway's /metrics).
Run ``.venv/bin/python grafana/generate.py`` after changing a panel here.

Every query is scoped by the ``cluster``, ``namespace`` and ``job`` variables (labels Prometheus
adds when it scrapes; a setup without them gets ``.*``, which also matches a missing label). Policy
refusals (outcome ``denied`` or ``rate_limited``) are never errors: error ratios count ``error``
and ``timeout`` over every call except refusals, as the alert rules do, and refusals have panels
of their own, by tool and by principal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["overview", "connector", "main"]

HERE = Path(__file__).resolve().parent
DS = {"type": "prometheus", "uid": "${datasource}"}
RI = "$__rate_interval"
# Where the series come from: Prometheus's target labels, one variable each.
SCOPE = 'cluster=~"$cluster", namespace=~"$namespace", job=~"$job"'
SEL = f'{SCOPE}, connector=~"$connector"'
TOOL_SEL = f'{SCOPE}, method="tools/call", connector=~"$connector", target=~"$tool"'
# Failures of the gateway or a backend, and everything that was served (policy refusals are not).
FAILED = 'outcome=~"error|timeout"'
SERVED = 'outcome!~"denied|rate_limited"'
REFUSED = 'outcome=~"denied|rate_limited"'


class _Layout:
    """Places panels left to right on Grafana's 24-column grid."""

    def __init__(self) -> None:
        self.y = 0
        self.x = 0
        self.row_h = 0
        self.next_id = 1
        self.panels: list[dict[str, Any]] = []

    def row(self, title: str) -> None:
        self._newline()
        self.panels.append({"type": "row", "title": title, "id": self._id(), "collapsed": False,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.y += 1

    def add(self, panel: dict[str, Any], w: int = 12, h: int = 8) -> None:
        if self.x + w > 24:
            self._newline()
        panel["id"] = self._id()
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.panels.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)

    def _newline(self) -> None:
        self.y += self.row_h
        self.x = 0
        self.row_h = 0

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


def _targets(queries: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"datasource": DS, "expr": expr, "legendFormat": legend, "refId": chr(ord("A") + i)}
            for i, (expr, legend) in enumerate(queries)]


def timeseries(title: str, queries: list[tuple[str, str]], unit: str = "short",
               stack: bool = False, description: str = "") -> dict[str, Any]:
    return {
        "type": "timeseries", "title": title, "description": description, "datasource": DS,
        "targets": _targets(queries),
        "fieldConfig": {"defaults": {"unit": unit, "custom": {
            "drawStyle": "line", "fillOpacity": 15 if stack else 0, "lineWidth": 1,
            "stacking": {"mode": "normal" if stack else "none", "group": "A"}}}, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max"]},
                    "tooltip": {"mode": "multi", "sort": "desc"}},
    }


def stat(title: str, expr: str, unit: str = "short", thresholds: list[tuple[str, float | None]] | None = None,
         description: str = "") -> dict[str, Any]:
    steps = [{"color": c, "value": v} for c, v in (thresholds or [("green", None)])]
    return {
        "type": "stat", "title": title, "description": description, "datasource": DS,
        "targets": _targets([(expr, "")]),
        "fieldConfig": {"defaults": {"unit": unit, "thresholds": {"mode": "absolute", "steps": steps}},
                        "overrides": []},
        "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                    "colorMode": "background", "graphMode": "area", "textMode": "auto"},
    }


def health_table(title: str, expr: str) -> dict[str, Any]:
    return {
        "type": "state-timeline", "title": title, "datasource": DS,
        "targets": _targets([(expr, "{{connector}}")]),
        "fieldConfig": {"defaults": {
            "mappings": [{"type": "value", "options": {"0": {"text": "down", "color": "red"},
                                                       "1": {"text": "up", "color": "green"}}}],
            "thresholds": {"mode": "absolute", "steps": [{"color": "red", "value": None},
                                                         {"color": "green", "value": 1}]}},
            "overrides": []},
        "options": {"showValue": "never", "mergeValues": True, "rowHeight": 0.8},
    }


def quantiles(metric: str, selector: str, by: str, legend: str) -> list[tuple[str, str]]:
    return [(f"histogram_quantile({q}, sum by (le, {by}) (rate({metric}_bucket{{{selector}}}[{RI}])))",
             f"p{int(q * 100)} {legend}") for q in (0.5, 0.95, 0.99)]


def _variables(connector_multi: bool) -> list[dict[str, Any]]:
    def query_var(name: str, label: str, query: str, multi: bool) -> dict[str, Any]:
        return {"name": name, "label": label, "type": "query", "datasource": DS,
                "query": {"query": query, "refId": name}, "definition": query, "refresh": 2,
                "includeAll": multi, "multi": multi, "allValue": ".*" if multi else None,
                "current": {}, "sort": 1}

    info = "mcp_gateway_build_info"
    return [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0},
        query_var("cluster", "Cluster", f"label_values({info}, cluster)", True),
        query_var("namespace", "Namespace", f'label_values({info}{{cluster=~"$cluster"}}, namespace)', True),
        query_var("job", "Job", f'label_values({info}{{cluster=~"$cluster", namespace=~"$namespace"}}, job)',
                  True),
        query_var("connector", "Connector", f"label_values(mcp_gateway_connector_up{{{SCOPE}}}, connector)",
                  connector_multi),
        query_var("tool", "Tool",
                  f'label_values(mcp_gateway_requests_total{{{SCOPE}, method="tools/call", '
                  'connector=~"$connector"}, target)', True),
    ]


def _dashboard(uid: str, title: str, layout: _Layout, connector_multi: bool,
               links: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "uid": uid, "title": title, "tags": ["mcp-gateway"], "timezone": "browser",
        "schemaVersion": 39, "version": 1, "editable": True, "graphTooltip": 1,
        "time": {"from": "now-1h", "to": "now"}, "refresh": "30s",
        "templating": {"list": _variables(connector_multi)},
        "annotations": {"list": [{
            "name": "Config reloads", "datasource": DS, "enable": True, "iconColor": "orange",
            "expr": f"changes(mcp_gateway_config_last_reload_success_timestamp_seconds{{{SCOPE}}}[2m]) > 0",
            "titleFormat": "config reloaded"}]},
        "links": links, "panels": layout.panels,
    }


def overview() -> dict[str, Any]:
    lay = _Layout()
    total = f"sum(rate(mcp_gateway_requests_total{{{SEL}}}[{RI}]))"
    served = f"sum(rate(mcp_gateway_requests_total{{{SEL}, {SERVED}}}[{RI}]))"
    failed = f"sum(rate(mcp_gateway_requests_total{{{SEL}, {FAILED}}}[{RI}]))"
    refused = f"sum(rate(mcp_gateway_requests_total{{{SEL}, {REFUSED}}}[{RI}]))"
    lay.row("Traffic")
    lay.add(stat("Requests / s", total, "reqps"), w=5, h=4)
    lay.add(stat("Error ratio", f"({failed} or vector(0)) / clamp_min({served}, 1e-9)", "percentunit",
                 [("green", None), ("orange", 0.01), ("red", 0.05)],
                 "Calls that failed in the gateway or a backend (outcome error or timeout) over every call "
                 "except policy refusals: denied and rate-limited calls are the gateway working as "
                 "configured, shown on their own (Policy refusals)."), w=5, h=4)
    lay.add(stat("Policy refusals / s", f"{refused} or vector(0)", "reqps", [("green", None), ("orange", 1)],
                 "Calls refused by an access rule (denied) or a rate limit; who and on what: the "
                 "Rate limiting and access row."), w=5, h=4)
    lay.add(stat("Active sessions", f"sum(mcp_gateway_sessions_active{{{SCOPE}}})"), w=4, h=4)
    lay.add(stat("Connectors down", f"count(mcp_gateway_connector_up{{{SCOPE}}} == 0) or vector(0)", "short",
                 [("green", None), ("red", 1)]), w=5, h=4)
    lay.add(timeseries("Requests by method", [(
        f"sum by (method) (rate(mcp_gateway_requests_total{{{SEL}}}[{RI}]))", "{{method}}")], "reqps", True))
    lay.add(timeseries("Requests by outcome", [(
        f"sum by (outcome) (rate(mcp_gateway_requests_total{{{SEL}}}[{RI}]))", "{{outcome}}")], "reqps", True))
    lay.add(timeseries("Tool calls by tool", [(
        f"sum by (target) (rate(mcp_gateway_requests_total{{{TOOL_SEL}}}[{RI}]))", "{{target}}")], "reqps", True))
    # "or 0 * served": a connector serving calls without errors is at 0, not "No data".
    served_by = f"sum by (connector) (rate(mcp_gateway_requests_total{{{SEL}, {SERVED}}}[{RI}]))"
    lay.add(timeseries("Error ratio by connector", [(
        f"(sum by (connector) (rate(mcp_gateway_requests_total{{{SEL}, {FAILED}}}[{RI}])) or 0 * {served_by})"
        f" / {served_by}", "{{connector}}")],
        "percentunit", description="Errors and timeouts over served calls (refusals left out)."))
    lay.row("Latency")
    lay.add(timeseries("Tool call latency by tool (p50 / p95 / p99)", quantiles(
        "mcp_gateway_request_duration_seconds", f"{TOOL_SEL}, {SERVED}", "target", "{{target}}"), "s",
        description="Refusals are answered at once and left out."))
    lay.add(timeseries("Request latency by connector (p50 / p95 / p99)", quantiles(
        "mcp_gateway_request_duration_seconds", f"{SEL}, {SERVED}", "connector", "{{connector}}"), "s"))
    lay.add(timeseries("Backend call latency by connector (p50 / p95 / p99)", quantiles(
        "mcp_gateway_backend_call_duration_seconds", SEL, "connector", "{{connector}}"), "s",
        description="Time spent in the backend itself: HTTP request, SQL statement, upstream MCP call."))
    lay.add(timeseries("Requests in flight", [(f"sum(mcp_gateway_requests_in_flight{{{SCOPE}}})", "in flight")]))
    lay.row("Rate limiting and access: who, on what")
    lay.add(timeseries("Rate-limited calls by principal and tool (top 10)", [(
        f"topk(10, sum by (principal, tool) (rate(mcp_gateway_rate_limited_total{{{SEL}}}[{RI}])))",
        "{{principal}} {{tool}}")], "reqps", True,
        "Who is being rate limited, on which tool. The principal is empty unless "
        "telemetry.metrics_principal_label is set (capped: past the cap principals are _other)."), w=12)
    lay.add(timeseries("Denied calls by principal and tool (top 10)", [(
        f"topk(10, sum by (principal, tool) (rate(mcp_gateway_denied_total{{{SEL}}}[{RI}])))",
        "{{principal}} {{tool}}")], "reqps", True, "Calls an access rule refused, by who asked for what."), w=12)
    lay.add(timeseries("Top principals by requests (top 10)", [(
        f"topk(10, sum by (principal) (rate(mcp_gateway_requests_total{{{SEL}}}[{RI}])))", "{{principal}}")],
        "reqps", True, "Needs telemetry.metrics_principal_label: principal (or group)."), w=8)
    lay.add(timeseries("Top principals by errors (top 10)", [(
        f"topk(10, sum by (principal) (rate(mcp_gateway_requests_total{{{SEL}, {FAILED}}}[{RI}])))",
        "{{principal}}")], "reqps", True), w=8)
    lay.add(timeseries("Rate-limited calls by scope", [(
        f"sum by (scope) (rate(mcp_gateway_rate_limited_total{{{SEL}}}[{RI}]))", "{{scope}}")], "reqps", True), w=8)
    lay.add(timeseries("Authentication failures", [(
        f"sum by (reason) (rate(mcp_gateway_auth_failures_total{{{SCOPE}}}[{RI}]))", "{{reason}}")], "reqps", True),
        w=8)
    lay.add(timeseries("Server→client requests refused", [(
        f"sum by (method, cap) (rate(mcp_gateway_server_requests_refused_total{{{SCOPE}}}[{RI}]))",
        "{{method}} {{cap}}")], "ops", True,
        "Sampling, elicitation and roots requests an upstream asked of the client over "
        "gateway.server_requests (per call or per session): an upstream flooding the client."), w=8)
    lay.add(timeseries("Rate-limit backend errors", [(
        f"sum by (backend, decision) (rate(mcp_gateway_rate_limit_backend_errors_total{{{SCOPE}}}[{RI}]))",
        "{{backend}} {{decision}}")], "ops", True,
        "Redis (or another shared backend) unreachable; decision is what on_backend_error applied."), w=8)
    lay.add(timeseries("Rate-limit backend circuit breaker", [
        (f"sum by (state) (mcp_gateway_rate_limit_breaker_state{{{SCOPE}, state!=\"closed\"}})",
         "replicas {{state}}"),
        (f"sum(increase(mcp_gateway_rate_limit_breaker_trips_total{{{SCOPE}}}[5m]))", "trips (5m)")], "short",
        description="Replicas whose breaker is open (on_backend_error applied without asking Redis) or "
                    "probing, and how often breakers opened."), w=16)
    lay.row("Sessions and connectors")
    lay.add(timeseries("Active sessions by transport", [(
        f"sum by (transport) (mcp_gateway_sessions_active{{{SCOPE}}})", "{{transport}}")], "short", True), w=8)
    lay.add(health_table("Connector health", f"max by (connector) (mcp_gateway_connector_up{{{SEL}}})"), w=8)
    lay.add(timeseries("Connector reconnects", [(
        f"sum by (connector) (increase(mcp_gateway_connector_reconnects_total{{{SEL}}}[$__range]))",
        "{{connector}}")], "short"), w=8)
    lay.add(timeseries("Catalog size by kind", [(
        f"max by (kind) (sum by (kind, instance) (mcp_gateway_catalog_items{{{SEL}}}))", "{{kind}}")]), w=12)
    lay.add(timeseries("Config reloads", [(
        f"sum by (result) (increase(mcp_gateway_config_reloads_total{{{SCOPE}}}[5m]))", "{{result}}")], "short",
        True), w=12)
    lay.row("Tool search (discovery: search endpoints)")
    lay.add(timeseries("find_tools ranked lexically alone, by reason", [(
        f"sum by (reason) (rate(mcp_gateway_search_lexical_fallbacks_total{{{SCOPE}}}[{RI}]))", "{{reason}}")],
        "ops", True,
        "Calls of an endpoint with semantic ranking that got the lexical ranking only. not_indexed: its "
        "tool vectors are being made (after a start or a catalog change); timeout, busy: the local model "
        "was busy with an index batch, or more queries were queued for it than it encodes in queue_s; "
        "model: it cannot run; the others: the embeddings URL failed or its breaker is open."), w=8)
    lay.add(timeseries("Tool vectors by source", [(
        f"sum by (outcome) (rate(mcp_gateway_search_shared_vectors_total{{{SCOPE}}}[{RI}]))", "{{outcome}}")],
        "ops", True,
        "With a shared state store: tool texts whose vector one replica read from Redis (hit) or embedded "
        "and stored (miss); invalid and error say the store's values or round trips failed."), w=8)
    lay.add(timeseries("Embeddings URL requests by outcome", [(
        f"sum by (stage, outcome) (rate(mcp_gateway_embedding_requests_total{{{SCOPE}}}[{RI}]))",
        "{{stage}} {{outcome}}")], "reqps", True,
        "Requests to search.embeddings URLs: query (one per find_tools not in the query cache) and index "
        "(batches of tool texts)."), w=8)
    lay.row("Audit pipeline")
    lay.add(timeseries("Audit queue depth", [(f"sum(mcp_gateway_audit_queue_depth{{{SCOPE}}})", "queued")]), w=8)
    lay.add(timeseries("Audit events written", [(
        f"sum by (sink) (rate(mcp_gateway_audit_events_written_total{{{SCOPE}}}[{RI}]))", "{{sink}}")], "ops",
        True), w=8)
    lay.add(timeseries("Audit events spilled and dropped", [
        (f"sum(rate(mcp_gateway_audit_events_spilled_total{{{SCOPE}}}[{RI}]))", "spilled"),
        (f"sum(rate(mcp_gateway_audit_events_dropped_total{{{SCOPE}}}[{RI}]))", "dropped")], "ops"), w=8)
    links = [{"title": "Connector drill-down", "type": "link", "url": "/d/mcp-gateway-connector",
              "keepTime": True, "includeVars": True}]
    return _dashboard("mcp-gateway-overview", "MCP Gateway / Overview", lay, True, links)


def connector() -> dict[str, Any]:
    lay = _Layout()
    one = f'{SCOPE}, connector="$connector"'
    tools = f'{SCOPE}, method="tools/call", connector="$connector", target=~"$tool"'
    lay.row("$connector")
    lay.add(stat("Up", f"max(mcp_gateway_connector_up{{{one}}})", "short",
                 [("red", None), ("green", 1)]), w=6, h=4)
    lay.add(stat("Requests / s", f"sum(rate(mcp_gateway_requests_total{{{one}}}[{RI}]))", "reqps"), w=6, h=4)
    lay.add(stat("Tools", f'max(sum by (instance) (mcp_gateway_catalog_items{{{one}, kind="tools"}}))'), w=6, h=4)
    lay.add(stat("Reconnects (range)",
                 f"sum(increase(mcp_gateway_connector_reconnects_total{{{one}}}[$__range]))"), w=6, h=4)
    lay.row("Tools")
    lay.add(timeseries("Calls by tool", [(
        f"sum by (target) (rate(mcp_gateway_requests_total{{{tools}}}[{RI}]))", "{{target}}")], "reqps", True))
    lay.add(timeseries("Errors by tool and outcome", [(
        f'sum by (target, outcome) (rate(mcp_gateway_requests_total{{{tools}, outcome!="ok", {SERVED}}}[{RI}]))',
        "{{target}} {{outcome}}")], "reqps", True, "Tool errors, failures and timeouts; refusals are below."))
    lay.add(timeseries("Latency by tool (p50 / p95 / p99)", quantiles(
        "mcp_gateway_request_duration_seconds", f"{tools}, {SERVED}", "target", "{{target}}"), "s"), w=24)
    lay.row("Backend")
    lay.add(timeseries("Backend call latency (p50 / p95 / p99)", quantiles(
        "mcp_gateway_backend_call_duration_seconds", one, "kind", "{{kind}}"), "s"))
    lay.add(timeseries("Backend calls by outcome", [(
        f"sum by (outcome) (rate(mcp_gateway_backend_call_duration_seconds_count{{{one}}}[{RI}]))",
        "{{outcome}}")], "ops", True))
    lay.row("Policy refusals")
    lay.add(timeseries("Rate-limited by tool, scope and principal", [(
        f"topk(10, sum by (tool, scope, principal) (rate(mcp_gateway_rate_limited_total{{{one}}}[{RI}])))",
        "{{tool}} {{scope}} {{principal}}")], "reqps", True))
    lay.add(timeseries("Denied by tool and principal", [(
        f"topk(10, sum by (tool, principal) (rate(mcp_gateway_denied_total{{{one}}}[{RI}])))",
        "{{tool}} {{principal}}")], "reqps", True))
    lay.add(timeseries("Other methods", [(
        f'sum by (method) (rate(mcp_gateway_requests_total{{{one}, method!="tools/call"}}[{RI}]))',
        "{{method}}")], "reqps", True), w=24)
    links = [{"title": "Overview", "type": "link", "url": "/d/mcp-gateway-overview", "keepTime": True,
              "includeVars": True}]
    return _dashboard("mcp-gateway-connector", "MCP Gateway / Connector", lay, False, links)


def main() -> None:
    out = HERE / "dashboards"
    out.mkdir(exist_ok=True)
    for name, board in (("overview", overview()), ("connector", connector())):
        (out / f"{name}.json").write_text(json.dumps(board, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
