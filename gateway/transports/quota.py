"""The session cap of the HTTP transports: sessions open at once, in all and per principal.

A Streamable HTTP session takes a place when its ``initialize`` arrives (so a burst of concurrent
initializes cannot overshoot) and gives it back when the initialize fails or the session ends
(DELETE, idle expiry, shutdown); a legacy SSE session holds one while its stream is open. The limits
are read from ``gateway.http`` at each admission, so a reload applies to the next session. A refusal
names the limit: ``503`` for ``max_sessions``, ``429`` for ``max_sessions_per_principal`` (without
auth every caller is the one principal ``anonymous``, so that limit bounds them all). 2026-07-28
requests open no session and are not counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gateway.config import HttpConfig
from gateway.context import Principal
from gateway.protocol.errors import INTERNAL_ERROR, RATE_LIMITED
from gateway.telemetry import metrics

__all__ = ["SessionQuota", "QuotaRefusal"]


@dataclass(frozen=True, slots=True)
class QuotaRefusal:
    """An HTTP status, the JSON-RPC code of the error body, and a message naming the limit."""

    status: int
    code: int
    message: str


class SessionQuota:
    def __init__(self, limits: Callable[[], HttpConfig]) -> None:
        self._limits = limits
        self.total = 0
        self.by_principal: dict[tuple[str, str], int] = {}

    def acquire(self, principal: Principal) -> QuotaRefusal | None:
        """Take a place for one session of ``principal``, or say which limit refuses it."""
        http = self._limits()
        key = (principal.kind, principal.name)
        held = self.by_principal.get(key, 0)
        if held >= http.max_sessions_per_principal:
            metrics.HTTP_REFUSED.labels("max_sessions_per_principal").inc()
            return QuotaRefusal(429, RATE_LIMITED, f"Too Many Requests: principal {principal.name!r} already holds "
                                f"{held} sessions (gateway.http.max_sessions_per_principal = "
                                f"{http.max_sessions_per_principal}); end one (DELETE) or reuse it")
        if self.total >= http.max_sessions:
            metrics.HTTP_REFUSED.labels("max_sessions").inc()
            return QuotaRefusal(503, INTERNAL_ERROR, f"Service Unavailable: {self.total} sessions are open "
                                f"(gateway.http.max_sessions = {http.max_sessions}); retry later")
        self.total += 1
        self.by_principal[key] = held + 1
        return None

    def release(self, principal: Principal) -> None:
        key = (principal.kind, principal.name)
        held = self.by_principal.get(key, 0)
        if held <= 0:
            return
        self.total -= 1
        if held == 1:
            del self.by_principal[key]
        else:
            self.by_principal[key] = held - 1
