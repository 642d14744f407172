"""The Helm chart (deploy/helm/mcp-gateway): `helm lint --strict` passes; `helm template` renders
objects that pass the Kubernetes schemas and the same deploy checks as the kustomize overlays;
with its defaults it renders what the kustomize base (with the monitoring component) renders, from
the same files, and given the production overlay's gateway.yaml (a shared state store) what that
overlay renders for the gateway (no sticky router); its options (state store, router, autoscaling,
Secret, monitoring, release name) render sound objects. The helm binary comes from `make .tools/helm` (tests/deploy/helm_binary.py)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.cli import _parser
from gateway.config import parse_config
from tests.deploy.manifests import (
    CHART,
    KUSTOMIZE,
    NAMESPACE,
    Docs,
    all_checks,
    by_kind,
    check_monitoring_labels,
    helm_run,
    helm_template,
    of_kind,
    render,
    render_with,
    secret_example_keys,
    validate,
)

EXTERNAL = {"mcp-gateway-secrets": secret_example_keys()}
HELM_ONLY_LABELS = {"app.kubernetes.io/instance", "helm.sh/chart", "app.kubernetes.io/managed-by",
                    "app.kubernetes.io/version"}


@pytest.fixture(scope="module")
def helm_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("helm-home")


@pytest.fixture(scope="module")
def default_render(helm_home: Path) -> Docs:
    return helm_template(helm_home)


def test_helm_lint_strict(helm_home):
    proc = helm_run(["lint", "--strict", str(CHART)], helm_home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in proc.stdout


def test_default_render_validates_and_deploys(default_render):
    kinds = set()
    for doc in default_render:
        validate(doc)
        kinds.add(doc["kind"])
    assert {"Deployment", "Service", "ConfigMap", "HorizontalPodAutoscaler", "PodDisruptionBudget",
            "ServiceMonitor", "PrometheusRule", "NetworkPolicy", "StatefulSet", "ServiceAccount"} <= kinds
    assert all_checks(default_render, EXTERNAL) == []
    assert check_monitoring_labels(default_render, {"release": "kube-prometheus-stack"}) == []


def normalized(docs: Docs) -> dict[tuple[str, str], Any]:
    """Objects by (kind, name), without their own labels/annotations and without the labels only
    Helm adds (release, chart, version) inside selectors and pod templates."""
    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k not in HELM_ONLY_LABELS}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    out = {}
    for doc in docs:
        if doc["kind"] == "Namespace":
            continue
        doc = strip(copy.deepcopy(doc))
        doc["metadata"].pop("labels", None)
        doc["metadata"].pop("annotations", None)
        out[(doc["kind"], doc["metadata"]["name"])] = doc
    return out


def test_defaults_render_what_the_kustomize_base_renders(default_render, tmp_path):
    """Same sources: every object, field by field (gateway.yaml, haproxy.cfg, router-start.sh and
    the alert rules are the very files of the base, through files/ symlinks)."""
    kustomize = normalized(render_with(tmp_path, KUSTOMIZE / "base",
                                       components=[KUSTOMIZE / "components" / "monitoring"]))
    helm = normalized(default_render)
    assert sorted(helm) == sorted(kustomize)
    for key, obj in kustomize.items():
        assert helm[key] == obj, key


def test_chart_files_are_the_base_files():
    for name, source in (("gateway.yaml", "base/gateway.yaml"), ("haproxy.cfg", "base/haproxy.cfg"),
                         ("router-start.sh", "base/router-start.sh"),
                         ("prometheusrule.yaml", "components/monitoring/prometheusrule.yaml")):
        link = CHART / "files" / name
        assert link.is_symlink(), name
        assert link.resolve() == (KUSTOMIZE / source).resolve(), name


def test_another_release_name_renders_its_own_names(helm_home):
    docs = helm_template(helm_home, release="edge")
    assert all_checks(docs, {"edge-mcp-gateway-secrets": secret_example_keys()}) == []
    names = {d["metadata"]["name"] for d in docs}
    assert {"edge-mcp-gateway", "edge-mcp-gateway-pods", "edge-mcp-gateway-router",
            "edge-mcp-gateway-router-peers", "edge-mcp-gateway-config"} <= names
    for doc in docs:
        assert doc["metadata"]["name"].startswith("edge-mcp-gateway"), doc["metadata"]["name"]
        validate(doc)


def test_options_render_sound_objects(helm_home):
    docs = helm_template(helm_home, "--set", "autoscaling.enabled=false", "--set", "replicaCount=3",
                         "--set", "router.enabled=false", "--set", "networkPolicy.enabled=false",
                         "--set", "podDisruptionBudget.enabled=false",
                         "--set", "secret.create=true",
                         "--set", "secret.data.MCP_GATEWAY_CURSOR_SECRET=c",
                         "--set", "secret.data.MCP_GATEWAY_API_KEY=k")
    for doc in docs:
        validate(doc)
    kinds = {d["kind"] for d in docs}
    assert not kinds & {"HorizontalPodAutoscaler", "StatefulSet", "NetworkPolicy", "PodDisruptionBudget"}
    assert by_kind(docs, "Deployment", "mcp-gateway")["spec"]["replicas"] == 3
    # Without the router the Service selects the gateway pods itself.
    assert by_kind(docs, "Service", "mcp-gateway")["spec"]["selector"]["app.kubernetes.io/component"] == "gateway"
    # The chart-made Secret: everything resolves within the rendering, no external Secret needed.
    assert by_kind(docs, "Secret", "mcp-gateway-secrets")["stringData"]["MCP_GATEWAY_CURSOR_SECRET"] == "c"
    assert all_checks(docs) == []


def test_monitoring_needs_the_operator_api(helm_home):
    docs = helm_template(helm_home, monitoring=False)
    assert not {"ServiceMonitor", "PrometheusRule"} & {d["kind"] for d in docs}
    docs = helm_template(helm_home, "--set", "serviceMonitor.labels.release=prom",
                         "--set", "prometheusRule.labels.release=prom")
    assert check_monitoring_labels(docs, {"release": "prom"}) == []


def test_own_config_is_served_and_checked(helm_home, tmp_path):
    own = tmp_path / "gateway.yaml"
    own.write_text(
        "gateway: {name: own, cursor_secret: '${MCP_GATEWAY_CURSOR_SECRET}'}\n"
        "telemetry: {metrics: true, metrics_port: 9090}\n"
        "connectors: [{name: docs, type: static, resources: [{uri: 'docs://a', name: a, text: hi}]}]\n")
    docs = helm_template(helm_home, "--set-file", f"config={own}")
    text = by_kind(docs, "ConfigMap", "mcp-gateway-config")["data"]["gateway.yaml"]
    assert text == own.read_text()
    assert parse_config(text, env={"MCP_GATEWAY_CURSOR_SECRET": "s"}).gateway.name == "own"
    # A config whose /metrics is not on metricsPort would leave the ServiceMonitor scraping nothing.
    own.write_text("gateway: {name: own}\ntelemetry: {metrics: true}\nconnectors: []\n")
    proc = helm_run(["template", "mcp-gateway", str(CHART), "-n", NAMESPACE, "--set-file", f"config={own}"],
                    tmp_path)
    assert proc.returncode != 0 and "telemetry.metrics_port" in proc.stderr


def test_secret_create_without_data_fails(helm_home):
    proc = helm_run(["template", "mcp-gateway", str(CHART), "-n", NAMESPACE, "--set", "secret.create=true"],
                    helm_home)
    assert proc.returncode != 0 and "secret.data is empty" in proc.stderr


def test_default_gateway_config_is_valid(default_render):
    text = by_kind(default_render, "ConfigMap", "mcp-gateway-config")["data"]["gateway.yaml"]
    config = parse_config(text, env={"MCP_GATEWAY_CURSOR_SECRET": "s", "MCP_GATEWAY_API_KEY": "k"})
    assert config.telemetry.metrics_port == yaml.safe_load((CHART / "values.yaml").read_text())["metricsPort"]


def test_values_schema_refuses_a_typo(helm_home):
    """values.schema.json: a misspelt option fails the render instead of being ignored."""
    proc = helm_run(["template", "mcp-gateway", str(CHART), "-n", NAMESPACE, "--set", "autoscalling.enabled=false"],
                    helm_home)
    assert proc.returncode != 0 and "autoscalling" in proc.stderr


# -- a shared state store (deploy/README.md, "Several replicas") -----------------------------------
PRODUCTION = KUSTOMIZE / "overlays" / "production"
PRODUCTION_VALUES = ("--set", "autoscaling.minReplicas=3", "--set", "autoscaling.maxReplicas=20",
                     "--set", "resources.requests.cpu=500m", "--set", "resources.requests.memory=256Mi",
                     "--set-string", "resources.limits.cpu=2", "--set", "resources.limits.memory=1Gi",
                     "--set", "topologySpreadKey=topology.kubernetes.io/zone")


def served_config(docs: Docs) -> Any:
    text = by_kind(docs, "ConfigMap", "mcp-gateway-config")["data"]["gateway.yaml"]
    return parse_config(text, env={"MCP_GATEWAY_CURSOR_SECRET": "s", "MCP_GATEWAY_API_KEY": "k",
                                   "AUDIT_DB_PASSWORD": "p"})


def test_state_store_value_shares_sessions_and_drops_the_router(helm_home):
    """state.store: the served config carries it (the base file's comments kept), the sticky
    router is not rendered, and the Service and NetworkPolicy let clients reach any gateway pod."""
    docs = helm_template(helm_home, "--set", "state.store=redis://redis:6379/1")
    for doc in docs:
        validate(doc)
    assert all_checks(docs, EXTERNAL) == []
    config = served_config(docs)
    assert config.state.store == "redis://redis:6379/1" and config.state.shared
    text = by_kind(docs, "ConfigMap", "mcp-gateway-config")["data"]["gateway.yaml"]
    assert text.startswith((CHART / "files" / "gateway.yaml").read_text().rstrip("\n"))
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert not {n for n in names if "router" in n[1]}, names
    assert by_kind(docs, "Service", "mcp-gateway")["spec"]["selector"]["app.kubernetes.io/component"] == "gateway"
    http_rule = by_kind(docs, "NetworkPolicy", "mcp-gateway")["spec"]["ingress"][0]
    assert "from" not in http_rule and http_rule["ports"][0]["port"] == "http"


def test_production_config_renders_what_the_production_overlay_renders(helm_home, tmp_path):
    """The chart given the production overlay's gateway.yaml (which sets state.store itself) and
    its sizes renders, object by object, what the overlay renders for the gateway: plain Service,
    no router. The overlay's Redis and PostgreSQL are not the chart's (bring your own)."""
    docs = helm_template(helm_home, "--set-file", f"config={PRODUCTION / 'gateway.yaml'}", *PRODUCTION_VALUES)
    assert all_checks(docs, EXTERNAL) == []
    assert served_config(docs).state.shared
    helm = normalized(docs)
    overlay = normalized(render(PRODUCTION))
    assert set(helm) <= set(overlay), set(helm) - set(overlay)
    for key, obj in helm.items():
        assert obj == overlay[key], key
    assert {k for k in overlay if "router" in k[1]} == set()


def test_router_setting_overrides_auto(helm_home):
    shared = helm_template(helm_home, "--set", "state.store=redis://redis:6379/1", "--set", "router.enabled=true")
    assert by_kind(shared, "StatefulSet", "mcp-gateway-router")
    assert by_kind(shared, "Service", "mcp-gateway")["spec"]["selector"]["app.kubernetes.io/component"] == "router"
    assert all_checks(shared, EXTERNAL) == []
    memory = helm_template(helm_home, "--set", "router.enabled=false")
    assert not of_kind(memory, "StatefulSet")
    assert by_kind(memory, "Service", "mcp-gateway")["spec"]["selector"]["app.kubernetes.io/component"] == "gateway"


def test_state_store_mistakes_fail_the_render(helm_home, tmp_path):
    def fails(*args: str) -> str:
        proc = helm_run(["template", "mcp-gateway", str(CHART), "-n", NAMESPACE, *args], helm_home)
        assert proc.returncode != 0, proc.stdout
        return proc.stderr

    # Two sources for the store: the config's state: section and the value.
    assert "set the store in one place" in fails("--set-file", f"config={PRODUCTION / 'gateway.yaml'}",
                                                 "--set", "state.store=redis://other:6379/0")
    # A shared store without a shared cursor secret: replicas would reject each other's cursors.
    own = tmp_path / "gateway.yaml"
    own.write_text("gateway: {name: own}\ntelemetry: {metrics: true, metrics_port: 9090}\nconnectors: []\n")
    assert "gateway.cursor_secret is required" in fails("--set-file", f"config={own}",
                                                         "--set", "state.store=redis://redis:6379/1")
    # Not a store URL (values.schema.json).
    assert "/state/store" in fails("--set", "state.store=mysql://db/1")
    assert "/router/enabled" in fails("--set", "router.enabled=maybe")


# -- serve --workers N (issue 27, finding 1) -------------------------------------------------------
def test_workers_value_renders_a_workers_deployment(helm_home):
    """workers: 2 with a shared store: the container runs `serve --workers 2` (a command line the
    gateway's own parser accepts), every object still passes the schemas and deploy checks, and
    /metrics stays on metricsPort, where the supervisor serves the workers' sum; with the memory
    store the render fails and says why."""
    docs = helm_template(helm_home, "--set", "workers=2", "--set", "state.store=redis://redis:6379/1")
    for doc in docs:
        validate(doc)
    assert all_checks(docs, EXTERNAL) == []
    container = by_kind(docs, "Deployment", "mcp-gateway")["spec"]["template"]["spec"]["containers"][0]
    args = _parser().parse_args(container["args"])
    assert (args.command, args.workers, args.port) == ("serve", 2, 8080)
    assert served_config(docs).state.shared
    metrics_port = yaml.safe_load((CHART / "values.yaml").read_text())["metricsPort"]
    assert served_config(docs).telemetry.metrics_port == metrics_port
    assert {"name": "metrics", "containerPort": metrics_port, "protocol": "TCP"} in container["ports"]
    # Readiness asks the supervisor, whose /readyz is ready only when every worker is: the main
    # port's would be answered by one worker, whichever the kernel hands the probe to.
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    # The default is one process: no --workers at all (what the kustomize base runs).
    one = by_kind(helm_template(helm_home), "Deployment", "mcp-gateway")["spec"]["template"]["spec"]["containers"][0]
    assert "--workers" not in one["args"]
    assert one["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    proc = helm_run(["template", "mcp-gateway", str(CHART), "-n", NAMESPACE, "--set", "workers=2"], helm_home)
    assert proc.returncode != 0 and "workers: 2 needs a shared state store" in proc.stderr
    proc = helm_run(["template", "mcp-gateway", str(CHART), "-n", NAMESPACE, "--set", "workers=0"], helm_home)
    assert proc.returncode != 0 and "/workers" in proc.stderr


def test_readme_metrics_port_is_the_charts():
    """The README's example config uses the port the chart requires of telemetry.metrics_port."""
    readme = (CHART.parents[2] / "README.md").read_text()
    ports = {int(p) for p in re.findall(r"^\s*metrics_port:\s*(\d+)", readme, re.MULTILINE)}
    assert ports == {yaml.safe_load((CHART / "values.yaml").read_text())["metricsPort"]}, ports
