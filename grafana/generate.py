"""Writes grafana/dashboards/*.json: the overview and the per-connector drill-down.

The dashboards are generated so that panels stay consistent (same units, same rate windows, same
template variables) and so that every query is written against the names in
``gateway/telemetry/metrics.py``; tests/telemetry/test_dashboards.py checks the committed JSON.
Run ``.venv/bin/python grafana/generate.py`` after changing a panel here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["overview", "connector", "main"]

HERE = Path(__file__).resolve().parent
DS = {"type": "prometheus", "uid": "${datasource}"}
RI = "$__rate_interval"
SEL = 'connector=~"$connector"'
TOOL_SEL = 'method="tools/call", connector=~"$connector", target=~"$tool"'


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

    return [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0},
        query_var("connector", "Connector", "label_values(mcp_gateway_connector_up, connector)",
                  connector_multi),
        query_var("tool", "Tool",
                  'label_values(mcp_gateway_requests_total{method="tools/call", connector=~"$connector"}, target)',
                  True),
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
            "expr": "changes(mcp_gateway_config_last_reload_success_timestamp_seconds[2m]) > 0",
            "titleFormat": "config reloaded"}]},
        "links": links, "panels": layout.panels,
    }


def overview() -> dict[str, Any]:
    lay = _Layout()
    total = f"sum(rate(mcp_gateway_requests_total{{{SEL}}}[{RI}]))"
    errors = f'sum(rate(mcp_gateway_requests_total{{{SEL}, outcome!="ok"}}[{RI}]))'
    lay.row("Traffic")
    lay.add(stat("Requests / s", total, "reqps"), w=6, h=4)
    lay.add(stat("Error ratio", f"{errors} / clamp_min({total}, 1e-9)", "percentunit",
                 [("green", None), ("orange", 0.01), ("red", 0.05)],
                 "Share of requests whose outcome is not ok (tool errors, denials, limits, timeouts)."),
            w=6, h=4)
    lay.add(stat("Active sessions", "sum(mcp_gateway_sessions_active)"), w=6, h=4)
    lay.add(stat("Connectors down", "count(mcp_gateway_connector_up == 0) or vector(0)", "short",
                 [("green", None), ("red", 1)]), w=6, h=4)
    lay.add(timeseries("Requests by method", [(
        f"sum by (method) (rate(mcp_gateway_requests_total{{{SEL}}}[{RI}]))", "{{method}}")], "reqps", True))
    lay.add(timeseries("Requests by outcome", [(
        f"sum by (outcome) (rate(mcp_gateway_requests_total{{{SEL}}}[{RI}]))", "{{outcome}}")], "reqps", True))
    lay.add(timeseries("Tool calls by tool", [(
        f"sum by (target) (rate(mcp_gateway_requests_total{{{TOOL_SEL}}}[{RI}]))", "{{target}}")], "reqps", True))
    lay.add(timeseries("Error ratio by connector", [(
        f'sum by (connector) (rate(mcp_gateway_requests_total{{{SEL}, outcome!="ok"}}[{RI}]))'
        f" / sum by (connector) (rate(mcp_gateway_requests_total{{{SEL}}}[{RI}]))", "{{connector}}")],
        "percentunit"))
    lay.row("Latency")
    lay.add(timeseries("Tool call latency by tool (p50 / p95 / p99)", quantiles(
        "mcp_gateway_request_duration_seconds", TOOL_SEL, "target", "{{target}}"), "s"))
    lay.add(timeseries("Request latency by connector (p50 / p95 / p99)", quantiles(
        "mcp_gateway_request_duration_seconds", SEL, "connector", "{{connector}}"), "s"))
    lay.add(timeseries("Backend call latency by connector (p50 / p95 / p99)", quantiles(
        "mcp_gateway_backend_call_duration_seconds", SEL, "connector", "{{connector}}"), "s",
        description="Time spent in the backend itself: HTTP request, SQL statement, upstream MCP call."))
    lay.add(timeseries("Requests in flight", [("sum(mcp_gateway_requests_in_flight)", "in flight")]))
    lay.row("Rate limiting and access")
    lay.add(timeseries("Rate-limited calls by scope", [(
        f"sum by (scope) (rate(mcp_gateway_rate_limited_total{{{SEL}}}[{RI}]))", "{{scope}}")], "reqps", True), w=8)
    lay.add(timeseries("Denied calls by connector", [(
        f"sum by (connector) (rate(mcp_gateway_denied_total{{{SEL}}}[{RI}]))", "{{connector}}")], "reqps", True), w=8)
    lay.add(timeseries("Authentication failures", [(
        f"sum by (reason) (rate(mcp_gateway_auth_failures_total[{RI}]))", "{{reason}}")], "reqps", True), w=8)
    lay.add(timeseries("Rate-limit backend errors", [(
        f"sum by (backend, decision) (rate(mcp_gateway_rate_limit_backend_errors_total[{RI}]))",
        "{{backend}} {{decision}}")], "ops", True,
        "Redis (or another shared backend) unreachable; decision is what on_backend_error applied."), w=24, h=6)
    lay.row("Sessions and connectors")
    lay.add(timeseries("Active sessions by transport", [(
        "sum by (transport) (mcp_gateway_sessions_active)", "{{transport}}")], "short", True), w=8)
    lay.add(health_table("Connector health", f"max by (connector) (mcp_gateway_connector_up{{{SEL}}})"), w=8)
    lay.add(timeseries("Connector reconnects", [(
        f"sum by (connector) (increase(mcp_gateway_connector_reconnects_total{{{SEL}}}[$__range]))",
        "{{connector}}")], "short"), w=8)
    lay.add(timeseries("Catalog size by kind", [(
        f"max by (kind) (sum by (kind, instance) (mcp_gateway_catalog_items{{{SEL}}}))", "{{kind}}")]), w=12)
    lay.add(timeseries("Config reloads", [(
        "sum by (result) (increase(mcp_gateway_config_reloads_total[5m]))", "{{result}}")], "short", True), w=12)
    lay.row("Audit pipeline")
    lay.add(timeseries("Audit queue depth", [("sum(mcp_gateway_audit_queue_depth)", "queued")]), w=8)
    lay.add(timeseries("Audit events written", [(
        f"sum by (sink) (rate(mcp_gateway_audit_events_written_total[{RI}]))", "{{sink}}")], "ops", True), w=8)
    lay.add(timeseries("Audit events spilled and dropped", [
        (f"sum(rate(mcp_gateway_audit_events_spilled_total[{RI}]))", "spilled"),
        (f"sum(rate(mcp_gateway_audit_events_dropped_total[{RI}]))", "dropped")], "ops"), w=8)
    links = [{"title": "Connector drill-down", "type": "link", "url": "/d/mcp-gateway-connector",
              "keepTime": True, "includeVars": True}]
    return _dashboard("mcp-gateway-overview", "MCP Gateway / Overview", lay, True, links)


def connector() -> dict[str, Any]:
    lay = _Layout()
    one = 'connector="$connector"'
    tools = 'method="tools/call", connector="$connector", target=~"$tool"'
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
        f'sum by (target, outcome) (rate(mcp_gateway_requests_total{{{tools}, outcome!="ok"}}[{RI}]))',
        "{{target}} {{outcome}}")], "reqps", True))
    lay.add(timeseries("Latency by tool (p50 / p95 / p99)", quantiles(
        "mcp_gateway_request_duration_seconds", tools, "target", "{{target}}"), "s"), w=24)
    lay.row("Backend")
    lay.add(timeseries("Backend call latency (p50 / p95 / p99)", quantiles(
        "mcp_gateway_backend_call_duration_seconds", one, "kind", "{{kind}}"), "s"))
    lay.add(timeseries("Backend calls by outcome", [(
        f"sum by (outcome) (rate(mcp_gateway_backend_call_duration_seconds_count{{{one}}}[{RI}]))",
        "{{outcome}}")], "ops", True))
    lay.add(timeseries("Rate-limited and denied", [
        (f"sum by (scope) (rate(mcp_gateway_rate_limited_total{{{one}}}[{RI}]))", "limited {{scope}}"),
        (f"sum(rate(mcp_gateway_denied_total{{{one}}}[{RI}]))", "denied")], "reqps", True))
    lay.add(timeseries("Other methods", [(
        f'sum by (method) (rate(mcp_gateway_requests_total{{{one}, method!="tools/call"}}[{RI}]))',
        "{{method}}")], "reqps", True))
    links = [{"title": "Overview", "type": "link", "url": "/d/mcp-gateway-overview", "keepTime": True}]
    return _dashboard("mcp-gateway-connector", "MCP Gateway / Connector", lay, False, links)


def main() -> None:
    out = HERE / "dashboards"
    out.mkdir(exist_ok=True)
    for name, board in (("overview", overview()), ("connector", connector())):
        (out / f"{name}.json").write_text(json.dumps(board, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
