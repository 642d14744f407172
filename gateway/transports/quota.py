"""The session cap of the HTTP transports: sessions open at once, in all and per principal.

A Streamable HTTP session takes a place when its ``initialize`` arrives (so a burst of concurrent
initializes cannot overshoot) and gives it back when the initialize fails or the session ends
(DELETE, idle expiry, shutdown); a legacy SSE session holds one while its stream is open. The limits
are read from ``gateway.http`` at each admission, so a reload applies to the next session. A refusal
names the limit: ``503`` for ``max_sessions``, ``429`` for ``max_sessions_per_principal`` (without
auth every caller is the one principal ``anonymous``, so that limit bounds them all). 2026-07-28
requests open no session and are not counted.

With one process (``state.store: memory``) the places are counted here. When replicas share a
store, the limits hold across them: the places live in the store (:meth:`StateStore.claim_place`:
pruned, counted and taken in one atomic step), each named by its session id and expiring with the
session's record unless refreshed with it (:meth:`refresh`, from the transport's touch of the
record). So a place is freed by DELETE (:meth:`end`), by a failed initialize, or when the record
expires (idle, or every replica serving it died), never by one replica closing its copy of a
session that lives on (a rollout, :meth:`release` is then a no-op). A store that cannot be reached
refuses the session (503): admitting it uncounted would let a store outage lift the cap.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from gateway.config import HttpConfig
from gateway.context import Principal
from gateway.protocol.errors import INTERNAL_ERROR, RATE_LIMITED
from gateway.state import StateStore
from gateway.telemetry import metrics

__all__ = ["SessionQuota", "QuotaRefusal"]

log = logging.getLogger("gateway.quota")

ALL = "all"


@dataclass(frozen=True, slots=True)
class QuotaRefusal:
    """An HTTP status, the JSON-RPC code of the error body, and a message naming the limit."""

    status: int
    code: int
    message: str


def _scope(principal: Principal) -> str:
    return f"p:{principal.kind}:{principal.name}"


class SessionQuota:
    def __init__(self, limits: Callable[[], HttpConfig], store: StateStore | None = None,
                 ttl_s: Callable[[], float] = lambda: 3600.0) -> None:
        self._limits = limits
        self.total = 0
        self.by_principal: dict[tuple[str, str], int] = {}
        # Set when replicas share a store: the places are counted there.
        self.store = store if store is not None and store.shared else None
        self._ttl_s = ttl_s

    async def acquire(self, principal: Principal, member: str) -> QuotaRefusal | None:
        """Take a place for session ``member`` of ``principal``, or say which limit refuses it."""
        http = self._limits()
        if self.store is None:
            held = self.by_principal.get((principal.kind, principal.name), 0)
            refused = self._refusal(principal, http, held, self.total)
            if refused is None:
                self.total += 1
                self.by_principal[(principal.kind, principal.name)] = held + 1
            return refused
        try:
            full = await self.store.claim_place(
                [(_scope(principal), http.max_sessions_per_principal), (ALL, http.max_sessions)], member, self._ttl_s())
        except Exception as exc:
            log.warning("session cap: the state store failed: %r", exc)
            metrics.HTTP_REFUSED.labels("max_sessions").inc()
            return QuotaRefusal(503, INTERNAL_ERROR, "Service Unavailable: the session store cannot be reached "
                                "to count sessions (gateway.http.max_sessions); retry later")
        if full is None:
            return None
        index, count = full
        return self._refusal(principal, http, count if index == 0 else 0, count if index == 1 else 0)

    @staticmethod
    def _refusal(principal: Principal, http: HttpConfig, held: int, total: int) -> QuotaRefusal | None:
        if held >= http.max_sessions_per_principal:
            metrics.HTTP_REFUSED.labels("max_sessions_per_principal").inc()
            return QuotaRefusal(429, RATE_LIMITED, f"Too Many Requests: principal {principal.name!r} already holds "
                                f"{held} sessions (gateway.http.max_sessions_per_principal = "
                                f"{http.max_sessions_per_principal}); end one (DELETE) or reuse it")
        if total >= http.max_sessions:
            metrics.HTTP_REFUSED.labels("max_sessions").inc()
            return QuotaRefusal(503, INTERNAL_ERROR, f"Service Unavailable: {total} sessions are open "
                                f"(gateway.http.max_sessions = {http.max_sessions}); retry later")
        return None

    def release(self, principal: Principal) -> None:
        """This process's copy of a session closed. In-process: its place is free again. Shared:
        nothing (the session may live on elsewhere; its place goes with :meth:`end` or its record)."""
        if self.store is not None:
            return
        key = (principal.kind, principal.name)
        held = self.by_principal.get(key, 0)
        if held <= 0:
            return
        self.total -= 1
        if held == 1:
            del self.by_principal[key]
        else:
            self.by_principal[key] = held - 1

    async def end(self, principal: Principal, member: str) -> None:
        """The session ``member`` ended everywhere (DELETE, a failed initialize, a closed SSE
        stream): its shared place is free again. A store error is logged (the place expires)."""
        if self.store is None:
            return
        try:
            await self.store.release_place([_scope(principal), ALL], member)
        except Exception as exc:
            log.warning("session cap: freeing the place of %s failed (it expires): %r", member, exc)

    async def refresh(self, principal: Principal, member: str) -> None:
        """The session's record was kept alive: keep its shared place as long."""
        if self.store is not None:
            await self.store.refresh_place([_scope(principal), ALL], member, self._ttl_s())
