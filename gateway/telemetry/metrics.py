"""Every Prometheus metric the gateway exports, defined once, with bounded label sets.

This module is the single source of metric names: code that records a value imports the object from
here, Grafana dashboards may query only names listed in :data:`METRIC_NAMES` (a test enforces it),
and nothing else calls ``prometheus_client.Counter(...)``. All metrics live in :data:`REGISTRY`, a
registry of our own, which ``GET /metrics`` serves.

Label cardinality is bounded by construction: labels carry only values from closed sets (MCP
methods, outcomes, scopes) or from the configuration (connector names, public tool/prompt names
the catalog resolved). :func:`bounded` is the last line of defence: past :data:`MAX_LABEL_VALUES`
distinct values per label, new values collapse to ``"_other"``. Arguments, session ids and free
text are never labels. Principals are labels only when the operator opts in
(``telemetry.metrics_principal_label``), and then through :class:`PrincipalLabels`, which caps the
distinct values at ``telemetry.metrics_max_principals`` (the rest are ``"_other"``) and puts them
only on the refusal counters and ``requests_total`` (never on a histogram).

Who records what (so each value has exactly one writer):

* ``gateway.filters.telemetry`` — requests, request durations, in-flight requests, rate-limited and
  denied calls (from the outcome of every MCP request, so rejections are counted too).
* connectors, through their instrumentation port (``gateway.telemetry.instrumentation``, which
  calls ``gateway.telemetry.tracing.backend_call``) — backend call durations.
* ``gateway.audit`` — the ``AUDIT_*`` metrics (queue depth, written, spilled, dropped).
* ``gateway.filters.ratelimit`` — :data:`RATE_LIMIT_BACKEND_ERRORS`, :data:`RATE_LIMIT_BREAKER_STATE`,
  :data:`RATE_LIMIT_BREAKER_TRIPS`.
* ``gateway.session`` (one place: ``server_request_refused``) and ``gateway.stateless`` —
  :data:`SERVER_REQUESTS_REFUSED`.
* ``gateway.session`` (``relay_dropped``) and ``gateway.stateless`` — :data:`RELAYED_DROPPED`,
  :data:`RELAYED_DROPPED_BYTES` (upstream notifications of one call over ``gateway.relayed_notifications``).
* ``gateway.filters.cache`` — :data:`RESPONSE_CACHE` (hits and misses of cacheable tool calls).
* ``gateway.discovery.embeddings`` — :data:`EMBEDDING_REQUESTS`; ``gateway.discovery.hybrid`` —
  :data:`SEARCH_LEXICAL_FALLBACKS` (search endpoints with hybrid ranking); ``gateway.discovery.shared_vectors``
  — :data:`SEARCH_SHARED_VECTORS`.
* ``gateway.auth`` — :data:`AUTH_FAILURES` (HTTP requests refused before any session exists).
* ``gateway.transports`` (the HTTP server and app) — :data:`HTTP_REFUSED`.
* ``gateway.reloader`` (SIGHUP, file changes) — :data:`CONFIG_RELOADS`, :data:`CONFIG_LAST_RELOAD`.
* the gateway's connector events — :data:`CONNECTOR_RECONNECTS` (via :func:`connector_health_changed`).
* :class:`GatewayStateCollector` at scrape time — sessions, connector health, catalog sizes (read
  from the live gateways, so the hot path pays nothing for them).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    disable_created_metrics,
    gc_collector,
    platform_collector,
    process_collector,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from connectors.base import Connector
    from gateway.config import GatewayConfig

__all__ = [
    "ENDPOINT_REQUESTS",
    "REGISTRY",
    "NAMESPACE",
    "MAX_LABEL_VALUES",
    "OTHER",
    "METHODS",
    "OUTCOMES",
    "bounded",
    "method_label",
    "REQUESTS",
    "REQUEST_DURATION",
    "IN_FLIGHT",
    "BACKEND_CALL_DURATION",
    "RATE_LIMITED",
    "DENIED",
    "RATE_LIMIT_BACKEND_ERRORS",
    "RATE_LIMIT_BREAKER_STATE",
    "RATE_LIMIT_BREAKER_TRIPS",
    "SERVER_REQUESTS_REFUSED",
    "SERVER_REQUEST_METHODS",
    "server_request_refused",
    "RELAYED_DROPPED",
    "RELAYED_DROPPED_BYTES",
    "relay_dropped",
    "PrincipalLabels",
    "UNKNOWN",
    "AUTH_FAILURES",
    "HTTP_REFUSED",
    "SESSIONS_ACTIVE",
    "CONNECTOR_UP",
    "CONNECTOR_RECONNECTS",
    "CATALOG_ITEMS",
    "CONFIG_RELOADS",
    "CONFIG_LAST_RELOAD",
    "AUDIT_QUEUE_DEPTH",
    "AUDIT_EVENTS_WRITTEN",
    "AUDIT_EVENTS_SPILLED",
    "AUDIT_EVENTS_DROPPED",
    "RESPONSE_CACHE",
    "EMBEDDING_REQUESTS",
    "EMBEDDING_OUTCOMES",
    "SEARCH_LEXICAL_FALLBACKS",
    "SEARCH_SHARED_VECTORS",
    "BUILD_INFO",
    "METRIC_NAMES",
    "GatewayStateCollector",
    "STATE",
    "connector_health_changed",
]

NAMESPACE = "mcp_gateway"
# ``*_created`` series double the exposition for no dashboard's benefit.
disable_created_metrics()  # type: ignore[no-untyped-call]
REGISTRY = CollectorRegistry(auto_describe=True)
process_collector.ProcessCollector(registry=REGISTRY)
platform_collector.PlatformCollector(registry=REGISTRY)
gc_collector.GCCollector(registry=REGISTRY)

MAX_LABEL_VALUES = 2000
OTHER = "_other"
# The ``tool`` label of a refused call whose name the catalog does not know: one value for all of
# them, so a caller inventing names cannot add series.
UNKNOWN = "_unknown"

# Closed sets: anything outside them is reported as OTHER.
METHODS = frozenset({
    "initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/templates/list",
    "resources/read", "resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get",
    "completion/complete", "logging/setLevel",
})
OUTCOMES = ("ok", "tool_error", "denied", "rate_limited", "invalid", "not_found", "timeout",
            "cancelled", "error")

# Latency buckets from 1 ms to 60 s: gateway overhead is sub-millisecond, backends take longer.
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

# -- requests (gateway.filters.telemetry) -----------------------------------------------------------
REQUESTS = Counter(
    "requests", "MCP requests served, by method, connector, public target and outcome (and principal "
    "or group when telemetry.metrics_principal_label is set; empty otherwise).",
    ("method", "connector", "target", "outcome", "principal"), namespace=NAMESPACE, registry=REGISTRY)
REQUEST_DURATION = Histogram(
    "request_duration_seconds", "Time to serve one MCP request through the whole filter chain.",
    ("method", "connector", "target", "outcome"), namespace=NAMESPACE, registry=REGISTRY,
    buckets=_BUCKETS)
IN_FLIGHT = Gauge(
    "requests_in_flight", "MCP requests currently being served.", namespace=NAMESPACE,
    registry=REGISTRY)
RATE_LIMITED = Counter(
    "rate_limited", "Calls refused by a rate limit, by the rule scope that refused them, connector, tool "
    "(empty for other methods, _unknown for names the catalog does not know) and principal (opt-in).",
    ("connector", "scope", "tool", "principal"), namespace=NAMESPACE, registry=REGISTRY)
ENDPOINT_REQUESTS = Counter(
    "endpoint_requests", "MCP requests served by an endpoint (gateway.endpoints; /mcp is not one), by "
    "endpoint, method and outcome.",
    ("endpoint", "method", "outcome"), namespace=NAMESPACE, registry=REGISTRY)
DENIED = Counter(
    "denied", "Calls refused by an access rule (authorization, after authentication), by method, "
    "connector, tool and principal (opt-in).",
    ("method", "connector", "tool", "principal"), namespace=NAMESPACE, registry=REGISTRY)
RATE_LIMIT_BACKEND_ERRORS = Counter(
    "rate_limit_backend_errors",
    "Rate-limit backend failures (Redis down...), by backend and the decision applied (allow | deny).",
    ("backend", "decision"), namespace=NAMESPACE, registry=REGISTRY)
# Set on every breaker transition: 1 for the state the breaker is in, 0 for the others.
RATE_LIMIT_BREAKER_STATE = Gauge(
    "rate_limit_breaker_state",
    "Circuit breaker in front of the shared rate-limit backend: 1 for its current state "
    "(closed | open | half_open), 0 for the others.",
    ("backend", "state"), namespace=NAMESPACE, registry=REGISTRY)
RATE_LIMIT_BREAKER_TRIPS = Counter(
    "rate_limit_breaker_trips",
    "Times the rate-limit backend's circuit breaker opened (failures in a row, or a failed probe).",
    ("backend",), namespace=NAMESPACE, registry=REGISTRY)
AUTH_FAILURES = Counter(
    "auth_failures", "HTTP requests refused by authentication (reason: missing | invalid | expired).",
    ("reason",), namespace=NAMESPACE, registry=REGISTRY)

# -- HTTP server limits (gateway.transports.http_server, http_app, quota) ---------------------------
HTTP_REFUSED = Counter(
    "http_refused",
    "Connections and requests the HTTP limits refused or cut, by limit (max_connections | idle_evicted | "
    "header_timeout | body_timeout | header_too_large | request_line_too_large | bad_request | "
    "max_sessions | max_sessions_per_principal).",
    ("limit",), namespace=NAMESPACE, registry=REGISTRY)

# -- server→client requests (gateway.session, gateway.stateless) -------------------------------------
SERVER_REQUEST_METHODS = frozenset({"sampling/createMessage", "elicitation/create", "roots/list"})
SERVER_REQUESTS_REFUSED = Counter(
    "server_requests_refused",
    "Requests an upstream asked of the client (sampling, elicitation, roots) that the gateway refused, "
    "by method and the cap that refused them (per_call | per_session).",
    ("method", "cap"), namespace=NAMESPACE, registry=REGISTRY)


def server_request_refused(method: str, cap: str, n: int = 1) -> None:
    """Count ``n`` server→client requests refused by ``cap`` (``per_call`` | ``per_session``)."""
    SERVER_REQUESTS_REFUSED.labels(method if method in SERVER_REQUEST_METHODS else OTHER, cap).inc(n)


RELAYED_DROPPED = Counter(
    "relayed_notifications_dropped",
    "Notifications an upstream sent about one call (notifications/message, notifications/progress) that "
    "the gateway dropped on their way to the caller, over gateway.relayed_notifications, by method.",
    ("method",), namespace=NAMESPACE, registry=REGISTRY)
RELAYED_DROPPED_BYTES = Counter(
    "relayed_notification_dropped_bytes",
    "Encoded bytes of the notifications counted in relayed_notifications_dropped_total, by method.",
    ("method",), namespace=NAMESPACE, registry=REGISTRY)


def relay_dropped(method: str, size: int) -> None:
    """Count one relayed notification (``notifications/message`` | ``notifications/progress``) dropped."""
    RELAYED_DROPPED.labels(method).inc()
    RELAYED_DROPPED_BYTES.labels(method).inc(size)


# -- backends (connectors, through tracing.backend_call) --------------------------------------------
BACKEND_CALL_DURATION = Histogram(
    "backend_call_duration_seconds",
    "Time a connector spent on its backend (HTTP request, SQL statement, upstream MCP request).",
    ("connector", "kind", "outcome"), namespace=NAMESPACE, registry=REGISTRY, buckets=_BUCKETS)

# -- connectors -------------------------------------------------------------------------------------
CONNECTOR_RECONNECTS = Counter(
    "connector_reconnects", "Times a connector came back up after being down.",
    ("connector",), namespace=NAMESPACE, registry=REGISTRY)

# -- configuration (gateway.app reload) -------------------------------------------------------------
CONFIG_RELOADS = Counter(
    "config_reloads", "Configuration reloads attempted, by result (ok | failed).",
    ("result",), namespace=NAMESPACE, registry=REGISTRY)
CONFIG_LAST_RELOAD = Gauge(
    "config_last_reload_success_timestamp_seconds", "Unix time of the last successful config load.",
    namespace=NAMESPACE, registry=REGISTRY)

# -- audit pipeline (gateway.audit) -----------------------------------------------------------------
AUDIT_QUEUE_DEPTH = Gauge(
    "audit_queue_depth", "Audit events waiting in memory to be written.",
    namespace=NAMESPACE, registry=REGISTRY)
AUDIT_EVENTS_WRITTEN = Counter(
    "audit_events_written", "Audit events written, by sink (store | jsonl | spill_replay).",
    ("sink",), namespace=NAMESPACE, registry=REGISTRY)
AUDIT_EVENTS_SPILLED = Counter(
    "audit_events_spilled", "Audit events spilled to the local file because the store was slow or down.",
    namespace=NAMESPACE, registry=REGISTRY)
AUDIT_EVENTS_DROPPED = Counter(
    "audit_events_dropped", "Audit events lost (queue full and spill impossible).",
    namespace=NAMESPACE, registry=REGISTRY)

# -- response cache (gateway.filters.cache) ---------------------------------------------------------
RESPONSE_CACHE = Counter(
    "response_cache", "Cacheable tool calls, by connector and result (hit | miss).",
    ("connector", "result"), namespace=NAMESPACE, registry=REGISTRY)

# -- hybrid tool search (gateway.discovery.embeddings, gateway.discovery.hybrid) ----------------------
# The closed set of outcomes of one request to an embeddings URL (and the fallback reasons besides
# breaker_open and no_key, which send nothing).
EMBEDDING_OUTCOMES = ("ok", "timeout", "connection", "http_error", "redirect", "too_large", "bad_response",
                      "dimensions")
EMBEDDING_REQUESTS = Counter(
    "embedding_requests", "Requests a search endpoint made to its embeddings URL, by endpoint, stage (query | "
    "index) and outcome (ok | timeout | connection | http_error | redirect | too_large | bad_response | "
    "dimensions).",
    ("endpoint", "stage", "outcome"), namespace=NAMESPACE, registry=REGISTRY)
SEARCH_LEXICAL_FALLBACKS = Counter(
    "search_lexical_fallbacks", "find_tools calls of an endpoint with hybrid ranking that were ranked lexically "
    "alone, by endpoint and reason (a failed request's outcome, breaker_open, no_key, not_indexed; the local "
    "model: timeout, busy, model).",
    ("endpoint", "reason"), namespace=NAMESPACE, registry=REGISTRY)
SEARCH_SHARED_VECTORS = Counter(
    "search_shared_vectors", "Tool texts of a search endpoint's index calls by where their vector came from, with a "
    "shared state store: hit (read from the store), miss (embedded here and stored), invalid (a stored value "
    "that is not a unit vector of the model's length: embedded here), error (a store round trip that failed).",
    ("endpoint", "outcome"), namespace=NAMESPACE, registry=REGISTRY)

BUILD_INFO = Info("build", "Gateway version.", namespace=NAMESPACE, registry=REGISTRY)

# Scrape-time gauges (GatewayStateCollector); declared here so the names live in this module too.
SESSIONS_ACTIVE = f"{NAMESPACE}_sessions_active"
CONNECTOR_UP = f"{NAMESPACE}_connector_up"
CATALOG_ITEMS = f"{NAMESPACE}_catalog_items"


def _exported_names() -> frozenset[str]:
    """Every series name a query may use: counters' _total/_created, histograms' _bucket/_sum/_count."""
    names = {SESSIONS_ACTIVE, CONNECTOR_UP, CATALOG_ITEMS}
    for metric in (REQUESTS, REQUEST_DURATION, IN_FLIGHT, RATE_LIMITED, DENIED, AUTH_FAILURES,
                   RATE_LIMIT_BACKEND_ERRORS, RATE_LIMIT_BREAKER_STATE, RATE_LIMIT_BREAKER_TRIPS,
                   SERVER_REQUESTS_REFUSED, HTTP_REFUSED,
                   BACKEND_CALL_DURATION, CONNECTOR_RECONNECTS, CONFIG_RELOADS, CONFIG_LAST_RELOAD,
                   AUDIT_QUEUE_DEPTH, AUDIT_EVENTS_WRITTEN, AUDIT_EVENTS_SPILLED, AUDIT_EVENTS_DROPPED,
                   RESPONSE_CACHE, ENDPOINT_REQUESTS, EMBEDDING_REQUESTS, SEARCH_LEXICAL_FALLBACKS, SEARCH_SHARED_VECTORS,
                   RELAYED_DROPPED, RELAYED_DROPPED_BYTES, BUILD_INFO):
        for family in metric.describe():
            names.add(family.name)
            if family.type == "counter":
                names.add(family.name + "_total")
            elif family.type == "histogram":
                names.update(family.name + s for s in ("_bucket", "_sum", "_count"))
            elif family.type == "info":
                names.add(family.name + "_info")
    return frozenset(names)


METRIC_NAMES: frozenset[str] = _exported_names()


# -- bounded labels ---------------------------------------------------------------------------------
_seen: dict[str, set[str]] = {}
_seen_lock = threading.Lock()


def bounded(label: str, value: str) -> str:
    """``value`` while fewer than MAX_LABEL_VALUES distinct values were seen for ``label``, else OTHER."""
    seen = _seen.get(label)
    if seen is not None and value in seen:
        return value
    with _seen_lock:
        seen = _seen.setdefault(label, set())
        if value in seen:
            return value
        if len(seen) >= MAX_LABEL_VALUES:
            return OTHER
        seen.add(value)
        return value


def method_label(method: str) -> str:
    return method if method in METHODS else OTHER


class PrincipalLabels:
    """The ``principal`` label value of a call: off (``""``, which PromQL treats as no label), the
    principal's name, or its group (the first of its groups in sorted order; ``_none`` without one).

    At most ``max_values`` distinct values per process ever get a series; later ones are
    ``_other``, so a flood of distinct principals (one per API key, per JWT subject) adds one
    series, not one per caller. The values seen are shared by every instance (a reload builds a
    new one) because the series they created stay in the registry until the process exits.
    """

    __slots__ = ("mode", "max_values")
    _seen: set[str] = set()
    _lock = threading.Lock()

    def __init__(self, mode: str = "none", max_values: int = 50) -> None:
        if mode not in ("none", "principal", "group"):
            raise ValueError(f"principal label mode must be none | principal | group, not {mode!r}")
        self.mode = mode
        self.max_values = max_values

    @classmethod
    def forget(cls) -> None:
        """Forget the values seen (tests only: the series already exported stay)."""
        with cls._lock:
            cls._seen.clear()

    def __call__(self, name: str, groups: frozenset[str] = frozenset()) -> str:
        if self.mode == "none":
            return ""
        value = name if self.mode == "principal" else (min(groups) if groups else "_none")
        seen = self._seen
        if value in seen:
            return value
        with self._lock:
            if value in seen:
                return value
            if len(seen) >= self.max_values:
                return OTHER
            seen.add(value)
            return value


# -- scrape-time state --------------------------------------------------------------------------------
class ObservedSession(Protocol):
    @property
    def transport(self) -> str: ...


class ObservedGateway(Protocol):
    """What the scrape reads of a running gateway (:class:`gateway.app.Gateway` is one)."""

    @property
    def sessions(self) -> Mapping[str, ObservedSession]: ...

    @property
    def connectors(self) -> Mapping[str, Connector]: ...

    @property
    def failed(self) -> Mapping[str, str]: ...

    @property
    def config(self) -> GatewayConfig: ...


class GatewayStateCollector(Collector):
    """Reads live gateways when Prometheus scrapes: sessions by transport, connector up, catalog sizes.

    Gateways register themselves (at start, and unregister at stop); several gateways in one
    process (tests) are summed, which is what one process would report.
    """

    def __init__(self) -> None:
        self._gateways: weakref.WeakSet[ObservedGateway] = weakref.WeakSet()

    def add(self, gateway: ObservedGateway) -> None:
        self._gateways.add(gateway)

    def discard(self, gateway: ObservedGateway) -> None:
        self._gateways.discard(gateway)

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return list(self._families())

    def collect(self) -> Iterable[GaugeMetricFamily]:
        sessions: dict[str, float] = {}
        up: dict[tuple[str, str], float] = {}
        items: dict[tuple[str, str], float] = {}
        for gw in list(self._gateways):
            for session in list(gw.sessions.values()):
                transport = session.transport or "unknown"
                sessions[transport] = sessions.get(transport, 0) + 1
            for name, conn in list(gw.connectors.items()):
                try:
                    healthy = bool(conn.health().up)
                except Exception:  # a broken health() must not break the scrape
                    healthy = False
                up[(name, conn.kind)] = 1.0 if healthy else 0.0
                for kind, count in _component_counts(conn, healthy):
                    key = (name, kind)
                    items[key] = items.get(key, 0) + count
            for name in list(gw.failed):
                cfg = gw.config.connector(name)
                up[(name, cfg.type if cfg is not None else "")] = 0.0
        s_fam, up_fam, cat_fam = self._families()
        for transport in ("stdio", "streamable_http", "sse"):
            sessions.setdefault(transport, 0)
        for transport, n in sorted(sessions.items()):
            s_fam.add_metric([transport], n)
        for (name, kind), value in sorted(up.items()):
            up_fam.add_metric([name, kind], value)
        for (name, kind), n in sorted(items.items()):
            cat_fam.add_metric([name, kind], n)
        return [s_fam, up_fam, cat_fam]

    @staticmethod
    def _families() -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(SESSIONS_ACTIVE, "Downstream MCP sessions open, by transport.",
                                labels=("transport",))
        yield GaugeMetricFamily(CONNECTOR_UP, "1 when the connector's backend is healthy, else 0.",
                                labels=("connector", "type"))
        yield GaugeMetricFamily(CATALOG_ITEMS, "Components each connector exposes, by kind.",
                                labels=("connector", "kind"))


def _component_counts(conn: Connector, healthy: bool) -> Iterator[tuple[str, int]]:
    """How many of each kind the connector serves; a connector that is down serves nothing."""
    accessors = (("tools", conn.tools), ("resources", conn.resources),
                 ("resource_templates", conn.resource_templates), ("prompts", conn.prompts))
    for kind, accessor in accessors:
        try:
            yield kind, len(accessor()) if healthy else 0
        except Exception:  # a broken accessor must not break the scrape
            yield kind, 0


STATE = GatewayStateCollector()
REGISTRY.register(STATE)

# Last known health per connector instance, so only a down → up transition counts as a reconnect.
_last_up: dict[object, bool] = {}


def connector_health_changed(connector: str, up: bool, source: object | None = None) -> None:
    """Record a health report; a connector that was down and is up again counts one reconnect.

    ``source`` identifies the connector instance (its events object): a connector restarted by a
    reload, or one of the same name in another gateway, starts with no history."""
    key = connector if source is None else (connector, id(source))
    was_up = _last_up.get(key)
    _last_up[key] = up
    if up and was_up is False:
        CONNECTOR_RECONNECTS.labels(bounded("connector", connector)).inc()
