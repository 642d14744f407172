"""Caps on the notifications an upstream sends about one call (``notifications/message`` and
``notifications/progress``) on their way to the caller. Pure: the caller passes the clock.

A hostile or broken upstream tool can log without end: one sent 23 MB of log messages to its
client in 9 s, relayed one by one. :class:`RelayBudget` belongs to one downstream session and
keeps, for each call in flight (keyed by the client request the notification belongs to), two
GCRA buckets: messages (``per_s``, ``burst``) and bytes (``bytes_per_s``, ``bytes_burst``, a
message costing its encoded size). A notification either fits both and is charged to both, or is
dropped. The first drop of a call is told apart, so the caller gets one notice that notifications
were dropped, not one per drop.
"""

from __future__ import annotations

from collections.abc import Hashable
from enum import Enum

from .rates import Rate, gcra_check

__all__ = ["RelayBudget", "Verdict"]


class Verdict(Enum):
    """What to do with one notification."""

    PASS = "pass"
    DROP = "drop"
    FIRST_DROP = "first_drop"  # dropped, and the first of its call: tell the caller once


class RelayBudget:
    """The buckets of one session's calls in flight."""

    __slots__ = ("rates", "_calls")

    def __init__(self, per_s: float, burst: int, bytes_per_s: float, bytes_burst: int) -> None:
        self.rates = (Rate(per_s, burst), Rate(bytes_per_s, bytes_burst))
        # call → [messages TAT, bytes TAT, dropped so far]
        self._calls: dict[Hashable, list[float]] = {}

    def admit(self, call: Hashable, size: int, now: float) -> Verdict:
        """Charge one notification of ``size`` bytes to ``call`` when both buckets have room."""
        state = self._calls.get(call)
        if state is None:
            state = self._calls[call] = [now, now, 0.0]
        messages, message_tats = gcra_check([state[0]], [self.rates[0]], now)
        if messages.allowed:
            volume, byte_tats = gcra_check([state[1]], [self.rates[1]], now, cost=float(max(size, 1)))
            if volume.allowed:  # both fit: both are charged (a drop charges neither)
                state[0], state[1] = message_tats[0], byte_tats[0]
                return Verdict.PASS
        state[2] += 1
        return Verdict.FIRST_DROP if state[2] == 1 else Verdict.DROP

    def dropped(self, call: Hashable) -> int:
        state = self._calls.get(call)
        return int(state[2]) if state is not None else 0

    def call_ended(self, call: Hashable) -> None:
        """Forget a finished call (its id may be reused by the client later)."""
        self._calls.pop(call, None)
