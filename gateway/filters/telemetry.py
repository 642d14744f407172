"""Telemetry filter, the outermost one: a span and the request metrics for every MCP request.

Outermost so that what auth, rate limits and timeouts refuse is counted and traced too. Per
request it

* opens a SERVER span named ``{method} {target}`` (target only when low-cardinality: a tool or
  prompt name) whose parent is the client's W3C ``traceparent`` (``ctx.traceparent``, filled by
  dispatch from the HTTP header or ``params._meta.traceparent``), with the MCP semantic attributes
  (``mcp.method.name``, ``gen_ai.tool.name``, ``mcp.session.id``, ``enduser.id``, outcome, ...);
* counts ``requests_total`` and observes ``request_duration_seconds`` by method, connector, public
  target and outcome, and counts rate-limited and denied calls;
* records ``ctx.notes["outcome"]`` when no inner layer did.

``build(gw)`` returns None when metrics and tracing are both off, so telemetry then costs nothing.
The filter's ``start``/``stop`` register the gateway with the scrape-time collector (sessions,
connector health, catalog sizes), run the separate metrics server when ``telemetry.metrics_port``
is set, and flush queued spans at shutdown.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

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

if TYPE_CHECKING:
    from aiohttp import web

    from gateway.app import Gateway

__all__ = ["TelemetryFilter", "build", "outcome_of"]

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
    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.metrics_on = tracing.metrics_enabled()
        # labels() validates and locks on each call; the children are cached per label tuple.
        self._children: dict[tuple[str, str, str, str], tuple[Any, Any]] = {}
        self._metrics_runner: web.AppRunner | None = None
        self._metrics_port: int | None = None

    # -- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        metrics.STATE.add(self.gateway)
        metrics.BUILD_INFO.info({"version": str(self.gateway.config.gateway.version)})
        metrics.CONFIG_LAST_RELOAD.set_to_current_time()
        port = self.gateway.config.telemetry.metrics_port
        if not self.metrics_on or port is None:
            return
        # On reload the previous filter of this gateway still holds the port: take its server over.
        for other in self._siblings():
            if other._metrics_runner is not None and other._metrics_port == port:
                self._metrics_runner, other._metrics_runner = other._metrics_runner, None
                self._metrics_port = port
                return
        from gateway.telemetry.http import start_metrics_server

        self._metrics_runner = await start_metrics_server(self.gateway)
        self._metrics_port = port

    async def stop(self) -> None:
        # A reload stops the old filter after starting the new one: stay registered for it.
        if not self._siblings():
            metrics.STATE.discard(self.gateway)
        if self._metrics_runner is not None:
            await self._metrics_runner.cleanup()
            self._metrics_runner = None
        await asyncio.to_thread(tracing.force_flush)

    def _siblings(self) -> list[TelemetryFilter]:
        """Other telemetry filters of this gateway (the old or new chain during a reload)."""
        chain = getattr(self.gateway, "filters", ())
        return [f for f in chain if isinstance(f, TelemetryFilter) and f is not self]

    # -- per request --------------------------------------------------------------------------
    async def __call__(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        tracer = tracing.tracer()
        if tracer is None:
            return await self._untraced(ctx, call_next)
        method = ctx.method
        attrs: dict[str, Any] = {
            "mcp.method.name": method,
            "mcp.session.id": ctx.session.id,
            "mcp.protocol.version": ctx.session.protocol_version or None,
            "jsonrpc.request.id": str(ctx.request_id),
            "network.transport": _NET.get(ctx.session.transport, "tcp"),
            "enduser.id": ctx.principal.name,
            "mcp.gateway.transport": ctx.session.transport,
        }
        if method == "tools/call":
            attrs["gen_ai.tool.name"] = ctx.target
            attrs["gen_ai.operation.name"] = "execute_tool"
        elif method == "prompts/get":
            attrs["gen_ai.prompt.name"] = ctx.target
        elif method in _RESOURCE:
            attrs["mcp.resource.uri"] = ctx.target
        parent = tracing.extract(ctx.traceparent)
        span = tracer.start_span(method, context=parent, kind=SpanKind.SERVER,
                                 attributes={k: v for k, v in attrs.items() if v is not None})
        token = otel_context.attach(trace.set_span_in_context(span))
        sc = span.get_span_context()
        if sc.is_valid:  # for the audit event of this call (audit sits inside this filter)
            ctx.notes["trace_id"] = format(sc.trace_id, "032x")
        start = time.perf_counter()
        if self.metrics_on:
            metrics.IN_FLIGHT.inc()
        outcome = "ok"
        try:
            result = await call_next(ctx)
            outcome = ctx.notes.get("outcome") or "ok"
            return result
        except BaseException as exc:
            outcome = self._failed(ctx, exc)
            if span.is_recording():
                span.set_attribute("error.type", type(exc).__name__)
                if isinstance(exc, ProtocolError):
                    span.set_attribute("rpc.response.status_code", str(exc.code))
                if outcome == "error":
                    span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, str(exc)[:200]))
            raise
        finally:
            elapsed = time.perf_counter() - start
            connector, target = self._labels(ctx, outcome)
            if span.is_recording():
                if method in _NAMED and target and target != metrics.OTHER:
                    span.update_name(f"{method} {target}")
                if connector:
                    span.set_attribute("mcp.gateway.connector", connector)
                span.set_attribute("mcp.gateway.outcome", outcome)
                if outcome == "tool_error":
                    # MCP semantic conventions: a tool result with isError is an error span.
                    span.set_attribute("error.type", "tool_error")
                    span.set_status(Status(StatusCode.ERROR))
                    status = ctx.notes.get("backend_status")
                    if status is not None:
                        span.set_attribute("mcp.gateway.backend_status", str(status))
            otel_context.detach(token)
            span.end()
            self._record(ctx, method, connector, target, outcome, elapsed)

    async def _untraced(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]:
        # Tracing off: still remember the client's traceparent so connectors pass it on.
        token = tracing.set_incoming(ctx.traceparent) if ctx.traceparent else None
        start = time.perf_counter()
        if self.metrics_on:
            metrics.IN_FLIGHT.inc()
        outcome = "ok"
        try:
            result = await call_next(ctx)
            outcome = ctx.notes.get("outcome") or "ok"
            return result
        except BaseException as exc:
            outcome = self._failed(ctx, exc)
            raise
        finally:
            elapsed = time.perf_counter() - start
            if token is not None:
                tracing.reset_incoming(token)
            connector, target = self._labels(ctx, outcome)
            self._record(ctx, ctx.method, connector, target, outcome, elapsed)

    @staticmethod
    def _failed(ctx: CallContext, exc: BaseException) -> str:
        outcome = outcome_of(exc)
        if isinstance(exc, RateLimited) and isinstance(exc.data, dict):
            ctx.notes.setdefault("ratelimit_scope", exc.data.get("scope"))
        return outcome

    def _record(self, ctx: CallContext, method: str, connector: str, target: str, outcome: str,
                elapsed: float) -> None:
        ctx.notes.setdefault("outcome", outcome)
        if not self.metrics_on:
            return
        metrics.IN_FLIGHT.dec()
        key = (method, connector, target, outcome)
        children = self._children.get(key)
        if children is None:
            labels = (metrics.method_label(method), connector, target, outcome)
            children = (metrics.REQUESTS.labels(*labels), metrics.REQUEST_DURATION.labels(*labels))
            if len(self._children) < 4 * metrics.MAX_LABEL_VALUES:
                self._children[key] = children
        children[0].inc()
        children[1].observe(elapsed)
        if outcome == "rate_limited":
            scope = ctx.notes.get("ratelimit_scope") or ""
            metrics.RATE_LIMITED.labels(connector, scope if scope in _SCOPES else "other").inc()
        elif outcome == "denied":
            metrics.DENIED.labels(metrics.method_label(method), connector).inc()

    def _labels(self, ctx: CallContext, outcome: str) -> tuple[str, str]:
        """(connector, target) label values, both bounded: only names the catalog knows."""
        notes = ctx.notes
        connector = notes.get("connector") or ""
        method = ctx.method
        target = ""
        catalog = self.gateway.catalog
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


def build(gateway: Gateway) -> TelemetryFilter | None:
    tracing.configure(gateway.config.telemetry)
    if not gateway.config.telemetry.metrics and not tracing.enabled():
        return None
    return TelemetryFilter(gateway)
