"""Zero-valued series for what the gateway knows it may count: Prometheus's "initialise your labels".

A counter child exists only after ``labels(...)`` was called, so a counter of rare events (a
reconnect, a refusal) has no series at all until its first event: ``rate()`` and ``increase()``
then return nothing and a Grafana panel shows "No data" where the answer is 0. :func:`prime`
creates the children the gateway knows of at start-up and after every catalog rebuild (start,
reload, a connector's list changing), each at 0 (an existing child keeps its value):

* closed label sets, always: ``server_requests_refused`` (method × cap), ``http_refused`` (every
  limit), ``config_reloads`` (ok, failed); ``auth_failures`` (missing, invalid, expired) when
  authentication is on; ``audit_events_written`` for the audit's sinks (store, jsonl) when it is on;
* per configured connector: ``connector_reconnects``; ``response_cache`` (hit, miss) when it
  caches;
* with rate-limit rules: ``rate_limit_backend_errors`` for the configured backend and the one
  decision ``on_backend_error`` makes, ``rate_limit_breaker_trips`` for Redis, and
  ``rate_limited`` per connector and configured scope (``tool=""``: the series of refused calls
  that are not ``tools/call``), and scope ``connector`` for a connector with ``max_concurrency``;
* per tool, only while the catalog has at most :data:`MAX_TOOL_SERIES` tools (a bounded label
  set: a 1,200-tool spec would add thousands of series that stay 0): ``rate_limited`` for each
  configured scope, and ``denied`` when access rules exist.

The principal label is ``""`` on every primed child: principals are not known in advance.
Values are the same :func:`~gateway.telemetry.metrics.bounded` ones the recording code uses, so
the primed child is the one a later event increments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.telemetry import metrics

if TYPE_CHECKING:
    from gateway.catalog import Catalog
    from gateway.config import GatewayConfig

__all__ = ["HTTP_LIMITS", "MAX_TOOL_SERIES", "AUTH_REASONS", "prime"]

MAX_TOOL_SERIES = 100
# The closed sets the recording code uses (gateway.auth, gateway.transports).
AUTH_REASONS = ("missing", "invalid", "expired")
HTTP_LIMITS = ("max_connections", "idle_evicted", "header_timeout", "body_timeout", "header_too_large",
               "request_line_too_large", "bad_request", "max_sessions", "max_sessions_per_principal")
SERVER_REQUEST_CAPS = ("per_call", "per_session")


def prime(config: GatewayConfig, catalog: Catalog) -> None:
    """Create, at 0, every child :mod:`this module <gateway.telemetry.known>` lists for ``config``
    and the tools ``catalog`` serves now. Idempotent; never resets a value."""
    if not config.telemetry.metrics:
        return
    for method in sorted(metrics.SERVER_REQUEST_METHODS):
        for cap in SERVER_REQUEST_CAPS:
            metrics.SERVER_REQUESTS_REFUSED.labels(method, cap)
    for limit in HTTP_LIMITS:
        metrics.HTTP_REFUSED.labels(limit)
    for result in ("ok", "failed"):
        metrics.CONFIG_RELOADS.labels(result)
    if config.auth.enabled:
        for reason in AUTH_REASONS:
            metrics.AUTH_FAILURES.labels(reason)
    if config.audit.enabled:  # spill_replay stays event-only: a spill is an incident of its own
        metrics.AUDIT_EVENTS_WRITTEN.labels("store")
        if config.audit.jsonl:
            metrics.AUDIT_EVENTS_WRITTEN.labels("jsonl")
    limits = config.rate_limits
    scopes = {rule.scope for rule in limits.rules}
    if limits.rules and limits.backend.startswith(("redis://", "rediss://", "unix://")):
        metrics.RATE_LIMIT_BACKEND_ERRORS.labels("redis", "allow" if limits.on_backend_error == "open" else "deny")
        metrics.RATE_LIMIT_BREAKER_TRIPS.labels("redis")
    refusing: dict[str, list[str]] = {}  # connector label → the scopes that may refuse its calls
    for entry in config.connectors:
        name = metrics.bounded("connector", entry.name)
        metrics.CONNECTOR_RECONNECTS.labels(name)
        if entry.cache is not None:
            for result in ("hit", "miss"):
                metrics.RESPONSE_CACHE.labels(name, result)
        # A full max_concurrency refuses with scope "connector", rules or not.
        refusing[name] = sorted(scopes | ({"connector"} if entry.max_concurrency is not None else set()))
        for scope in refusing[name]:
            if scope != "tool":  # a tool-scope rule refuses tools/call only
                metrics.RATE_LIMITED.labels(name, scope, "", "")
    tools = catalog.snapshot("tools").entries
    if len(tools) > MAX_TOOL_SERIES:
        return
    for tool in tools:
        connector = metrics.bounded("connector", tool.connector.name)
        target = metrics.bounded("target", tool.name)
        for scope in refusing.get(connector, ()):
            metrics.RATE_LIMITED.labels(connector, scope, target, "")
        if config.access:
            metrics.DENIED.labels("tools/call", connector, target, "")
