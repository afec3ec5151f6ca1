"""The reorder buffer (ecq/time/reorder.py): its invariants under a seeded stress run, the
release rule at its edges, and the cap's count."""

from __future__ import annotations

import random

import pytest

from ecq.event import Event
from ecq.time.reorder import Reorder


def ev(end: float, start: float | None = None, name: str = "") -> Event:
    return Event("s", "A", end if start is None else start, end, id=name or None)


def test_an_event_is_held_until_the_clock_passes_its_end_plus_the_lateness() -> None:
    buffer = Reorder(2.0)
    assert buffer.push([ev(10.0, name="a")]) == []
    assert buffer.push([ev(12.0, name="b")]) == []  # 10 + 2 is not passed yet
    assert [e.id for e in buffer.push([ev(12.5, name="c")])] == ["a"]
    assert [e.id for e in buffer.observe(100.0)] == ["b", "c"]
    assert len(buffer) == 0 and buffer.watermark == 98.0
    buffer._check()


def test_releases_come_out_by_end_then_start_then_arrival() -> None:
    buffer = Reorder(1.0)
    events = [
        ev(5.0, 5.0, "late-start"),
        ev(5.0, 1.0, "early-start"),
        ev(3.0, 3.0, "x"),
        ev(5.0, 1.0, "twin"),
    ]
    out = buffer.push(events)  # x: 3 < 5 - 1
    out += buffer.observe(10.0)
    assert [e.id for e in out] == ["x", "early-start", "twin", "late-start"]


def test_without_lateness_nothing_is_held_and_nothing_is_reordered() -> None:
    buffer = Reorder()
    events = [ev(5.0), ev(1.0), ev(3.0)]
    assert buffer.push(events) == events
    assert len(buffer) == 0 and buffer.observed == 5.0 and buffer.held_after([ev(9.0)]) == 0


def test_held_after_counts_what_a_push_would_leave_held_and_changes_nothing() -> None:
    buffer = Reorder(5.0)
    buffer.push([ev(float(t)) for t in range(10)])  # observed 9: holds ends 4..9
    assert len(buffer) == 6
    assert buffer.held_after([]) == 6
    assert buffer.held_after([ev(8.0)]) == 7
    assert buffer.held_after([ev(12.0)]) == 4  # the clock moves to 12: ends 7, 8, 9 and 12
    assert len(buffer) == 6
    assert len(buffer.push([ev(12.0)])) == 3 and len(buffer) == 4


def test_a_lateness_out_of_range_is_refused() -> None:
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="lateness"):
            Reorder(bad)


@pytest.mark.parametrize("seed", range(5))
def test_seeded_stress_keeps_the_invariants_and_releases_each_event_once_in_order(seed: int) -> None:
    rng = random.Random(seed)
    buffer = Reorder(rng.choice([0.5, 2.0, 10.0]))
    released: list[Event] = []
    pushed = 0
    t = 0.0
    for _ in range(400):
        action = rng.random()
        if action < 0.8:
            batch = []
            for _ in range(rng.randrange(1, 6)):
                t += rng.choice([0.0, 0.25, 1.0])
                end = t - rng.choice([0.0, 0.0, 0.5, 3.0, 20.0])
                batch.append(ev(end, end - rng.choice([0.0, 1.0]), f"e{pushed}"))
                pushed += 1
            expected = buffer.held_after(batch)
            released += buffer.push(batch)
            assert len(buffer) == expected
        elif action < 0.9:
            released += buffer.observe(t + rng.choice([0.0, 1.0, 5.0]))
        else:
            released += buffer.set_lateness(rng.choice([0.0, 0.5, 2.0, 10.0]))
        buffer._check()
    released += buffer.flush()
    assert sorted(str(e.id) for e in released) == sorted(f"e{n}" for n in range(pushed))
