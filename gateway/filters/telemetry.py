"""Telemetry filter, the outermost one: a span and the request metrics for every MCP request.

Outermost so that what auth, rate limits and timeouts refuse is counted and traced too. Per
request it

* opens a SERVER span named ``{method} {target}`` (target only when low-cardinality: a tool or
  prompt name) whose parent is the client's W3C ``traceparent`` (``ctx.traceparent``, filled by
  dispatch from the HTTP header or ``params._meta.traceparent``), with the MCP semantic attributes
  (``mcp.method.name``, ``gen_ai.tool.name``, ``mcp.session.id``, ``enduser.id``, outcome, ...);
* counts ``requests_total`` and observes ``request_duration_seconds`` by method, connector, public
  target and outcome, and counts rate-limited and denied calls with the tool they named (a name
  the catalog does not know is ``_unknown``); with ``telemetry.metrics_principal_label`` the
  counters (not the histogram) also carry the principal or its group, capped
  (:class:`gateway.telemetry.metrics.PrincipalLabels`);
* records ``ctx.record.outcome`` when no inner layer did.

The gateway leaves the filter out of the chain when metrics and tracing are both off, so
telemetry then costs nothing; with tracing off and metrics on the same path runs without spans.
The scrape-time state (sessions, connector health, catalog sizes) and the metrics port belong to
the gateway (:mod:`gateway.app`), not to this filter.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from gateway.catalog import Catalog
from gateway.context import CallContext
from gateway.filters import Handler
from gateway.protocol.errors import (
    ACCESS_DENIED,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RATE_LIMITED,
    REQUEST_CANCELLED,
    REQUEST_TIMEOUT,
    RESOURCE_NOT_FOUND,
    ProtocolError,
    RateLimited,
)
from gateway.telemetry import metrics, tracing

__all__ = ["TelemetryFilter", "outcome_of"]

_NAMED = ("tools/call", "prompts/get")
_RESOURCE = ("resources/read", "resources/subscribe", "resources/unsubscribe")
_SCOPES = frozenset({"principal", "tool", "connector", "global", "backend"})
_NET = {"stdio": "pipe"}


# Same classification as the audit log, so a dashboard and an audit query count the same things.
_OUTCOME_BY_CODE = {
    ACCESS_DENIED: "denied", RATE_LIMITED: "rate_limited", INVALID_PARAMS: "invalid",
    INVALID_REQUEST: "invalid", PARSE_ERROR: "invalid", METHOD_NOT_FOUND: "not_found",
    RESOURCE_NOT_FOUND: "not_found", REQUEST_TIMEOUT: "timeout", REQUEST_CANCELLED: "cancelled",
}


def outcome_of(exc: BaseException) -> str:
    """The ``outcome`` label of a request that raised ``exc``."""
    if isinstance(exc, ProtocolError):
        return _OUTCOME_BY_CODE.get(exc.code, "error")
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    return "error"


class TelemetryFilter:
    """Spans and request metrics; built with the catalog, which names what a call reached."""

    def __init__(self, catalog: Catalog, metrics_on: bool = True,
                 principals: metrics.PrincipalLabels | None = None) -> None:
        self.catalog = catalog
        self.metrics_on = metrics_on
        self.principals = principals or metrics.PrincipalLabels()
        # labels() validates and locks on each call; the children are cached per label tuple.
        self._children: dict[tuple[str, str, str, str, str], tuple[Any, Any]] = {}

    async def __call__(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        method = ctx.method
        tracer = tracing.tracer()
        span: Span | None = None
        token: contextvars.Token[Any] | None = None
        incoming: contextvars.Token[str | None] | None = None
        if tracer is not None:
            span = tracer.start_span(method, context=tracing.extract(ctx.traceparent), kind=SpanKind.SERVER,
                                     attributes=self._span_attributes(ctx))
            token = otel_context.attach(trace.set_span_in_context(span))
            sc = span.get_span_context()
            if sc.is_valid:  # for the audit event of this call (audit sits inside this filter)
                ctx.record.trace_id = format(sc.trace_id, "032x")
        else:
            # Tracing off: still remember the client's traceparent so connectors pass it on.
            incoming = tracing.set_incoming(ctx.traceparent) if ctx.traceparent else None
        start = time.perf_counter()
        if self.metrics_on:
            metrics.IN_FLIGHT.inc()
        outcome = "ok"
        try:
            result = await call_next(ctx)
            outcome = ctx.record.outcome or "ok"
            return result
        except BaseException as exc:
            outcome = self._failed(ctx, exc)
            if span is not None and span.is_recording():
                _mark_failed(span, exc, outcome)
            raise
        finally:
            elapsed = time.perf_counter() - start
            connector, target = self._labels(ctx, outcome)
            if span is not None:
                if span.is_recording():
                    self._finish_span(span, ctx, connector, target, outcome)
                if token is not None:
                    otel_context.detach(token)
                span.end()
            elif incoming is not None:
                tracing.reset_incoming(incoming)
            self._record(ctx, method, connector, target, outcome, elapsed)

    @staticmethod
    def _span_attributes(ctx: CallContext) -> dict[str, Any]:
        method = ctx.method
        attrs: dict[str, Any] = {
            "mcp.method.name": method,
            "mcp.session.id": ctx.session.id,
            "jsonrpc.request.id": str(ctx.request_id),
            "network.transport": _NET.get(ctx.session.transport, "tcp"),
            "enduser.id": ctx.principal.name,
            "mcp.gateway.transport": ctx.session.transport,
        }
        if ctx.session.protocol_version:
            attrs["mcp.protocol.version"] = ctx.session.protocol_version
        if ctx.endpoint:  # an endpoint (virtual server) of gateway.endpoints
            attrs["mcp.gateway.endpoint"] = ctx.endpoint
        if method == "tools/call":
            attrs["gen_ai.tool.name"] = ctx.target
            attrs["gen_ai.operation.name"] = "execute_tool"
        elif method == "prompts/get":
            attrs["gen_ai.prompt.name"] = ctx.target
        elif method in _RESOURCE:
            attrs["mcp.resource.uri"] = ctx.target
        return attrs

    @staticmethod
    def _finish_span(span: Span, ctx: CallContext, connector: str, target: str, outcome: str) -> None:
        if ctx.method in _NAMED and target and target != metrics.OTHER:
            span.update_name(f"{ctx.method} {target}")
        if connector:
            span.set_attribute("mcp.gateway.connector", connector)
        span.set_attribute("mcp.gateway.outcome", outcome)
        if outcome == "tool_error":
            # MCP semantic conventions: a tool result with isError is an error span.
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR))
            status = ctx.record.backend_status
            if status is not None:
                span.set_attribute("mcp.gateway.backend_status", str(status))

    @staticmethod
    def _failed(ctx: CallContext, exc: BaseException) -> str:
        outcome = outcome_of(exc)
        if isinstance(exc, RateLimited) and isinstance(exc.data, dict):
            if ctx.record.ratelimit_scope is None:
                ctx.record.ratelimit_scope = exc.data.get("scope")
        return outcome

    def _record(self, ctx: CallContext, method: str, connector: str, target: str, outcome: str,
                elapsed: float) -> None:
        if ctx.record.outcome is None:
            ctx.record.outcome = outcome
        if not self.metrics_on:
            return
        metrics.IN_FLIGHT.dec()
        principal = self.principals(ctx.principal.name, ctx.principal.groups)
        key = (method, connector, target, outcome, principal)
        children = self._children.get(key)
        if children is None:
            labels = (metrics.method_label(method), connector, target, outcome)
            children = (metrics.REQUESTS.labels(*labels, principal), metrics.REQUEST_DURATION.labels(*labels))
            if len(self._children) < 4 * metrics.MAX_LABEL_VALUES:
                self._children[key] = children
        children[0].inc()
        children[1].observe(elapsed)
        if ctx.endpoint:  # endpoint names come from the config: bounded by it
            metrics.ENDPOINT_REQUESTS.labels(metrics.bounded("endpoint", ctx.endpoint), metrics.method_label(method),
                                             outcome).inc()
        if outcome in ("rate_limited", "denied"):
            # The tool a refused call named: the catalog's name, or one value for unknown names.
            tool = (target or metrics.UNKNOWN) if method == "tools/call" else ""
            if outcome == "rate_limited":
                scope = ctx.record.ratelimit_scope or ""
                metrics.RATE_LIMITED.labels(connector, scope if scope in _SCOPES else "other", tool,
                                            principal).inc()
            else:
                metrics.DENIED.labels(metrics.method_label(method), connector, tool, principal).inc()

    def _labels(self, ctx: CallContext, outcome: str) -> tuple[str, str]:
        """(connector, target) label values, both bounded: only names the catalog knows."""
        connector = ctx.record.connector or ""
        method = ctx.method
        target = ""
        catalog = self.catalog
        if method in _NAMED:
            entry = None
            if connector or outcome in ("denied", "rate_limited", "timeout", "cancelled"):
                try:
                    entry = catalog.tool(ctx.target) if method == "tools/call" else catalog.prompt(ctx.target)
                except Exception:
                    entry = None
            if entry is not None:
                target = entry.name
                connector = connector or entry.connector.name
        elif method in _RESOURCE and outcome != "not_found":
            # Listed resources by URI, template matches by template name: never a raw free URI.
            snap = catalog.snapshot("resources")
            entry = snap.by_key.get(ctx.target)
            if entry is not None:
                target, connector = entry.name, connector or entry.connector.name
            else:
                try:
                    owner, _local, name = catalog.resource_owner(ctx.target)
                except Exception:
                    owner, name = None, ctx.target
                if owner is not None:
                    connector = connector or owner.name
                    target = name if name != ctx.target else "_dynamic"
        if target:
            target = metrics.bounded("target", target)
        if connector:
            connector = metrics.bounded("connector", connector)
        return connector, target


def _mark_failed(span: Span, exc: BaseException, outcome: str) -> None:
    span.set_attribute("error.type", type(exc).__name__)
    if isinstance(exc, ProtocolError):
        span.set_attribute("rpc.response.status_code", str(exc.code))
    if outcome == "error":
        span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, str(exc)[:200]))
