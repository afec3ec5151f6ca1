"""The shared network: registration at any point, cleaning, sharing of instances."""

from __future__ import annotations

import random

import pytest

from ecq.engine import Engine
from ecq.errors import DuplicateQueryError, SemanticError, UnknownQueryError
from ecq.event import Event
from ecq.language.ast import from_json
from tests.ecq.harness import feed, ids, make_events, query


def test_a_query_sees_only_events_after_its_registration() -> None:
    items = [
        *make_events("a1"),
        ("register", "q", query("seq", "A", "B", within=9)),
        *make_events("b2 a3 b4"),
    ]
    assert ids(feed([], items)) == [["a3", "b4"]]


def test_unregister_mid_stream_stops_matches_and_drops_unused_queues() -> None:
    eng = Engine()
    eng.register("q", from_json(query("seq", "A", "B", within=9)))
    eng.register("r", from_json(query("seq", "C", "D", within=9)))
    assert eng.stats()["ecqs"] == 4
    assert len(eng.process([Event("s", "A", 1), Event("s", "B", 2)])) == 1
    eng.unregister("q")
    assert eng.stats()["ecqs"] == 2
    assert eng.process([Event("s", "A", 3), Event("s", "B", 4)]) == []
    eng._check()


def test_register_errors_leave_the_engine_unchanged() -> None:
    eng = Engine()
    eng.register("q", from_json(query("seq", "A", "B", within=9)))
    with pytest.raises(DuplicateQueryError):
        eng.register("q", from_json(query("seq", "A", within=None)))
    with pytest.raises(SemanticError):
        eng.register("r", from_json(query("seq", "A", "B")))  # no WITHIN
    with pytest.raises(UnknownQueryError):
        eng.unregister("nope")
    assert [q.name for q in eng.queries()] == ["q"]
    assert eng.stats()["ecqs"] == 2


def test_an_out_of_order_event_cannot_use_instances_below_the_drop_horizon() -> None:
    # a1 is stored; c100 moves the clock to 100, so with W=10 the horizon is 90 and a1 is
    # dropped; b5 arrives late (end 5 < clock) and would match a1 by the window alone.
    q = query("seq", "A", "B", within=10, mode="all")
    events = make_events("a1 c100 b5")
    queries = [("q", q), ("keep-c", query("seq", "C", "D", within=10))]
    assert ids(feed(queries, events)) == []
    assert ids(feed([("q", q)], make_events("a1 b5"))) == [["a1", "b5"]]


def test_drop_horizon_is_sticky_when_a_larger_window_arrives() -> None:
    q = query("seq", "A", "B", within=10, mode="all")
    big = query("seq", "A", "C", within=1000)
    items = [*make_events("a1 d50"), ("register", "big", big), *make_events("b5")]
    queries = [("q", q), ("d", query("seq", "D", "E", within=10))]
    # at d50 the horizon of A reached 40, dropping a1 for good, even though "big" later
    # widens the window of A to 1000.
    assert ids(feed(queries, items)) == []


def test_cleaning_frees_instances_and_counts_are_shared() -> None:
    eng = Engine(clean_every=1)
    eng.register("q1", from_json(query("seq", "A", "B", within=5)))
    eng.register("q2", from_json(query("seq", "A", "C", within=5)))
    eng.process([Event("s", "A", t) for t in range(10)])
    stats = eng.stats()
    assert stats["stored_instances"] == 6  # starts 4..9 are within 5 of clock 9
    eng._check()


def _workload(n_queries: int, seed: int = 7) -> list[tuple[str, dict[str, object]]]:
    rng = random.Random(seed)
    classes = [f"C{i}" for i in range(10)]
    out = []
    # the first queries cover every class at every position, so both sets store the same
    for i in range(n_queries):
        if i < len(classes):
            picks = [classes[i], classes[(i + 1) % 10], classes[(i + 2) % 10]]
        else:
            picks = rng.sample(classes, 3)
        out.append((f"q{i}", query("seq", *picks, within=50)))
    return out


def test_stored_instances_do_not_grow_with_the_number_of_queries() -> None:
    rng = random.Random(1)
    events = [Event(rng.randrange(50), f"C{rng.randrange(10)}", t * 0.5) for t in range(3000)]
    counts = []
    for n in (1000, 5000):
        eng = Engine(clean_every=500)
        for name, q in _workload(n):
            eng.register(name, from_json(q))
        samples = []
        for chunk in range(0, len(events), 500):
            eng.process([Event(e.src, e.type, e.start) for e in events[chunk : chunk + 500]])
            eng.clean()
            samples.append(eng.stats()["stored_instances"])
        counts.append(samples)
    assert counts[0] == counts[1]
    assert max(counts[0]) > 0
