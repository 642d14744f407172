"""The pure rules behind issue 14 rows 6 and 13: the circuit breaker's states, and the budget of
server→client requests (per call, per session), with plain clock values."""

from __future__ import annotations

import pytest

from gateway.policy import CircuitBreaker, ServerRequestBudget


def test_breaker_opens_after_failures_in_a_row_and_probes_once_per_cooldown() -> None:
    breaker = CircuitBreaker(failures=3, cooldown_s=2.0)
    assert breaker.allow(0.0)
    assert not breaker.failure(0.0) and not breaker.failure(0.1)
    assert not breaker.success()  # a success resets the streak
    assert not breaker.failure(0.2) and not breaker.failure(0.3)
    assert breaker.failure(0.4) and breaker.state == "open"
    assert not breaker.allow(1.0) and not breaker.allow(2.39)
    assert breaker.allow(2.4) and breaker.state == "half_open"  # the one probe
    assert not breaker.allow(2.41)  # others keep the fallback while it runs
    assert not breaker.failure(2.5) and breaker.state == "open"  # failed probe: another cool-down
    assert not breaker.allow(4.49) and breaker.allow(4.5)
    assert breaker.success() and breaker.state == "closed" and breaker.allow(4.6)


def test_breaker_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        CircuitBreaker(failures=0)


def test_budget_caps_a_call_and_rates_a_session() -> None:
    budget = ServerRequestBudget(max_per_call=3, per_second=2.0, burst=5)
    assert [budget.admit("a", 0.0) for _ in range(3)] == [None, None, None]
    refusal = budget.admit("a", 0.0)
    assert refusal is not None and refusal.scope == "call" and refusal.limit == 3 and refusal.retry_after == 0
    # Another call of the same session: its own total, the session's bucket (2 tokens left).
    assert budget.admit("b", 0.0) is None and budget.admit(None, 0.0) is None
    refusal = budget.admit("b", 0.0)
    assert refusal is not None and refusal.scope == "session" and refusal.retry_after == pytest.approx(0.5)
    assert budget.used("b") == 1  # nothing charged for a refusal
    assert budget.admit("b", 0.5) is None  # one token refilled
    budget.call_ended("a")
    assert budget.used("a") == 0 and budget.admit("a", 10.0) is None
    # Several at once (an upstream's inputRequests): all or nothing.
    assert budget.admit("c", 20.0, count=4) is not None and budget.used("c") == 0
    assert budget.admit("c", 20.0, count=3) is None and budget.used("c") == 3
