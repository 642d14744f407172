"""OpenTelemetry tracing: set up once per process, off (and nearly free) unless configured.

:func:`configure` turns tracing on when ``telemetry.otlp_endpoint`` is set (OTLP over HTTP, batched,
sampled by ``trace_sample_ratio`` and respecting the caller's sampling decision) and off otherwise.
The provider is kept here rather than installed as the global OpenTelemetry provider, so a process
can reconfigure it (hot reload, tests) and third-party instrumentation cannot hijack it.

Helpers (all safe to call when tracing is off; connectors reach them only through the
instrumentation port, :mod:`gateway.telemetry.instrumentation`):

* ``with backend_call(connector, kind, name, attributes):`` a CLIENT child span of the current MCP
  request plus the ``backend_call_duration_seconds`` observation, in one statement;
* ``with span(name, attributes):`` a plain child span;
* :func:`inject` adds ``traceparent``/``tracestate`` to outgoing HTTP headers; :func:`meta_traceparent`
  gives the value to put in an upstream MCP request's ``params._meta.traceparent``;
* :func:`current_trace_id` is what logs and audit events record.

When tracing is off but the client sent a ``traceparent``, the telemetry filter still records it
(:func:`set_incoming`), and :func:`inject` passes it on unchanged, so a trace that started upstream
is not cut at the gateway.

Tests route spans to memory with ``with capture_spans() as exporter:``; while that is active,
:func:`configure` leaves the capturing provider alone.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import NonRecordingSpan, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.telemetry import metrics

__all__ = [
    "configure",
    "enabled",
    "metrics_enabled",
    "tracer",
    "shutdown",
    "force_flush",
    "extract",
    "span",
    "backend_call",
    "BackendCall",
    "inject",
    "meta_traceparent",
    "current_trace_id",
    "set_incoming",
    "reset_incoming",
    "capture_spans",
    "use_exporter",
]

log = logging.getLogger("gateway.telemetry")
_PROPAGATOR = TraceContextTextMapPropagator()
_INSTRUMENTATION = "mcp-gateway"


class _State:
    """Module state (one per process): the provider, its tracer, and the on/off switches."""

    __slots__ = ("provider", "tracer", "tracing", "metrics", "pinned", "key")

    def __init__(self) -> None:
        self.provider: TracerProvider | None = None
        self.tracer: trace.Tracer | None = None
        self.tracing = False
        self.metrics = True
        self.pinned = False  # capture_spans() active: configure() must not replace the provider
        self.key: tuple[Any, ...] | None = None


_state = _State()
_E = TypeVar("_E", bound=SpanExporter)
# The client's traceparent when tracing is off, so inject() can still pass it on.
_incoming: contextvars.ContextVar[str | None] = contextvars.ContextVar("mcp_gateway_traceparent",
                                                                       default=None)


def _new_provider(service_name: str, ratio: float, processor: SpanProcessor) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}),
                              sampler=ParentBased(TraceIdRatioBased(ratio)))
    provider.add_span_processor(processor)
    return provider


def configure(telemetry: Any) -> None:
    """Apply a ``TelemetryConfig``: tracing on iff ``otlp_endpoint`` is set; metrics per ``metrics``.

    Accepts the whole ``GatewayConfig`` too. Idempotent: the same settings keep the running
    provider (and its queued spans)."""
    telemetry = getattr(telemetry, "telemetry", telemetry)
    _state.metrics = bool(getattr(telemetry, "metrics", True))
    if _state.pinned:
        return
    endpoint = getattr(telemetry, "otlp_endpoint", None)
    key = (endpoint, getattr(telemetry, "service_name", "mcp-gateway"),
           float(getattr(telemetry, "trace_sample_ratio", 1.0)))
    if key == _state.key:
        return
    old = _state.provider
    _state.key = key
    if endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        # The OTLP/HTTP traces path is /v1/traces; accept a bare collector base URL too.
        url = endpoint if endpoint.rstrip("/").endswith("/v1/traces") else endpoint.rstrip("/") + "/v1/traces"
        provider = _new_provider(key[1], key[2], BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
        _install(provider)
        log.info("tracing on: OTLP/HTTP to %s, sample ratio %s", url, key[2])
    else:
        _install(None)
    if old is not None:
        old.shutdown()


def _install(provider: TracerProvider | None) -> None:
    _state.provider = provider
    _state.tracer = provider.get_tracer(_INSTRUMENTATION) if provider is not None else None
    _state.tracing = provider is not None


def enabled() -> bool:
    return _state.tracing


def metrics_enabled() -> bool:
    return _state.metrics


def tracer() -> trace.Tracer | None:
    return _state.tracer


def force_flush(timeout_s: float = 5.0) -> None:
    if _state.provider is not None:
        _state.provider.force_flush(int(timeout_s * 1000))


def shutdown() -> None:
    """Flush and stop the exporter (process exit)."""
    if _state.provider is not None and not _state.pinned:
        _state.provider.shutdown()
        _install(None)
        _state.key = None


@contextmanager
def use_exporter(exporter: _E, batch: bool = False, sample_ratio: float = 1.0) -> Iterator[_E]:
    """Send every span to ``exporter`` until the block ends (tests, benchmarks); meanwhile
    :func:`configure` leaves tracing alone. ``batch`` exports from a background thread, as OTLP does."""
    saved = (_state.provider, _state.tracer, _state.tracing, _state.pinned, _state.key)
    processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
    _install(_new_provider("mcp-gateway", sample_ratio, processor))
    _state.pinned = True
    try:
        yield exporter
    finally:
        assert _state.provider is not None
        _state.provider.shutdown()
        _state.provider, _state.tracer, _state.tracing, _state.pinned, _state.key = saved


@contextmanager
def capture_spans(sample_ratio: float = 1.0) -> Iterator[InMemorySpanExporter]:
    """Test helper: every span goes to an in-memory exporter until the block ends."""
    with use_exporter(InMemorySpanExporter(), sample_ratio=sample_ratio) as exporter:
        yield exporter


# -- context propagation ------------------------------------------------------------------------------
def extract(traceparent: str | None, tracestate: str | None = None) -> otel_context.Context | None:
    """An OpenTelemetry context whose parent is the W3C ``traceparent`` given (None if absent/invalid)."""
    if not traceparent:
        return None
    carrier = {"traceparent": traceparent}
    if tracestate:
        carrier["tracestate"] = tracestate
    ctx = _PROPAGATOR.extract(carrier)
    if not trace.get_current_span(ctx).get_span_context().is_valid:
        return None
    return ctx


def set_incoming(traceparent: str | None) -> contextvars.Token[str | None]:
    return _incoming.set(traceparent)


def reset_incoming(token: contextvars.Token[str | None]) -> None:
    _incoming.reset(token)


def inject(headers: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """Add the current trace context (``traceparent``, ``tracestate``) to outgoing headers."""
    if _state.tracing and trace.get_current_span().get_span_context().is_valid:
        _PROPAGATOR.inject(headers)
    else:
        incoming = _incoming.get()
        if incoming:
            headers["traceparent"] = incoming
    return headers


def meta_traceparent() -> str | None:
    """The ``traceparent`` to put in an upstream MCP request's ``params._meta`` (None: no trace)."""
    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier.get("traceparent")


def current_trace_id() -> str | None:
    """32 hex digits of the trace the current request belongs to, or None."""
    if _state.tracing:
        sc = trace.get_current_span().get_span_context()
        if sc.is_valid:
            return format(sc.trace_id, "032x")
    incoming = _incoming.get()
    if incoming and len(incoming) >= 35:
        return incoming[3:35]
    return None


# -- spans ------------------------------------------------------------------------------------------
@contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None,
         kind: SpanKind = SpanKind.INTERNAL) -> Iterator[Span | None]:
    """A child span of the current one (None when tracing is off); exceptions mark it as an error."""
    tr = _state.tracer
    if tr is None:
        yield None
        return
    sp = tr.start_span(name, kind=kind, attributes=_clean(attributes))
    token = otel_context.attach(trace.set_span_in_context(sp))
    try:
        yield sp
    except BaseException as exc:
        _record_error(sp, exc)
        raise
    finally:
        otel_context.detach(token)
        sp.end()


class BackendCall:
    """What a ``with backend_call(...) as call:`` block may record: ``call.span`` (None when tracing
    is off), ``call.status(code)`` for the backend's own status, ``call.outcome`` ("ok" | "error")."""

    __slots__ = ("span", "outcome")

    def __init__(self, span: Span | None) -> None:
        self.span = span
        self.outcome = "ok"

    def status(self, code: int | str, error: bool | None = None) -> None:
        """Record the backend's status (HTTP status, SQLSTATE, JSON-RPC code); HTTP >= 500 and any
        ``error=True`` make this call an error in the metrics and the span."""
        failed = error if error is not None else isinstance(code, int) and code >= 500
        if failed:
            self.outcome = "error"
        sp = self.span
        if sp is not None and sp.is_recording():
            if isinstance(code, int):
                sp.set_attribute("http.response.status_code", code)
            else:
                sp.set_attribute("db.response.status_code", str(code))
            if failed:
                sp.set_attribute("error.type", str(code))
                sp.set_status(Status(StatusCode.ERROR))


def backend_call(connector: str, kind: str, name: str,
                 attributes: Mapping[str, Any] | None = None) -> AbstractContextManager[BackendCall]:
    """Time one backend operation and trace it as a CLIENT span.

    ``kind`` is the connector kind (``openapi`` | ``sql`` | ``mcp`` ...); ``name`` is the span name
    (``GET /pets/{id}``, ``SELECT orders``, ``tools/call search``). Inside the block, headers built
    with :func:`inject` (and :func:`meta_traceparent`) carry this span as the parent. An exception
    leaving the block marks the call as an error (``cancelled`` for a cancellation).
    """
    return _BackendScope(connector, kind, name, attributes)


class _BackendScope:
    """:func:`backend_call`'s block: a class rather than a generator, as it wraps every backend
    call (entering and leaving a generator-based context manager costs several calls more)."""

    __slots__ = ("_connector", "_kind", "_name", "_attributes", "_start", "_call", "_span")

    def __init__(self, connector: str, kind: str, name: str, attributes: Mapping[str, Any] | None) -> None:
        self._connector, self._kind, self._name, self._attributes = connector, kind, name, attributes
        self._span: AbstractContextManager[Span | None] | None = None

    def __enter__(self) -> BackendCall:
        self._start = time.perf_counter()
        call = self._call = BackendCall(None)
        if _state.tracer is not None:  # on every call: no span machinery when tracing is off
            self._span = span(self._name, {"mcp.gateway.connector": self._connector, **(self._attributes or {})},
                              SpanKind.CLIENT)
            call.span = self._span.__enter__()
        return call

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        call = self._call
        if exc is not None:
            call.outcome = "cancelled" if isinstance(exc, asyncio.CancelledError) else "error"
        try:
            if self._span is not None:
                self._span.__exit__(exc_type, exc, tb)
        finally:
            if _state.metrics:
                _backend_duration(self._connector, self._kind, call.outcome).observe(time.perf_counter() - self._start)


_backend_children: dict[tuple[str, str, str], Any] = {}


def _backend_duration(connector: str, kind: str, outcome: str) -> Any:
    """The histogram child for these labels (``labels()`` validates and locks on every call)."""
    key = (connector, kind, outcome)
    child = _backend_children.get(key)
    if child is None:
        child = metrics.BACKEND_CALL_DURATION.labels(metrics.bounded("connector", connector), kind, outcome)
        if len(_backend_children) < 4 * metrics.MAX_LABEL_VALUES:
            _backend_children[key] = child
    return child


def _record_error(sp: Span, exc: BaseException) -> None:
    if isinstance(sp, NonRecordingSpan) or not sp.is_recording():
        return
    sp.set_attribute("error.type", type(exc).__qualname__)
    if isinstance(exc, Exception):
        sp.record_exception(exc)
    sp.set_status(Status(StatusCode.ERROR, str(exc)[:200]))


def _clean(attributes: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """OpenTelemetry rejects None values; drop them instead of logging a warning per call."""
    if not attributes:
        return None
    return {k: v for k, v in attributes.items() if v is not None}

