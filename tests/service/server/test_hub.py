"""The subscription hub in process: each subscriber gets the matches of its queries in
``seq`` order, a slow one is cut off at its bound without slowing the others."""

from __future__ import annotations

from service.server.hub import Hub, Published

BATCH: list[Published] = [(0, "q1", "m0"), (1, "q2", "m1"), (2, "q1", "m2")]


def test_a_subscriber_gets_its_queries_matches_in_seq_order() -> None:
    hub = Hub(limit=10)
    only_q1 = hub.subscribe(frozenset({"q1"}))
    every = hub.subscribe(None)
    hub.publish(BATCH)
    assert only_q1.take() == [(0, "m0"), (2, "m2")]
    assert every.take() == [(0, "m0"), (1, "m1"), (2, "m2")]


def test_taking_empties_the_buffer_and_clears_the_wake_up() -> None:
    hub = Hub(limit=10)
    sub = hub.subscribe(None)
    assert not sub.wake.is_set()
    hub.publish(BATCH[:1])
    assert sub.wake.is_set()
    assert sub.take() == [(0, "m0")]
    assert not sub.wake.is_set() and sub.take() == []


def test_matches_of_other_queries_do_not_wake_a_subscriber() -> None:
    hub = Hub(limit=10)
    sub = hub.subscribe(frozenset({"q3"}))
    hub.publish(BATCH)
    assert not sub.wake.is_set() and sub.take() == []


def test_an_empty_buffer_takes_a_batch_larger_than_the_bound() -> None:
    """A subscriber that keeps up is never cut off by one big batch."""
    hub = Hub(limit=2)
    sub = hub.subscribe(None)
    hub.publish(BATCH)
    assert len(sub.take()) == 3
    assert hub.overflows == 0 and len(hub) == 1


def test_a_subscriber_that_falls_behind_is_cut_off_and_the_others_go_on() -> None:
    hub = Hub(limit=2)
    slow = hub.subscribe(None)
    fast = hub.subscribe(None)
    hub.publish(BATCH[:1])
    fast.take()
    hub.publish(BATCH[1:])  # slow holds 1, would hold 3 > 2
    assert slow.overflowed and slow.wake.is_set() and slow.take() == []
    assert hub.overflows == 1 and hub.subscribers == {fast}
    assert fast.take() == [(1, "m1"), (2, "m2")]
    # Once cut off, it takes nothing more: the client resumes by seq from the log.
    assert not slow.offer(BATCH)
    assert slow.take() == []


def test_unsubscribe_and_close() -> None:
    hub = Hub(limit=10)
    gone = hub.subscribe(None)
    staying = hub.subscribe(None)
    hub.unsubscribe(gone)
    hub.unsubscribe(gone)  # twice is harmless
    hub.publish(BATCH)
    assert gone.take() == [] and len(staying.take()) == 3
    hub.close()
    assert hub.closing and staying.wake.is_set() and len(hub) == 1
