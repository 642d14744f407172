"""Fill a :class:`~.view.StatusView` from the running gateway (the one I/O: the audit store).

The gateway is seen through :class:`StatusSource` (what it already exposes: config, connectors,
catalog, sessions, filter chain, health), never changed. Recent audit events are read with one
bounded query (newest first, :data:`~.view.AUDIT_SHOWN` rows, :data:`AUDIT_TIMEOUT_S`) on the
filter chain's own store: a slow or dead store makes that part say so, not the page wait or fail.
Events still queued in the writer (up to ``audit.flush_interval_s`` old) are not shown yet.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import select

from connectors.base import Connector
from gateway.audit.store import AuditStore, events_table
from gateway.catalog import Catalog
from gateway.config import GatewayConfig
from gateway.filters import Filter
from gateway.filters.audit import AuditFilter
from gateway.filters.ratelimit import RateLimitFilter
from gateway.session import Session
from gateway.telemetry import metrics

from .view import (
    AUDIT_SHOWN,
    MAX_SESSIONS_SHOWN,
    AuditPart,
    AuditRow,
    CatalogRow,
    ConnectorRow,
    RateLimitPart,
    RuleRow,
    SessionGroup,
    SessionRow,
    StatusQuery,
    StatusView,
    scrub,
    search,
)

__all__ = ["StatusSource", "collect", "AUDIT_TIMEOUT_S"]

AUDIT_TIMEOUT_S = 2.0
_KINDS = (("tools", "tool"), ("resources", "resource"), ("resourceTemplates", "template"), ("prompts", "prompt"))


class StatusSource(Protocol):
    """What the status page reads of a running gateway (the :class:`~gateway.app.Gateway` has it)."""

    config: GatewayConfig
    connectors: dict[str, Connector]
    failed: dict[str, str]
    catalog: Catalog
    sessions: dict[str, Session]
    filters: list[Filter]
    started_at: float
    config_loaded_at: float

    def health(self) -> dict[str, Any]: ...


async def collect(source: StatusSource, query: StatusQuery) -> StatusView:
    """The page's content now, with the catalog searched and paged as ``query`` asks."""
    now = time.time()
    health = source.health()
    rows = _catalog_rows(source.catalog)
    counts = _counts_by_connector(rows)
    audit = await _audit(source.filters)
    return StatusView(
        name=source.config.gateway.name, version=source.config.gateway.version,
        ready=bool(health.get("ready")), draining=bool(health.get("draining")),
        started_at=source.started_at, config_loaded_at=source.config_loaded_at, now=now,
        connectors=_connectors(source, health, counts),
        catalog=search(rows, query), catalog_counts=source.catalog.counts(),
        sessions_total=len(source.sessions), session_groups=_session_groups(source.sessions.values()),
        sessions=_session_rows(source.sessions.values()), audit=audit,
        rate_limit=_rate_limit(source.config, source.filters),
        collisions=tuple(scrub(c, 400) for c in source.catalog.collisions))


def _catalog_rows(catalog: Catalog) -> list[CatalogRow]:
    out: list[CatalogRow] = []
    for key, kind in _KINDS:
        for entry in catalog.snapshot(key).entries:
            wire = entry.wire
            text = wire.get("description") or wire.get("title") or ""
            out.append(CatalogRow(kind, entry.key, entry.connector.name, scrub(str(text))))
    return out


def _counts_by_connector(rows: Sequence[CatalogRow]) -> Mapping[tuple[str, str], int]:
    return Counter((r.connector, "resource" if r.kind == "template" else r.kind) for r in rows)


def _reconnects(name: str) -> int:
    value = metrics.REGISTRY.get_sample_value(f"{metrics.NAMESPACE}_connector_reconnects_total", {"connector": name})
    return int(value or 0)


def _connectors(source: StatusSource, health: dict[str, Any],
                counts: Mapping[tuple[str, str], int]) -> tuple[ConnectorRow, ...]:
    out = []
    for cfg in source.config.connectors:
        state = health.get("connectors", {}).get(cfg.name, {"up": False, "detail": "not started"})
        up = bool(state.get("up"))
        detail = str(state.get("detail") or "")
        # Up: the detail is ordinary state. Down: it is the error, and the state is the retry.
        last_error = str(state.get("last_error") or "") if up else detail
        out.append(ConnectorRow(cfg.name, cfg.type, up, scrub(detail if up else _retry(state.get("retry"))),
                                scrub(last_error), counts.get((cfg.name, "tool"), 0),
                                counts.get((cfg.name, "resource"), 0), counts.get((cfg.name, "prompt"), 0),
                                _reconnects(cfg.name)))
    return tuple(out)


def _retry(retry: Any) -> str:
    """A down connector's retry, in words: "retrying: attempt 3 failed, next attempt in 4.0 s"."""
    if not isinstance(retry, dict):
        return "down"
    words = f"retrying: attempt {retry.get('attempts', 0)} failed"
    if "next_attempt_in_s" in retry:
        words += f", next attempt in {retry['next_attempt_in_s']} s"
    return words


def _session_groups(sessions: Any) -> tuple[SessionGroup, ...]:
    groups = Counter((s.transport, s.protocol_version) for s in sessions)
    return tuple(SessionGroup(t, r, n) for (t, r), n in sorted(groups.items()))


def _session_rows(sessions: Any) -> tuple[SessionRow, ...]:
    now = time.monotonic()
    recent = sorted(sessions, key=lambda s: s.last_active, reverse=True)[:MAX_SESSIONS_SHOWN]
    out = []
    for s in recent:
        info = s.client_info if isinstance(getattr(s, "client_info", None), dict) else {}
        client = " ".join(str(info.get(k, "")) for k in ("name", "version")).strip()
        out.append(SessionRow(s.principal.name, s.transport, s.protocol_version, scrub(client, 80),
                              str(s.state), max(0.0, now - s.last_active)))
    return tuple(out)


async def _audit(filters: Sequence[Filter]) -> AuditPart:
    store = next((f.writer.store for f in filters if isinstance(f, AuditFilter)), None)
    if store is None:
        return AuditPart("off", "no audit store is configured (audit.enabled is false or audit.store is none)")
    try:
        async with asyncio.timeout(AUDIT_TIMEOUT_S):
            rows = await _recent(store, AUDIT_SHOWN)
    except Exception as exc:  # whatever the driver raises: the page says the store did not answer
        detail = f"it did not answer within {AUDIT_TIMEOUT_S:g} s" if isinstance(exc, TimeoutError) \
            else type(exc).__name__  # the driver's message may quote the DSN: not shown
        return AuditPart("unavailable", f"the audit store ({store.dialect}) is unavailable: {detail}")
    return AuditPart("ok", f"{store.dialect}, newest first", tuple(rows))


async def _recent(store: AuditStore, limit: int) -> list[AuditRow]:
    """The newest ``limit`` events (the store's ``query`` reads oldest first, for exports)."""
    t = events_table.c
    stmt = select(t.time, t.principal, t.method, t.target, t.outcome, t.latency_ms) \
        .order_by(t.time.desc(), t.id.desc()).limit(limit)
    async with store.engine.connect() as conn:
        result = (await conn.execute(stmt)).all()
    out = []
    for when, principal, method, target, outcome, latency in result:
        stamp = when.isoformat(timespec="seconds") if isinstance(when, datetime) else str(when)
        out.append(AuditRow(stamp.replace("+00:00", "Z"), str(principal or ""), str(method or ""),
                            scrub(str(target or ""), 120), str(outcome or ""),
                            float(latency) if latency is not None else None))
    return out


def _rate_limit(config: GatewayConfig, filters: Sequence[Filter]) -> RateLimitPart | None:
    flt = next((f for f in filters if isinstance(f, RateLimitFilter)), None)
    if flt is None:
        return None
    rules = tuple(RuleRow(r.scope, r.match, r.rate, "" if r.burst is None else str(r.burst), r.per_principal)
                  for r in config.rate_limits.rules)
    concurrency = tuple((c.name, c.max_concurrency) for c in config.connectors if c.max_concurrency)
    health = flt.health()
    return RateLimitPart(flt.backend_name, bool(health["up"]), scrub(str(health.get("detail") or "")),
                         flt.breaker.state if flt.breaker is not None else "", config.rate_limits.on_backend_error,
                         rules, concurrency, flt.limited, flt.backend_errors)
