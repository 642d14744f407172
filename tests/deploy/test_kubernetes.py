"""Every kustomize overlay renders (``kubectl kustomize``) and validates against the Kubernetes
schemas (``kubernetes-validate``, strict); the Prometheus Operator kinds are checked against their
CRDs' schemas here since the built-in schemas do not know them. Every overlay deploys as shipped:
one namespace, references that resolve, no replicas beside an HPA, PDBs that let nodes drain."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import textwrap
from typing import Any

import pytest
import yaml

from gateway.config import ConfigError, parse_config
from tests.deploy.manifests import (
    KUSTOMIZE,
    NAMESPACE,
    all_checks,
    by_kind,
    check_config_variables,
    check_monitoring_labels,
    check_no_replicas_beside_hpa,
    check_one_namespace,
    check_pdbs_allow_drains,
    check_references,
    check_router,
    render,
    render_with,
    secret_example_keys,
    validate,
)

OVERLAYS = sorted(p.parent for p in KUSTOMIZE.glob("overlays/*/kustomization.yaml"))
MONITORING = KUSTOMIZE / "components" / "monitoring"
# Renderings whose mcp-gateway-secrets Secret is created out of band (secret.example.yaml).
EXTERNAL_SECRET = {"base", "production"}
RELEASE_LABEL = {"release": "kube-prometheus-stack"}


def external_secrets(name: str) -> dict[str, set[str]]:
    return {"mcp-gateway-secrets": secret_example_keys()} if name in EXTERNAL_SECRET else {}


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
        validate(doc)
    assert {"Namespace", "Deployment", "Service", "ConfigMap", "HorizontalPodAutoscaler",
            "PodDisruptionBudget", "NetworkPolicy", "StatefulSet"} <= kinds, name
    # The Prometheus Operator kinds come with the monitoring component: production includes it.
    if name == "production":
        assert {"ServiceMonitor", "PrometheusRule"} <= kinds


def test_every_object_is_in_one_namespace(rendered):
    """Objects an overlay adds (the dev Secret; production's Redis, PostgreSQL, their Services,
    PDB and NetworkPolicies) land in the namespace too, not in whatever kubectl's context says."""
    name, docs = rendered
    assert by_kind(docs, "Namespace", NAMESPACE)
    assert check_one_namespace(docs) == [], name


def test_references_resolve(rendered):
    """Every Secret/ConfigMap (and key) a workload uses is in the rendering; only production (and
    the bare base) use the out-of-band Secret, and then only keys secret.example.yaml documents."""
    name, docs = rendered
    assert check_references(docs, external_secrets(name)) == [], name
    assert check_config_variables(docs, external_secrets(name)) == [], name


def test_no_replicas_beside_an_hpa(rendered):
    name, docs = rendered
    assert by_kind(docs, "HorizontalPodAutoscaler", "mcp-gateway")
    assert check_no_replicas_beside_hpa(docs) == [], name


def test_pdbs_do_not_block_drains(rendered):
    name, docs = rendered
    assert check_pdbs_allow_drains(docs) == [], name


def test_router_environment_matches_the_rendering(rendered):
    name, docs = rendered
    assert check_router(docs) == [], name


def test_the_checks_report_what_the_issue_found():
    """Each check fails on the defects issue 15 found in the shipped overlays."""
    docs = render(KUSTOMIZE / "overlays" / "production")
    assert all_checks(docs, external_secrets("production")) == []

    broken = copy.deepcopy(docs)
    del by_kind(broken, "StatefulSet", "mcp-gateway-postgres")["metadata"]["namespace"]
    assert check_one_namespace(broken) == ["StatefulSet/mcp-gateway-postgres is in namespace None"]

    broken = copy.deepcopy(docs)
    by_kind(broken, "Deployment", "mcp-gateway")["spec"]["replicas"] = 3
    assert check_no_replicas_beside_hpa(broken)

    broken = copy.deepcopy(docs)
    by_kind(broken, "PodDisruptionBudget", "mcp-gateway-postgres")["spec"]["maxUnavailable"] = 0
    assert check_pdbs_allow_drains(broken) == [
        "PDB mcp-gateway-postgres allows no eviction of StatefulSet/mcp-gateway-postgres (1 replica(s))"]

    # The production Secret is external: without the documented contract it does not resolve, and
    # a key the contract lacks is reported.
    assert "Deployment/mcp-gateway -> Secret/mcp-gateway-secrets: not in the rendering" in check_references(docs)
    assert check_references(docs, {"mcp-gateway-secrets": {"MCP_GATEWAY_API_KEY"}}) == [
        "StatefulSet/mcp-gateway-postgres -> Secret/mcp-gateway-secrets: no key AUDIT_DB_PASSWORD"]
    assert check_config_variables(docs, {"mcp-gateway-secrets": {"MCP_GATEWAY_API_KEY", "AUDIT_DB_PASSWORD"}}) == [
        "mcp-gateway: gateway.yaml needs ${MCP_GATEWAY_CURSOR_SECRET}, which nothing supplies"]

    dev = render(KUSTOMIZE / "overlays" / "dev")
    broken = copy.deepcopy(dev)
    by_kind(broken, "StatefulSet", "mcp-gateway-router")["spec"]["replicas"] = 2
    assert check_router(broken)


def test_dev_generates_its_secret_and_production_requires_it():
    dev = render(KUSTOMIZE / "overlays" / "dev")
    (secret,) = [d for d in dev if d["kind"] == "Secret"]
    # Generated with a content hash; kustomize points the Deployment at the hashed name.
    assert secret["metadata"]["name"].startswith("mcp-gateway-secrets-")
    env_from = by_kind(dev, "Deployment", "mcp-gateway")["spec"]["template"]["spec"]["containers"][0]["envFrom"]
    assert env_from == [{"secretRef": {"name": secret["metadata"]["name"]}}]
    assert secret["data"]["MCP_GATEWAY_CURSOR_SECRET"]
    production = render(KUSTOMIZE / "overlays" / "production")
    assert not [d for d in production if d["kind"] == "Secret"]
    for docs in (dev, production):
        text = by_kind(docs, "ConfigMap", "mcp-gateway-config")["data"]["gateway.yaml"]
        # Required: no default (the old `change-me` let anyone forge cursors) ...
        assert yaml.safe_load(text)["gateway"]["cursor_secret"] == "${MCP_GATEWAY_CURSOR_SECRET}"
        # ... so a gateway without the Secret's value refuses to start, naming the variable.
        with pytest.raises(ConfigError, match="MCP_GATEWAY_CURSOR_SECRET"):
            parse_config(text, env={"MCP_GATEWAY_API_KEY": "k", "AUDIT_DB_PASSWORD": "p"})


def test_monitoring_objects_carry_the_release_label(tmp_path):
    docs = render(KUSTOMIZE / "overlays" / "production")
    monitoring = [d for d in docs if d["kind"] in ("ServiceMonitor", "PrometheusRule")]
    assert len(monitoring) == 2
    assert check_monitoring_labels(docs, RELEASE_LABEL) == []
    assert check_monitoring_labels(docs, {"release": "prometheus"})  # the check can fail
    # The component added to the dev overlay, as deploy/README.md tells: one namespace, labelled.
    dev = render_with(tmp_path, KUSTOMIZE / "overlays" / "dev", components=[MONITORING])
    assert {"ServiceMonitor", "PrometheusRule"} <= {d["kind"] for d in dev}
    assert check_monitoring_labels(dev, RELEASE_LABEL) == []
    assert all_checks(dev) == []


def test_the_release_label_patch_in_the_readme_works(tmp_path):
    """deploy/README.md shows the patch for a kube-prometheus-stack installed under another name."""
    readme = (KUSTOMIZE.parent / "README.md").read_text()
    block = readme[readme.index("  patches:\n    - target: {group: monitoring.coreos.com"):]
    patch = yaml.safe_load(textwrap.dedent(block[:block.index("  ```")]))
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": [os.path.relpath(KUSTOMIZE / "overlays" / "production", tmp_path)], **patch}))
    docs = render(tmp_path)
    assert check_monitoring_labels(docs, {"release": "monitoring"}) == []
    assert len([d for d in docs if d["kind"] in ("ServiceMonitor", "PrometheusRule")]) == 2


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


def test_service_monitor_scrapes_the_metrics_port():
    docs = render(KUSTOMIZE / "overlays" / "production")
    container = by_kind(docs, "Deployment", "mcp-gateway")["spec"]["template"]["spec"]["containers"][0]
    config = yaml.safe_load(by_kind(docs, "ConfigMap", "mcp-gateway-config")["data"]["gateway.yaml"])
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


def test_production_shares_sessions_through_redis_behind_a_plain_service():
    """Issue 13: any replica serves any request, so production needs no sticky router: the Service
    selects the gateway pods, the router is gone, sessions are shared through state.store."""
    docs = render(KUSTOMIZE / "overlays" / "production")
    text = by_kind(docs, "ConfigMap", "mcp-gateway-config")["data"]["gateway.yaml"]
    config = parse_config(text, env={"MCP_GATEWAY_CURSOR_SECRET": "s", "MCP_GATEWAY_API_KEY": "k",
                                     "AUDIT_DB_PASSWORD": "p"})
    assert config.state.store.startswith("redis://mcp-gateway-redis:") and config.gateway.cursor_secret
    service = by_kind(docs, "Service", "mcp-gateway")
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "gateway"
    assert "sessionAffinity" not in service["spec"] or service["spec"]["sessionAffinity"] == "None"
    assert not [d for d in docs if "router" in d["metadata"]["name"]]
    # Clients reach the gateway pods' http port (the router used to be the only one allowed).
    policy = by_kind(docs, "NetworkPolicy", "mcp-gateway")
    assert {"ports": [{"port": "http", "protocol": "TCP"}]} in policy["spec"]["ingress"]
    # HPA, PDB and the preStop drain stay.
    assert by_kind(docs, "HorizontalPodAutoscaler", "mcp-gateway") and by_kind(docs, "PodDisruptionBudget", "mcp-gateway")
    assert by_kind(docs, "Deployment", "mcp-gateway")["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]


def test_router_is_sticky_on_mcp_session_id():
    cfg = (KUSTOMIZE / "base" / "haproxy.cfg").read_text()
    assert "stick store-response res.hdr(mcp-session-id)" in cfg
    assert "stick match req.hdr(mcp-session-id)" in cfg
    docs = render(KUSTOMIZE / "base")
    assert by_kind(docs, "ConfigMap", "mcp-gateway-router")["data"]["haproxy.cfg"] == cfg
    assert by_kind(docs, "ConfigMap", "mcp-gateway-router")["data"]["router-start.sh"] == (
        KUSTOMIZE / "base" / "router-start.sh").read_text()
    # Clients enter through the router; the gateway pods sit behind the headless Service it resolves,
    # named by the pod's environment: no namespace or Service name is written into the file.
    assert by_kind(docs, "Service", "mcp-gateway")["spec"]["selector"]["app.kubernetes.io/component"] == "router"
    assert '"${GATEWAY_SERVICE}.${POD_NAMESPACE}.svc.cluster.local:8080"' in cfg
    assert ".mcp-gateway.svc" not in cfg and "mcp-gateway-pods" not in cfg


@pytest.mark.parametrize("replicas", ["1", "2"])
def test_router_config_loads_in_haproxy(tmp_path, replicas):
    """router-start.sh writes a peers section HAProxy accepts with haproxy.cfg (`haproxy -c`), for
    one router and for two (the sibling does not resolve here, so it is left out after the wait).
    HAProxy is not on PyPI or npm: this runs where Debian's `haproxy` package is installed."""
    haproxy = shutil.which("haproxy")
    assert haproxy is not None, "haproxy missing: `make test` installs Debian's haproxy package"
    env = dict(os.environ, HOSTNAME="mcp-gateway-router-0", POD_NAMESPACE=NAMESPACE,
               GATEWAY_SERVICE="mcp-gateway-pods", ROUTER_REPLICAS=replicas, PEER_WAIT_S="0",
               PEERS_FILE=str(tmp_path / "peers.cfg"))
    proc = subprocess.run(["sh", str(KUSTOMIZE / "base" / "router-start.sh"), "-c"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    peers = (tmp_path / "peers.cfg").read_text()
    assert "    server mcp-gateway-router-0\n" in peers  # the local peer, without an address
