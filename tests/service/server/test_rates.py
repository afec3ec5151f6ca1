"""Matches per second over a sliding minute (``service.server.rates``), on a fake clock."""

from __future__ import annotations

import pytest

from service.server.rates import MatchRates


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_rates_cover_the_last_minute_and_forget_what_is_older() -> None:
    clock = Clock()
    rates = MatchRates(span=60, clock=clock)
    assert rates.per_second() == {}
    rates.add({"a": 6})
    clock.now += 2.0
    # Younger than the span: divided by the time since start.
    assert rates.per_second() == {"a": pytest.approx(3.0)}
    for _ in range(100):
        clock.now += 1.0
        rates.add({"a": 1, "b": 2})
    # The last 60 one-second buckets hold 60 × (1, 2); the 6 from the start are gone.
    assert rates.per_second() == {"a": pytest.approx(1.0), "b": pytest.approx(2.0)}
    clock.now += 30.0
    # Half the minute has passed since: the 30 newest buckets remain.
    assert rates.per_second() == {"a": pytest.approx(30 / 60), "b": pytest.approx(60 / 60)}
    clock.now += 60.0
    assert rates.per_second() == {}


def test_adding_in_one_second_goes_to_one_bucket() -> None:
    clock = Clock()
    rates = MatchRates(span=10, clock=clock)
    for _ in range(5):
        rates.add({"a": 2})
    clock.now += 20.0
    rates.add({"a": 1})
    assert rates.per_second() == {"a": pytest.approx(0.1)}
