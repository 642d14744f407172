"""Readiness detail: what ``/readyz?verbose=1`` (and the metrics port's ``/readyz``) reports.

The gateway's state, every connector's health (a failed start with its retry state, a connector
down with its own), the names a collision left out, the shared store's replica, and the backends of
the filter chain that are configured: the rate-limit backend and the audit store. Read from the
gateway through :class:`ReadinessSource`; :func:`probe_backends` keeps the rate-limit backend's
health current while no call reaches it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from connectors.base import Connector
from gateway.catalog import Catalog
from gateway.config import GatewayConfig
from gateway.filters import Filter
from gateway.filters.audit import AuditFilter
from gateway.filters.ratelimit import RateLimitFilter
from gateway.startup import StartRetries
from gateway.state import StateStore

__all__ = ["ReadinessSource", "readiness_detail", "probe_backends"]


class ReadinessSource(Protocol):
    """What the readiness detail reads of a gateway."""

    @property
    def config(self) -> GatewayConfig: ...
    @property
    def ready(self) -> bool: ...
    @property
    def draining(self) -> bool: ...
    @property
    def sessions(self) -> Mapping[str, object]: ...
    @property
    def connectors(self) -> Mapping[str, Connector]: ...
    @property
    def failed(self) -> Mapping[str, str]: ...
    @property
    def last_errors(self) -> Mapping[str, str]: ...
    @property
    def retries(self) -> StartRetries: ...
    @property
    def catalog(self) -> Catalog: ...
    @property
    def state(self) -> StateStore: ...
    @property
    def filters(self) -> Sequence[Filter]: ...


def readiness_detail(gw: ReadinessSource) -> dict[str, Any]:
    """The gateway's state, every connector's health, and the backends of the filter chain that
    are configured: the rate-limit backend (``rate_limit``) and the audit store (``audit``; while it
    is down, events are spilled to a file, not lost)."""
    connectors: dict[str, Any] = {}
    for cfg in gw.config.connectors:
        if cfg.name in gw.failed:
            retry = gw.retries.state(cfg.name)
            entry: dict[str, Any] = {"up": False, "detail": retry["last_error"] if retry else gw.failed[cfg.name]}
        elif cfg.name in gw.connectors:
            h = gw.connectors[cfg.name].health()
            entry = {"up": h.up, "detail": h.detail} if h.detail else {"up": h.up}
            retry = h.extra.get("retry") if not h.up else None
        else:
            continue
        if retry is not None:  # attempts, last_error, next_attempt_in_s
            entry["retry"] = retry
        if cfg.name in gw.last_errors:
            entry["last_error"] = gw.last_errors[cfg.name]
        connectors[cfg.name] = entry
    out: dict[str, Any] = {"ready": gw.ready and not gw.draining, "draining": gw.draining,
                           "sessions": len(gw.sessions), "connectors": connectors}
    if gw.catalog.collisions:  # names left out (gateway.names.on_collision: keep_first)
        out["collisions"] = list(gw.catalog.collisions)
    if gw.state.shared:  # which replica answers, and how much it asked of the shared store
        out["state"] = {"replica": gw.state.replica, "store_ops": gw.state.ops}
    for flt in gw.filters:
        if isinstance(flt, RateLimitFilter) and flt.limits:
            out["rate_limit"] = flt.health()
        elif isinstance(flt, AuditFilter) and (store := flt.writer.store) is not None:
            writer = flt.writer
            audit: dict[str, Any] = {"store": store.dialect, "up": writer.store_up}
            if not writer.store_up:
                audit["detail"] = f"store unavailable: events are spilled to {writer.spill_path}"
            out["audit"] = audit
    return out


async def probe_backends(filters: Callable[[], Sequence[Filter]], every_s: float) -> None:
    """Keep the rate-limit backend's health current while no call reaches it (the audit writer
    retries its store by itself): every ``every_s`` seconds, for the filters in place then."""
    while True:
        for flt in list(filters()):
            if isinstance(flt, RateLimitFilter) and flt.limits:
                await flt.probe()
        await asyncio.sleep(every_s)
