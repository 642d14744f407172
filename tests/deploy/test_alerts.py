"""The PrometheusRule (deploy/kubernetes/components/monitoring/prometheusrule.yaml): every
expression parses as PromQL (promql-parser) and reads only metrics defined in
gateway/telemetry/metrics.py with `outcome` values the gateway emits; error ratios and latency
leave policy refusals (denied, rate_limited) out; the alerts the issue asks for exist. With
promtool installed, its unit tests (prometheusrule_test.yaml) also run the rules on sample series."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import promql_parser
import pytest
import yaml

from gateway.telemetry.metrics import METRIC_NAMES, OUTCOMES
from tests.deploy.manifests import KUSTOMIZE, PROMETHEUS_RULE_SCHEMA

RULE_FILE = KUSTOMIZE / "components" / "monitoring" / "prometheusrule.yaml"
PROMTOOL_TESTS = Path(__file__).with_name("prometheusrule_test.yaml")
POLICY_REFUSALS = {"denied", "rate_limited"}
# Metrics whose `outcome` label is the MCP request outcome (OUTCOMES).
REQUEST_METRICS = {"mcp_gateway_requests_total", "mcp_gateway_request_duration_seconds_bucket",
                   "mcp_gateway_request_duration_seconds_count", "mcp_gateway_request_duration_seconds_sum"}


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULE_FILE.read_text())
    return [rule for group in doc["spec"]["groups"] for rule in group["rules"]]


def selectors(expr: str) -> list[promql_parser.VectorSelector]:
    found: list[promql_parser.VectorSelector] = []

    def visit(node: Any) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def matched_outcomes(selector: promql_parser.VectorSelector) -> set[str]:
    """The outcomes a selector reads, applying its `outcome` matchers to OUTCOMES."""
    chosen = set(OUTCOMES)
    for m in selector.matchers.matchers:
        if m.name != "outcome":
            continue
        if m.op == promql_parser.MatchOp.Equal:
            chosen &= {m.value}
        elif m.op == promql_parser.MatchOp.NotEqual:
            chosen -= {m.value}
        elif m.op == promql_parser.MatchOp.Re:
            chosen = {o for o in chosen if re.fullmatch(m.value, o)}
        elif m.op == promql_parser.MatchOp.NotRe:
            chosen = {o for o in chosen if not re.fullmatch(m.value, o)}
    return chosen


def outcome_values(selector: promql_parser.VectorSelector) -> set[str]:
    """Every literal `outcome` value a selector names (regex alternatives split on |)."""
    values: set[str] = set()
    for m in selector.matchers.matchers:
        if m.name == "outcome":
            values.update(m.value.split("|") if m.op in (promql_parser.MatchOp.Re, promql_parser.MatchOp.NotRe)
                          else [m.value])
    return values


def test_the_rule_validates_against_the_crd_schema():
    jsonschema.validate(yaml.safe_load(RULE_FILE.read_text()), PROMETHEUS_RULE_SCHEMA)


def test_every_expression_uses_only_metrics_from_metrics_py():
    for rule in rules():
        names = {s.name for s in selectors(rule["expr"])}
        assert names, rule["alert"]
        assert names <= METRIC_NAMES, f"{rule['alert']}: undefined metrics {sorted(names - METRIC_NAMES)}"


def test_outcome_values_are_the_gateway_outcomes():
    for rule in rules():
        for selector in selectors(rule["expr"]):
            assert outcome_values(selector) <= set(OUTCOMES), (rule["alert"], outcome_values(selector))
            assert matched_outcomes(selector), (rule["alert"], "selects no outcome at all")


def test_policy_refusals_are_not_errors():
    """Every read of the request metrics (error ratios' numerators and denominators, latency)
    leaves denied and rate-limited calls out: one throttled bot must not look like an outage."""
    read = 0
    for rule in rules():
        for selector in selectors(rule["expr"]):
            if selector.name in REQUEST_METRICS:
                read += 1
                assert not matched_outcomes(selector) & POLICY_REFUSALS, (rule["alert"], str(selector))
    assert read >= 5


def test_the_checkers_can_fail():
    assert {s.name for s in selectors('rate(mcp_gateway_made_up_total[5m])')} - METRIC_NAMES
    (sel,) = selectors('rate(mcp_gateway_requests_total{outcome!="ok"}[5m])')
    assert matched_outcomes(sel) & POLICY_REFUSALS == POLICY_REFUSALS
    (sel,) = selectors('rate(mcp_gateway_requests_total{outcome=~"error|failure"}[5m])')
    assert outcome_values(sel) - set(OUTCOMES) == {"failure"}
    with pytest.raises(ValueError):
        promql_parser.parse("sum(rate(mcp_gateway_requests_total[5m])")


def test_the_issue_alerts_exist():
    by_name = {rule["alert"]: rule for rule in rules()}
    expected = {
        "MCPGatewayConnectorDown": "mcp_gateway_connector_up",
        "MCPGatewayErrorRatioHigh": "mcp_gateway_requests_total",
        "MCPGatewayLatencyP99High": "mcp_gateway_request_duration_seconds_bucket",
        "MCPGatewayAuditSpillGrowing": "mcp_gateway_audit_events_spilled_total",
        "MCPGatewayRateLimitBackendErrors": "mcp_gateway_rate_limit_backend_errors_total",
        "MCPGatewayRateLimitBreakerOpen": "mcp_gateway_rate_limit_breaker_state",
        "MCPGatewayServerRequestFlood": "mcp_gateway_server_requests_refused_total",
    }
    for alert, metric in expected.items():
        assert metric in {s.name for s in selectors(by_name[alert]["expr"])}, alert
    assert "histogram_quantile(0.99" in by_name["MCPGatewayLatencyP99High"]["expr"]
    errors = [s for s in selectors(by_name["MCPGatewayErrorRatioHigh"]["expr"])
              if matched_outcomes(s) <= {"error", "timeout"}]
    assert errors, "the error ratio has a numerator of failures"
    for rule in rules():
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]


def test_promtool_unit_tests(tmp_path):
    """The rules evaluated on sample series (promtool test rules). promtool is not on PyPI or npm:
    it comes with Debian's `prometheus` package, so this runs where that is installed."""
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool missing: `make test` installs Debian's prometheus package"
    spec = yaml.safe_load(RULE_FILE.read_text())["spec"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    shutil.copy(PROMTOOL_TESTS, tmp_path / "tests.yaml")
    check = subprocess.run([promtool, "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    proc = subprocess.run([promtool, "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
