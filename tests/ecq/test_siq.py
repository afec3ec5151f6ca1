"""The shared instance queue (SIQ): arrival order, the per-source index and back chain,
and cleaning from the front."""

from __future__ import annotations

import pytest

from ecq.event import Event
from ecq.structures.pmb import PMB
from ecq.structures.siq import SIQ

NEG_INF = float("-inf")


def stored(siq: SIQ, *specs: tuple[str, str | int, float]) -> list[Event]:
    """Insert ``(id, src, start)`` events in this order (their moments 1, 3, 5, ...)."""
    out = []
    for n, (name, src, start) in enumerate(specs):
        event = Event(src, "A", start, id=name)
        event.moment = 2 * n + 1
        event.pmb = PMB(1, None)
        siq.insert(event)
        out.append(event)
    siq._check()
    return out


def test_instances_are_kept_once_in_arrival_order() -> None:
    siq = SIQ()
    a1, b1, a2 = stored(siq, ("a1", "s1", 1), ("b1", "s2", 2), ("a2", "s1", 3))
    assert list(siq) == [a1, b1, a2]
    assert len(siq) == 3


def test_a_source_chain_holds_only_its_instances_most_recent_first() -> None:
    siq = SIQ()
    a1, b1, a2, a3 = stored(siq, ("a1", "s1", 1), ("b1", "s2", 2), ("a2", "s1", 3), ("a3", "s1", 4))
    assert siq.last == {"s1": a3, "s2": b1}
    assert siq.chain("s1", NEG_INF) == [a3, a2, a1]
    assert siq.chain("s2", NEG_INF) == [b1]
    assert siq.chain("nobody", NEG_INF) == []


def test_a_chain_leaves_out_instances_below_the_horizon_wherever_they_are() -> None:
    siq = SIQ()
    # a2 arrived late: its start is below a1's.
    a1, a2, a3 = stored(siq, ("a1", 7, 5), ("a2", 7, 2), ("a3", 7, 6))
    assert siq.chain(7, 5) == [a3, a1]
    assert siq.chain(7, 6.5) == []


def test_cleaning_drops_from_the_front_and_unlinks_what_it_drops() -> None:
    siq = SIQ()
    a1, b1, a2 = stored(siq, ("a1", "s1", 1), ("b1", "s2", 2), ("a2", "s1", 3))
    assert siq.clean(2.5) == 2
    assert list(siq) == [a2]
    assert a1.pmb is None and b1.pmb is None
    assert siq.last == {"s1": a2}  # s2's most recent instance went
    # Probes use a horizon at least the cleaning one, under which a1 is invisible; the
    # chain ends at a1, whose own link was cut, so nothing older stays reachable.
    assert siq.chain("s1", 2.5) == [a2]
    assert a2.prev is a1 and a1.prev is None
    siq._check()


def test_cleaning_stops_at_the_first_instance_at_or_above_the_horizon() -> None:
    siq = SIQ()
    # The late a2 is below the horizon but behind a1: it stays until it reaches the
    # front, invisible to a probe with that horizon.
    a1, a2, a3 = stored(siq, ("a1", "s", 5), ("a2", "s", 2), ("a3", "s", 6))
    assert siq.clean(4) == 0
    assert list(siq) == [a1, a2, a3]
    assert siq.chain("s", 4) == [a3, a1]
    assert siq.clean(5.5) == 2
    assert list(siq) == [a3] and siq.chain("s", 5.5) == [a3]
    assert a2.prev is None and a1.prev is None


def test_an_empty_queue_cleans_to_nothing() -> None:
    siq = SIQ()
    assert siq.clean(10) == 0
    assert len(siq) == 0 and siq.last == {}


def test_the_check_catches_an_instance_out_of_arrival_order() -> None:
    siq = SIQ()
    first, second = stored(siq, ("a1", "s", 1), ("a2", "s", 2))
    first.moment, second.moment = second.moment, first.moment
    with pytest.raises(AssertionError):
        siq._check()


def test_an_instance_starting_at_the_horizon_stays() -> None:
    siq = SIQ()
    a1, a2 = stored(siq, ("a1", "s", 3), ("a2", "s", 4))
    assert siq.clean(3) == 0
    assert siq.chain("s", 3) == [a2, a1]
