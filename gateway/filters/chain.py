"""The filter chain of a config, built explicitly and in order (outermost first).

:func:`build_filters` runs at start-up and again on a reload of a policy section; the
:class:`gateway.app.Gateway` installs what it returns in its dispatcher, started by
:func:`start_filters` (nothing stays started when one fails) and, once replaced or at the
gateway's stop, stopped by :func:`stop_filters`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from gateway.audit.writer import AuditWriter
from gateway.auth.apikeys import secret_digests
from gateway.catalog import Catalog
from gateway.config import GatewayConfig
from gateway.filters import Filter
from gateway.filters.audit import AuditFilter
from gateway.filters.auth import AccessFilter
from gateway.filters.cache import ResponseCacheFilter
from gateway.filters.ratelimit import RateLimitFilter
from gateway.filters.telemetry import TelemetryFilter
from gateway.filters.timeout import TimeoutFilter
from gateway.policy import AccessPolicy
from gateway.protocol.errors import GatewayError
from gateway.telemetry import metrics, tracing

__all__ = ["build_filters", "start_filters", "stop_filters"]

# A filter failing to stop is logged as the gateway's (gateway.app, as before these moved here).
_app_log = logging.getLogger("gateway.app")


def build_filters(config: GatewayConfig, catalog: Catalog) -> list[Filter]:
    """The filter chain, outermost first: telemetry → audit → auth → ratelimit → cache → timeout.

    Each filter is built only when its feature is on, so a disabled feature costs nothing per
    call. Telemetry is outermost so it also counts rejections; audit sits outside auth so denied
    attempts are recorded; auth runs before rate limiting so limits key on the principal.
    """
    tracing.configure(config.telemetry)
    chain: list[Filter] = []
    if config.telemetry.metrics or tracing.enabled():
        chain.append(TelemetryFilter(catalog, metrics_on=tracing.metrics_enabled(), principals=metrics.PrincipalLabels(
            config.telemetry.metrics_principal_label, config.telemetry.metrics_max_principals)))
    if config.audit.enabled:
        digests = secret_digests(config.auth.api_keys, config.base_dir)
        key = config.audit.digest_key or config.gateway.cursor_secret
        chain.append(AuditFilter(AuditWriter(config.audit, config.base_dir, digests, digest_key=key)))
    if config.access:
        chain.append(AccessFilter(AccessPolicy(config.access), catalog.access_name, catalog.owner))
    concurrency = {c.name: c.max_concurrency for c in config.connectors if c.max_concurrency}
    if config.rate_limits.rules or concurrency:
        chain.append(RateLimitFilter(config.rate_limits, catalog.owner, concurrency))
    caches = {c.name: c.cache for c in config.connectors if c.cache is not None}
    if caches:
        chain.append(ResponseCacheFilter(caches, _tool_lookup(catalog)))
    chain.append(TimeoutFilter())
    return chain


def _tool_lookup(catalog: Catalog) -> Callable[[str], tuple[str, dict[str, Any]] | None]:
    """The response cache's view of the catalog: a public tool's connector and definition."""
    def lookup(name: str) -> tuple[str, dict[str, Any]] | None:
        try:
            entry = catalog.tool(name)
        except GatewayError:
            return None
        return entry.connector.name, entry.wire
    return lookup


async def start_filters(filters: list[Filter]) -> None:
    """Start each filter that has a ``start``, in chain order; when one fails, those already
    started are stopped (:func:`stop_filters`) and the failure raised."""
    started: list[Filter] = []
    try:
        for flt in filters:
            start = getattr(flt, "start", None)
            if start is not None:
                await start()
            started.append(flt)
    except BaseException:
        await stop_filters(started)
        raise


async def stop_filters(filters: list[Filter]) -> None:
    """Stop each filter that has a ``stop``, innermost first; a failure is logged, never raised."""
    for flt in reversed(filters):
        stop = getattr(flt, "stop", None)
        if stop is not None:
            try:
                await stop()
            except Exception:
                _app_log.exception("stopping filter %s failed", type(flt).__name__)
