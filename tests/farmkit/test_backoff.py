"""The one back-off rule every retry loop follows (farmkit/backoff.py)."""

from __future__ import annotations

import random

from farmkit.backoff import Backoff, Retry


def test_delays_double_up_to_the_maximum_and_start_over_after_a_success() -> None:
    retry = Retry(Backoff(0.5, 8.0), rand=lambda: 1.0)
    assert [retry.next_delay() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    retry.reset()
    assert retry.next_delay() == 0.5


def test_jitter_keeps_at_least_half_of_each_delay() -> None:
    low = Retry(Backoff(0.5, 8.0), rand=lambda: 0.0)
    assert [low.next_delay() for _ in range(3)] == [0.25, 0.5, 1.0]
    rng = random.Random(11)
    backoff = Backoff(0.5, 30.0)
    delays = [backoff.delay(attempt, rng.random) for attempt in range(10)]
    for attempt, delay in enumerate(delays):
        ceiling = min(30.0, 0.5 * 2**attempt)
        assert ceiling / 2 <= delay <= ceiling
    assert len({round(d / min(30.0, 0.5 * 2**a), 6) for a, d in enumerate(delays)}) > 1


def test_without_jitter_the_delay_is_exact_and_a_huge_attempt_count_does_not_overflow() -> None:
    backoff = Backoff(0.1, 5.0, jitter=False)
    assert [backoff.delay(n) for n in range(7)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0]
    assert backoff.delay(10_000) == 5.0
    assert Backoff(0.1, float("inf"), jitter=False).delay(3) == 0.8
