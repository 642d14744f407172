"""Rates and the GCRA (generic cell rate algorithm) decision, as pure functions.

GCRA is a token bucket stored as one number per key: the *theoretical arrival time* (TAT), the
moment the bucket would be full again. A request of cost ``c`` is allowed when
``max(tat, now) + c*T - burst*T <= now`` (``T`` = seconds per token); it then stores the new TAT.
One float per key is what makes the Redis backend a single atomic script and the memory backend a
dict lookup. :func:`gcra_check` decides several keys at once, all or nothing, so a call that passes
the per-principal bucket but fails the per-tool bucket spends neither.

The Redis Lua script in :mod:`gateway.filters.ratelimit` mirrors this arithmetic exactly.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Rate", "Decision", "parse_rate", "gcra_check"]

_UNITS = {
    "s": 1.0, "sec": 1.0, "second": 1.0,
    "m": 60.0, "min": 60.0, "minute": 60.0,
    "h": 3600.0, "hour": 3600.0,
}
# Seconds; below this a computed wait is rounding error (see gcra_check). The Lua script matches it.
_EPSILON = 1e-6
_RATE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*")


@dataclass(frozen=True, slots=True)
class Rate:
    """``per_second`` tokens refill each second; ``burst`` tokens may be spent at once."""

    per_second: float
    burst: int

    @property
    def interval(self) -> float:
        """Seconds per token (GCRA's emission interval ``T``)."""
        return 1.0 / self.per_second


@dataclass(frozen=True, slots=True)
class Decision:
    """Outcome of one check; ``retry_after`` (seconds) is 0 when allowed."""

    allowed: bool
    retry_after: float = 0.0
    denied_index: int = -1  # which of the checked buckets refused (for the error message)

    @property
    def retry_after_ms(self) -> int:
        return max(1, math.ceil(self.retry_after * 1000)) if not self.allowed else 0


def parse_rate(text: str, burst: int | None = None) -> Rate:
    """``"10/s"``, ``"600/min"``, ``"1000/h"`` → :class:`Rate`.

    The default burst is one second's worth of tokens (at least 1), so ``600/min`` allows 10 at
    once rather than the whole minute's budget in one go.
    """
    match = _RATE.fullmatch(text)
    if match is None:
        raise ValueError(f"rate must look like 10/s, 600/min or 1000/h, got {text!r}")
    count = float(match.group(1))
    if count <= 0:
        raise ValueError(f"rate must be positive, got {text!r}")
    per_second = count / _UNITS[match.group(2)]
    if burst is None:
        burst = max(1, math.ceil(per_second))
    if burst < 1:
        raise ValueError("burst must be at least 1")
    return Rate(per_second, burst)


def gcra_check(tats: Sequence[float | None], rates: Sequence[Rate], now: float,
               cost: float = 1.0) -> tuple[Decision, list[float]]:
    """Decide a request against several buckets at once.

    ``tats[i]`` is bucket i's stored TAT (None when never used). Returns the decision and the TATs
    to store: the updated ones when allowed, the unchanged ones (None kept as ``now``-free) when
    refused, so callers may write them back unconditionally only when allowed.
    """
    new: list[float] = []
    worst = 0.0
    denied = -1
    for i, (tat, rate) in enumerate(zip(tats, rates, strict=True)):
        interval = rate.interval
        base = now if tat is None or tat < now else tat
        candidate = base + cost * interval
        wait = candidate - rate.burst * interval - now
        # A wait below a microsecond is floating-point rounding (now + T - T != now), not a real
        # overdraft: refusing there wrongly rejected first requests under slow rates like 1/h.
        if wait > _EPSILON:
            if wait > worst:
                worst, denied = wait, i
        new.append(candidate)
    if denied >= 0:
        return Decision(False, worst, denied), [t if t is not None else now for t in tats]
    return Decision(True), new
