"""Every Grafana dashboard parses, and every metric it queries is defined in metrics.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import promql_parser
import yaml

from gateway.telemetry.metrics import METRIC_NAMES

ROOT = Path(__file__).resolve().parents[2] / "grafana"
DASHBOARDS = sorted((ROOT / "dashboards").glob("*.json"))

# PromQL words that look like identifiers but are not metric names.
PROMQL_WORDS = {
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile",
    "count_values", "group", "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
    "and", "or", "unless", "offset", "rate", "irate", "increase", "delta", "idelta", "deriv",
    "histogram_quantile", "clamp_min", "clamp_max", "clamp", "abs", "ceil", "floor", "round", "vector",
    "scalar", "time", "changes", "resets", "label_replace", "label_join", "absent", "sort", "sort_desc",
    "avg_over_time", "max_over_time", "min_over_time", "sum_over_time", "count_over_time", "le",
    "label_values", "e",
}


def metric_names(expr: str) -> set[str]:
    """Metric names an expression reads: identifiers left after removing strings, label matchers,
    grouping clauses, ranges, Grafana variables and PromQL functions and keywords."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^{}]*\}", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\$\{?\w+\}?", "", text)
    # label_values(metric, label): the second argument is a label, not a metric.
    text = re.sub(r"label_values\(\s*([A-Za-z_:][\w:]*)\s*,\s*\w+\s*\)", r"\1", text)
    names = set(re.findall(r"(?<![\w.])[A-Za-z_:][\w:]*", text))
    return {n for n in names if n not in PROMQL_WORDS}


def balanced(expr: str) -> bool:
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    for ch in re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr):
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs and (not stack or stack.pop() != pairs[ch]):
            return False
    return not stack


def queries(board: dict[str, Any]) -> list[str]:
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("expr", "definition") and isinstance(value, str):
                    found.append(value)
                elif key == "query" and isinstance(value, str) and "(" in value:
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(board)
    return found


def test_the_extractor_finds_metric_names():
    expr = ('histogram_quantile(0.95, sum by (le, target) (rate(mcp_gateway_request_duration_seconds_bucket'
            '{method="tools/call", target=~"$tool"}[$__rate_interval]))) / clamp_min(up, 1e-9)')
    assert metric_names(expr) == {"mcp_gateway_request_duration_seconds_bucket", "up"}
    assert metric_names('label_values(mcp_gateway_connector_up, connector)') == {"mcp_gateway_connector_up"}


def test_there_are_an_overview_and_a_connector_dashboard():
    assert {p.stem for p in DASHBOARDS} >= {"overview", "connector"}


def test_every_queried_metric_is_defined_in_metrics_py():
    for path in DASHBOARDS:
        board = json.loads(path.read_text(encoding="utf-8"))
        exprs = queries(board)
        assert len(exprs) > 10, path
        for expr in exprs:
            assert balanced(expr), f"{path.name}: unbalanced brackets in {expr}"
            unknown = metric_names(expr) - METRIC_NAMES
            assert not unknown, f"{path.name}: {expr} queries undefined metrics {sorted(unknown)}"


def test_dashboards_have_template_variables_and_unique_panel_ids():
    for path in DASHBOARDS:
        board = json.loads(path.read_text(encoding="utf-8"))
        variables = {v["name"] for v in board["templating"]["list"]}
        assert {"datasource", "cluster", "namespace", "job", "connector", "tool"} <= variables, path
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)), path
        uses = json.dumps(board["panels"])
        assert "$connector" in uses and "$tool" in uses, path


def _selectors(expr: str) -> list[promql_parser.VectorSelector]:
    """The vector selectors of a panel query, Grafana's variables replaced by sample values."""
    found: list[promql_parser.VectorSelector] = []

    def visit(node: Any) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)
        return True

    promql_parser.walk(promql_parser.parse(grafana_to_promql(expr)), visit)
    return found


def grafana_to_promql(expr: str) -> str:
    """A panel query as Prometheus would get it: range variables become durations, others a value."""
    text = expr.replace("$__rate_interval", "5m").replace("$__range", "1h")
    return re.sub(r"\$\{?(\w+)\}?", r"\1", text)


def panel_queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, expr) of every panel target and annotation (not the variables' label_values)."""
    out = [(p["title"], t["expr"]) for p in board["panels"] for t in p.get("targets", [])]
    out += [(a["name"], a["expr"]) for a in board["annotations"]["list"]]
    return out


def test_every_query_is_scoped_by_cluster_namespace_and_job():
    """One dashboard serves every gateway a Prometheus scrapes: each selector of each query (and of
    each variable but cluster's) names the three scope variables."""
    for path in DASHBOARDS:
        board = json.loads(path.read_text(encoding="utf-8"))
        checked = 0
        for title, expr in panel_queries(board):
            for sel in _selectors(expr):
                scoped = {m.name: m.value for m in sel.matchers.matchers if m.op == promql_parser.MatchOp.Re}
                assert scoped.get("cluster") == "cluster" and scoped.get("namespace") == "namespace" \
                    and scoped.get("job") == "job", f"{path.name}: {title}: {expr}"
                checked += 1
        assert checked > 15, path
        for var in board["templating"]["list"]:
            if var["type"] == "query" and var["name"] not in ("cluster",):
                assert 'namespace=~"$namespace"' in var["definition"] or var["name"] == "namespace", var


def test_error_ratios_leave_policy_refusals_out_and_refusals_have_panels():
    from tests.deploy.test_alerts import POLICY_REFUSALS, matched_outcomes

    board = json.loads((ROOT / "dashboards" / "overview.json").read_text(encoding="utf-8"))
    by_title = {p["title"]: p for p in board["panels"]}
    ratios = [t for t in by_title if "error ratio" in t.lower()]
    assert len(ratios) == 2, ratios
    for title in ratios:
        (target,) = by_title[title]["targets"]
        sels = [s for s in _selectors(target["expr"]) if s.name == "mcp_gateway_requests_total"]
        # numerator (failures), then served calls: the denominator, and "or 0 * served" where a
        # connector without failures is to read 0 rather than "No data"
        assert len(sels) in (2, 3), title
        assert all(matched_outcomes(sel) == matched_outcomes(sels[-1]) for sel in sels[1:]), title
        for sel in sels:  # no refusal in the numerator or the denominator
            assert not matched_outcomes(sel) & POLICY_REFUSALS, (title, str(sel))
        assert matched_outcomes(sels[0]) == {"error", "timeout"}, title
    refusals = by_title["Policy refusals / s"]["targets"][0]["expr"]
    (sel,) = [s for s in _selectors(refusals) if s.name == "mcp_gateway_requests_total"]
    assert matched_outcomes(sel) == POLICY_REFUSALS
    # Who is being rate limited / denied, and the top principals.
    for title, metric in (("Rate-limited calls by principal and tool (top 10)", "mcp_gateway_rate_limited_total"),
                          ("Denied calls by principal and tool (top 10)", "mcp_gateway_denied_total"),
                          ("Top principals by requests (top 10)", "mcp_gateway_requests_total")):
        expr = by_title[title]["targets"][0]["expr"]
        assert expr.startswith("topk(10, sum by (principal"), title
        assert {s.name for s in _selectors(expr)} == {metric}, title
    assert "mcp_gateway_server_requests_refused_total" in json.dumps(board)
    assert "mcp_gateway_rate_limit_breaker_state" in json.dumps(board)


def test_overview_covers_the_required_panels():
    board = json.loads((ROOT / "dashboards" / "overview.json").read_text(encoding="utf-8"))
    text = json.dumps(board)
    for needle in ("histogram_quantile(0.5", "histogram_quantile(0.95", "histogram_quantile(0.99",
                   "mcp_gateway_rate_limited_total", "mcp_gateway_sessions_active",
                   "mcp_gateway_connector_up", "mcp_gateway_audit_queue_depth",
                   "mcp_gateway_audit_events_dropped_total", 'outcome!~\\"denied|rate_limited\\"'):
        assert needle in text, needle


def test_committed_json_is_what_the_generator_writes():
    import importlib.util

    spec = importlib.util.spec_from_file_location("grafana_generate", ROOT / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, board in (("overview", module.overview()), ("connector", module.connector())):
        assert json.loads((ROOT / "dashboards" / f"{name}.json").read_text(encoding="utf-8")) == board


def test_provisioning_files_point_at_the_dashboards():
    provider = yaml.safe_load((ROOT / "provisioning" / "dashboards" / "mcp-gateway.yaml").read_text())
    assert provider["providers"][0]["type"] == "file"
    datasource = yaml.safe_load((ROOT / "provisioning" / "datasources" / "prometheus.yaml").read_text())
    assert datasource["datasources"][0]["type"] == "prometheus"
