"""A circuit breaker for a remote policy backend, as a pure state machine over a clock value.

closed → (``failures`` failures in a row) → open → (``cooldown_s`` later, one caller) half-open →
closed on success, open again (for another cool-down) on failure.

While open, and while the one half-open probe is in flight, :meth:`CircuitBreaker.allow` says no:
the caller applies its fallback at once instead of waiting on a backend that is known to be
unhealthy. The rate-limit filter uses it around Redis, so a Redis that accepts connections but
never answers costs one timeout per cool-down, not one per call.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["CircuitBreaker", "BreakerState"]

BreakerState = Literal["closed", "open", "half_open"]


class CircuitBreaker:
    __slots__ = ("failures", "cooldown_s", "state", "_streak", "_until")

    def __init__(self, failures: int = 3, cooldown_s: float = 2.0) -> None:
        if failures < 1 or cooldown_s <= 0:
            raise ValueError("failures must be >= 1 and cooldown_s > 0")
        self.failures = failures
        self.cooldown_s = cooldown_s
        self.state: BreakerState = "closed"
        self._streak = 0
        self._until = 0.0  # open: when the next probe may go

    def allow(self, now: float) -> bool:
        """Whether this call may use the backend. In ``open`` state past the cool-down the first
        caller gets True and becomes the probe (state ``half_open``); everyone else gets False
        until it reports."""
        if self.state == "closed":
            return True
        if self.state == "open" and now >= self._until:
            self.state = "half_open"
            return True
        return False

    def success(self) -> bool:
        """The backend answered. Returns True when this closed a breaker that was not closed."""
        self._streak = 0
        if self.state == "closed":
            return False
        self.state = "closed"
        return True

    def failure(self, now: float) -> bool:
        """The backend failed. Returns True when this opened the breaker (from closed)."""
        self._streak += 1
        if self.state == "half_open" or (self.state == "closed" and self._streak >= self.failures):
            opened = self.state == "closed"
            self.state = "open"
            self._until = now + self.cooldown_s
            return opened
        return False
