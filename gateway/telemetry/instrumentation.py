"""The gateway's side of the connector instrumentation port (:mod:`connectors.instrumentation`).

The app starts every connector with ``ConnectorInstrumentation(name, kind)``: backend calls become
CLIENT spans (:func:`gateway.telemetry.tracing.backend_call`) and observations of
``backend_call_duration_seconds{connector, kind, outcome}``; trace context is injected from the
current span, or from the caller's ``traceparent`` when tracing is off.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from contextlib import AbstractContextManager
from typing import Any

from connectors.instrumentation import BackendCall
from gateway.telemetry import tracing

__all__ = ["ConnectorInstrumentation"]


class ConnectorInstrumentation:
    """Implements :class:`connectors.instrumentation.Instrumentation` for one connector."""

    __slots__ = ("connector", "kind")

    def __init__(self, connector: str, kind: str) -> None:
        self.connector = connector
        self.kind = kind

    @property
    def recording(self) -> bool:
        return tracing.tracer() is not None

    def backend_call(self, name: str, attributes: Mapping[str, Any] | None = None
                     ) -> AbstractContextManager[BackendCall]:
        return tracing.backend_call(self.connector, self.kind, name, attributes)

    def inject(self, headers: MutableMapping[str, str]) -> MutableMapping[str, str]:
        return tracing.inject(headers)

    def traceparent(self) -> str | None:
        return tracing.meta_traceparent()
