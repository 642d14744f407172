"""The instrumentation port: how a connector traces and times the calls it makes to its backend.

A connector never imports the gateway's telemetry. It is started with an :class:`Instrumentation`
bound to its own name and kind (the gateway's implementation lives in
:mod:`gateway.telemetry.instrumentation`: OpenTelemetry CLIENT spans and the
``backend_call_duration_seconds`` histogram) and wraps every backend operation in
``with instrumentation.backend_call(name, attributes) as call:``. Inside the block,
:meth:`Instrumentation.inject` and :meth:`Instrumentation.traceparent` carry that call as the
parent of the backend's own trace. :data:`NO_INSTRUMENTATION` does nothing and is what a connector
has until it is started (and what unit tests give it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

__all__ = ["BackendCall", "Instrumentation", "NullInstrumentation", "NO_INSTRUMENTATION"]


class BackendCall(Protocol):
    """What a ``with instrumentation.backend_call(...) as call:`` block may record."""

    def status(self, code: int | str, error: bool | None = None) -> None:
        """The backend's own status (HTTP status, SQLSTATE, JSON-RPC code); HTTP >= 500 or
        ``error=True`` make the call an error in metrics and traces."""


class Instrumentation(Protocol):
    """Tracing and timing of one connector's backend calls (bound to its name and kind)."""

    @property
    def recording(self) -> bool:
        """Whether span attributes are recorded: when False, do not spend time building them."""

    def backend_call(self, name: str, attributes: Mapping[str, Any] | None = None
                     ) -> AbstractContextManager[BackendCall]:
        """Time one backend operation and trace it as a CLIENT span named ``name`` (``GET
        /pets/{id}``, ``SELECT``, ``tools/call search``). An exception leaving the block marks the
        call as failed (or cancelled)."""

    def inject(self, headers: MutableMapping[str, str]) -> MutableMapping[str, str]:
        """Add the current trace context (``traceparent``, ``tracestate``) to outgoing headers."""

    def traceparent(self) -> str | None:
        """The W3C ``traceparent`` of the current call, for an upstream MCP request's ``_meta``."""


class _NullCall:
    __slots__ = ()

    def status(self, code: int | str, error: bool | None = None) -> None:
        return None


_NULL_CALL = _NullCall()


class NullInstrumentation:
    """Instrumentation that records nothing."""

    __slots__ = ()

    @property
    def recording(self) -> bool:
        return False

    @contextmanager
    def backend_call(self, name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[BackendCall]:
        yield _NULL_CALL

    def inject(self, headers: MutableMapping[str, str]) -> MutableMapping[str, str]:
        return headers

    def traceparent(self) -> str | None:
        return None


NO_INSTRUMENTATION: Instrumentation = NullInstrumentation()
