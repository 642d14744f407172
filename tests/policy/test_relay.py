"""The per-call cap on relayed notifications (pure: the clock is a number)."""

from __future__ import annotations

from gateway.policy import RelayBudget, Verdict


def test_messages_pass_up_to_the_burst_then_at_the_rate_and_the_first_drop_is_told_apart() -> None:
    budget = RelayBudget(per_s=2.0, burst=3, bytes_per_s=1e9, bytes_burst=10**9)
    assert [budget.admit("a", 10, 0.0) for _ in range(3)] == [Verdict.PASS] * 3
    assert budget.admit("a", 10, 0.0) is Verdict.FIRST_DROP
    assert budget.admit("a", 10, 0.1) is Verdict.DROP
    assert budget.dropped("a") == 2
    assert budget.admit("a", 10, 0.5) is Verdict.PASS  # half a second refills one at 2/s
    assert budget.admit("a", 10, 0.5) is Verdict.DROP  # still one notice per call: no second FIRST_DROP
    # Another call of the session has its own bucket.
    assert budget.admit("b", 10, 0.5) is Verdict.PASS
    budget.call_ended("a")
    assert budget.dropped("a") == 0 and budget.admit("a", 10, 0.5) is Verdict.PASS  # a reused id starts afresh


def test_bytes_are_capped_too_and_a_drop_charges_neither_bucket() -> None:
    budget = RelayBudget(per_s=1000.0, burst=1000, bytes_per_s=100.0, bytes_burst=1000)
    assert budget.admit("a", 600, 0.0) is Verdict.PASS
    assert budget.admit("a", 600, 0.0) is Verdict.FIRST_DROP  # 1200 bytes > the 1000-byte burst
    assert budget.admit("a", 400, 0.0) is Verdict.PASS  # the dropped 600 were not charged
    assert budget.admit("a", 2000, 100.0) is Verdict.DROP  # larger than the burst: never fits
    assert budget.admit("a", 1000, 100.0) is Verdict.PASS
