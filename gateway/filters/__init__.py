"""The filter chain: one signature, one composer.

A filter is any object with ``async def __call__(ctx, call_next) -> dict``; ``call_next(ctx)`` runs
the rest of the chain and finally the catalog. Filters may refuse (raise a ProtocolError), time,
record (in ``ctx.record``), or pass a narrowed copy of the context (``dataclasses.replace``)
inward. A filter may also have ``async start()`` and ``async stop()``, which the gateway calls
when the chain is installed and replaced.

The chain is built explicitly by :func:`gateway.filters.chain.build_filters`, once at start-up and again on
a reload that changes policy, outermost first:

    telemetry → audit → auth → ratelimit → cache → timeout → catalog

Each filter is constructed with exactly what it uses (its config section, a catalog function);
a disabled feature leaves its filter out, so it costs nothing per call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from gateway.context import CallContext

__all__ = ["Handler", "Filter", "compose", "SESSION_METHODS"]

Handler = Callable[[CallContext], Awaitable[dict[str, Any]]]

# Methods the session serves itself. They travel the chain so that they are traced, counted and
# audited (who connected, with which client); policy filters let them through, because a client
# must be able to connect and learn what it may do before any budget applies.
SESSION_METHODS = frozenset({"initialize", "logging/setLevel"})


class Filter(Protocol):
    async def __call__(self, ctx: CallContext, call_next: Handler) -> dict[str, Any]: ...


def compose(filters: Sequence[Filter], endpoint: Handler) -> Handler:
    """Fold filters around the endpoint, the first filter outermost."""
    handler = endpoint
    for flt in reversed(filters):
        handler = _bind(flt, handler)
    return handler


def _bind(flt: Filter, call_next: Handler) -> Handler:
    # Not a coroutine of its own: the filter's is awaited directly (one frame less per filter,
    # resumed on every await of every call).
    def run(ctx: CallContext) -> Awaitable[dict[str, Any]]:
        return flt(ctx, call_next)

    return run
