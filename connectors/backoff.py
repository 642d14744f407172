"""Capped exponential backoff with jitter, and what an operator sees of it (pure, given the clock).

Used wherever something is attempted again after a failure: the gateway starting a connector
whose start failed (gateway/startup.py) and the MCP connector reconnecting its upstream. The
delay before attempt ``n + 1`` (after ``n`` failures in a row) is drawn uniformly between half
and all of ``min(max_s, initial_s * 2 ** (n - 1))`` ("equal jitter": never zero, so a crowd of
gateways restarting together spreads out, and never more than the cap).

:meth:`Backoff.failed` also tells whether the failure repeats the previous one, so that callers
log an identical failure as one short line per attempt instead of repeating its whole text.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Backoff", "Failure"]


@dataclass(frozen=True, slots=True)
class Failure:
    """One recorded failure: the delay until the next attempt and whether it repeats the last."""

    delay_s: float
    attempts: int  # failed attempts in a row, this one included
    repeated: bool  # same error text as the failure before it


class Backoff:
    """The retry state of one thing being attempted again."""

    def __init__(self, initial_s: float, max_s: float, *, rand: Callable[[], float] = random.random,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``rand`` returns a float in [0, 1) (tests pin the jitter); ``clock`` is monotonic seconds."""
        self.initial_s = initial_s
        self.max_s = max(max_s, initial_s)
        self._rand = rand
        self._clock = clock
        self.attempts = 0  # failures in a row since the last success
        self.last_error = ""  # kept after a success: the operator's "last error"
        self.next_at: float | None = None  # clock time of the next attempt, None when none is due

    def step_s(self, attempts: int) -> float:
        """The cap of the delay after ``attempts`` failures in a row (``attempts`` ≥ 1)."""
        return min(self.max_s, self.initial_s * 2.0 ** min(max(attempts - 1, 0), 62))

    def failed(self, error: str) -> Failure:
        """Record a failed attempt; returns the delay to wait before the next one."""
        repeated = self.attempts > 0 and error == self.last_error
        self.attempts += 1
        self.last_error = error
        step = self.step_s(self.attempts)
        delay = step / 2 + step / 2 * self._rand()
        self.next_at = self._clock() + delay
        return Failure(delay, self.attempts, repeated)

    def succeeded(self) -> None:
        self.attempts = 0
        self.next_at = None

    def snapshot(self) -> dict[str, Any]:
        """``attempts``, ``last_error`` and ``next_attempt_in_s`` (when one is due), for /readyz and /status."""
        out: dict[str, Any] = {"attempts": self.attempts, "last_error": self.last_error}
        if self.next_at is not None:
            out["next_attempt_in_s"] = round(max(0.0, self.next_at - self._clock()), 1)
        return out
