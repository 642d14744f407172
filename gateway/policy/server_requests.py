"""Caps on server→client requests (sampling, elicitation, roots): how many one call may send in
all, and how fast one session may send them. Pure: the caller passes the clock.

An upstream asks the client through the gateway; a hostile one could send a thousand sampling
requests in one tool call and have each reach the client (each a model call, or a dialog in front
of a person). :class:`ServerRequestBudget` belongs to one downstream session (for a 2026-07-28
client: to one call, which is all it has) and decides each request: within the call's total
(``max_per_call``) and within the session's GCRA bucket (``max_per_session_per_s``, ``burst``).
A refusal says which cap refused, and when the session's bucket will have room again.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from .rates import Rate, gcra_check

__all__ = ["ServerRequestBudget", "Refusal"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """Which cap refused (``call`` | ``session``), the cap, and seconds until a retry could pass
    (0 for the per-call cap: the call will never have room again)."""

    scope: str
    limit: float
    retry_after: float = 0.0


class ServerRequestBudget:
    """The caps of one downstream session: per call (by the id of the client request the server
    request belongs to) and for the whole session per second."""

    __slots__ = ("max_per_call", "rate", "_per_call", "_tat")

    def __init__(self, max_per_call: int, per_second: float, burst: int) -> None:
        self.max_per_call = max_per_call
        self.rate = Rate(per_second, burst)
        self._per_call: dict[Hashable, int] = {}
        self._tat: float | None = None

    def admit(self, call: Hashable | None, now: float, count: int = 1) -> Refusal | None:
        """Charge ``count`` requests to ``call`` (None: not part of any call, only the session's
        rate applies) and to the session; None when allowed, else the refusal (nothing charged)."""
        if call is not None:
            used = self._per_call.get(call, 0)
            if used + count > self.max_per_call:
                return Refusal("call", self.max_per_call)
        decision, tats = gcra_check([self._tat], [self.rate], now, cost=float(count))
        if not decision.allowed:
            return Refusal("session", self.rate.per_second, decision.retry_after)
        self._tat = tats[0]
        if call is not None:
            self._per_call[call] = self._per_call.get(call, 0) + count
        return None

    def used(self, call: Hashable) -> int:
        return self._per_call.get(call, 0)

    def call_ended(self, call: Hashable) -> None:
        """Forget a finished call (its id may be reused by the client later)."""
        self._per_call.pop(call, None)
