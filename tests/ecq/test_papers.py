"""The papers' worked examples on the engine: ZStream, SASE, the coverage
paper, and trailing negation waiting for the clock."""

from __future__ import annotations

from typing import Any

from ecq.engine import Engine
from ecq.event import Event
from tests.ecq.harness import feed, ids, make_events

HOUR = 3600.0


def test_zstream_kleene_plus_collects_every_b_between_a_and_c() -> None:
    matches = feed([("q", "PATTERN A; B+; C WITHIN 10 MODE ALL")], make_events("a1 b2 b3 b5 c6"))
    assert ids(matches) == [["a1", ["b2", "b3", "b5"], "c6"]]


def test_zstream_kleene_count_slides_one_event_at_a_time() -> None:
    events = make_events("a1 b2 b3 b5 c6")
    all_mode = feed([("q", "PATTERN A; B^2; C WITHIN 10 MODE ALL")], events)
    assert ids(all_mode) == [["a1", ["b2", "b3"], "c6"], ["a1", ["b3", "b5"], "c6"]]
    recent = feed([("q", "PATTERN A; B^2; C WITHIN 10 MODE RECENT")], events)
    assert ids(recent) == [["a1", ["b3", "b5"], "c6"]]


def test_zstream_negation_between_a_and_c() -> None:
    events = make_events("a1 a2 b3 a4 c5")
    for mode in ("ALL", "RECENT"):
        matches = feed([("q", f"PATTERN A; !B; C WITHIN 10 MODE {mode}")], events)
        assert ids(matches) == [["a4", "c5"]], mode


def test_kleene_aggregates_in_where_and_return() -> None:
    events = make_events("a1 b2 b3 b4 c5")
    for e, x in zip(events, [0, 5, 7, 9, 0], strict=True):
        e["attrs"] = {"x": x}
    text = "SEQ(A a, B+ b[], C c) WHERE count(b) >= 3 AND b.x > 6 WITHIN 10 RETURN sum(b.x) AS total, count(b) AS n"
    assert feed([("q", text)], events) == []  # b.x > 6 leaves two qualifying b
    text = (
        "SEQ(A a, B+ b[], C c) WHERE count(b) >= 2 AND b.x > 6 WITHIN 10 RETURN sum(b.x) AS total, avg(b.x)"
    )
    matches = feed([("q", text)], events)
    assert ids(matches) == [["a1", ["b3", "b4"], "c5"]]
    assert matches[0].attrs == {"total": 16, "expr2": 8.0}


def _reading(cls: str, t: float, tag: int, shelf: int | None = None, eid: str = "") -> dict[str, Any]:
    attrs: dict[str, Any] = {"id": tag}
    if shelf is not None:
        attrs["shelf_id"] = shelf
    return {
        "id": eid or f"{cls[0].lower()}{t:g}",
        "src": "store",
        "type": cls,
        "start": t * HOUR,
        "attrs": attrs,
    }


SHOPLIFTING = "SEQ(SHELF-READING, !COUNTER-READING, EXIT-READING) WHERE [id] WITHIN 3 hours"


def test_sase_shoplifting_blocked_by_a_counter_reading_of_the_same_tag() -> None:
    events = [
        _reading("SHELF-READING", 0, tag=7, eid="shelf"),
        _reading("COUNTER-READING", 1, tag=7, eid="counter"),
        _reading("EXIT-READING", 2, tag=7, eid="exit"),
    ]
    assert feed([("q", SHOPLIFTING)], events) == []


def test_sase_shoplifting_not_blocked_by_another_tags_counter_reading() -> None:
    events = [
        _reading("SHELF-READING", 0, tag=7, eid="shelf"),
        _reading("COUNTER-READING", 1, tag=8, eid="counter"),
        _reading("EXIT-READING", 2, tag=7, eid="exit"),
    ]
    assert ids(feed([("q", SHOPLIFTING)], events)) == [["shelf", "exit"]]


def test_sase_shoplifting_outside_the_window_is_no_match() -> None:
    events = [
        _reading("SHELF-READING", 0, tag=7, eid="shelf"),
        _reading("EXIT-READING", 3.5, tag=7, eid="exit"),
    ]
    assert feed([("q", SHOPLIFTING)], events) == []


MISPLACED = (
    "SEQ(SHELF-READING, SHELF-READING, !ANY(COUNTER-READING, SHELF-READING))\n"
    "WHERE [id] AND $x1.shelf_id != $x2.shelf_id AND $x1.shelf_id = $x3.shelf_id WITHIN 1 hour"
)


def test_sase_misplaced_inventory_emitted_when_the_hour_passes_unblocked() -> None:
    eng = Engine()
    eng.register("misplaced", MISPLACED)
    first = [
        _reading("SHELF-READING", 0, tag=7, shelf=1, eid="on1"),
        _reading("SHELF-READING", 0.2, tag=7, shelf=2, eid="on2"),
    ]
    assert eng.process([Event.from_dict(e) for e in first]) == []
    # a reading of the item on a third shelf does not put it back
    assert eng.process([Event.from_dict(_reading("SHELF-READING", 0.5, tag=7, shelf=3, eid="on3"))]) == []
    assert eng.advance_time(0.9 * HOUR) == []  # the deadline is 1 h after the first reading
    matches = eng.advance_time(1.01 * HOUR)
    assert [m.event_ids() for m in matches] == [["on1", "on2"]]


def test_sase_misplaced_inventory_blocked_when_put_back_or_taken_to_the_counter() -> None:
    put_back = _reading("SHELF-READING", 0.5, tag=7, shelf=1, eid="back")
    counter = _reading("COUNTER-READING", 0.5, tag=7, eid="counter")  # no shelf_id: blocks
    # Putting it back blocks (on1, on2); the put-back reading itself is a move from shelf
    # 2 to shelf 1, a misplacement of its own that nothing blocks.
    for blocker, expected in ((put_back, [["on2", "back"]]), (counter, [])):
        events = [
            _reading("SHELF-READING", 0, tag=7, shelf=1, eid="on1"),
            _reading("SHELF-READING", 0.2, tag=7, shelf=2, eid="on2"),
            blocker,
        ]
        assert ids(feed([("q", MISPLACED)], events)) == expected, blocker["id"]


OVERDOSE = (
    'SEQ(MEDICINETAKEN, MEDICINETAKEN) WHERE [name="John"] ∧ [medicine="Antibiotics"] '
    "∧ ($x1.amount + $x2.amount) > 1000 WITHIN 4 hours"
)


def _dose(t: float, amount: int, name: str = "John", medicine: str = "Antibiotics") -> dict[str, Any]:
    return {
        "id": f"dose{t:g}-{name}-{medicine}",
        "src": "ward-3",
        "type": "MEDICINETAKEN",
        "start": t * HOUR,
        "attrs": {"name": name, "medicine": medicine, "amount": amount},
    }


def test_sase_overdose_query() -> None:
    events = [
        _dose(0, 400),
        _dose(1, 500, medicine="Aspirin"),
        _dose(2, 700),
        _dose(2.5, 900, name="Jane"),
        _dose(7, 900),
    ]
    matches = feed([("q", OVERDOSE)], events)
    assert ids(matches) == [["dose0-John-Antibiotics", "dose2-John-Antibiotics"]]


COVERAGE = "a1 a2 b3 b4 a5 b6 c7 c8"  # a1 a2 b1 b2 a3 b3 c1 c2 of the coverage paper


def test_coverage_paper_stream_in_both_modes_from_text() -> None:
    all_mode = feed([("q", "SEQ(A, B, C) WITHIN 100 MODE ALL")], make_events(COVERAGE))
    assert len(all_mode) == 14
    recent = feed([("q", "SEQ(A, B, C) WITHIN 100")], make_events(COVERAGE))
    assert ids(recent) == [["a5", "b6", "c7"], ["a5", "b6", "c8"]]


def test_trailing_negation_match_appears_only_after_the_clock_passes_its_deadline() -> None:
    eng = Engine()
    eng.register("q", "SEQ(A, B, !C) WITHIN 10")
    assert eng.process([Event("s", "A", 1, id="a1"), Event("s", "B", 3, id="b3")]) == []
    assert eng.stats()["pending_matches"] == 1
    assert eng.advance_time(11) == []  # the deadline a1.start + 10 = 11 is not exceeded yet
    assert eng.process([Event("other", "X", 11.0)]) == []
    matches = eng.process([Event("other", "X", 11.5)])  # the clock passes 11
    assert [m.event_ids() for m in matches] == [["a1", "b3"]]
    assert matches[0].trigger == 3  # emitted before the event that moved the clock
    assert eng.advance_time(100) == []  # never twice


def test_trailing_negation_blocked_by_an_event_before_the_deadline() -> None:
    eng = Engine()
    eng.register("q", "SEQ(A, B, !C) WITHIN 10")
    eng.process([Event("s", "A", 1), Event("s", "B", 3), Event("s", "C", 9)])
    assert eng.advance_time(1000) == []
    assert eng.stats()["pending_matches"] == 0


def test_uncertain_blocker_lowers_the_probability() -> None:
    events = [
        {"id": "a", "src": 1, "type": "A", "start": 1, "prob": 0.8},
        {"id": "b", "src": 1, "type": "B", "start": 2, "prob": 0.5},
        {"id": "c", "src": 1, "type": "C", "start": 3},
    ]
    matches = feed([("q", "SEQ(A, !B, C) WITHIN 5")], events)
    assert ids(matches) == [["a", "c"]]
    assert abs(matches[0].prob - 0.4) < 1e-12
    assert feed([("q", "SEQ(A, !B, C) WITHIN 5 PROBABILITY >= 0.5")], events) == []


def test_nested_sub_pattern_gives_its_own_events_and_is_shared() -> None:
    eng = Engine()
    eng.register("q1", "SEQ(A, AND(B, C), D) WITHIN 10")
    eng.register("q2", "SEQ(AND(B, C), E) WITHIN 10")
    assert eng.stats()["derived_classes"] == 1
    events = [
        Event(1, cls, t, id=f"{cls.lower()}{t}")
        for cls, t in [("A", 1), ("C", 2), ("B", 3), ("D", 4), ("E", 5)]
    ]
    matches = eng.process(events)
    assert [(m.query, m.event_ids()) for m in matches] == [
        ("q1", ["a1", ["b3", "c2"], "d4"]),
        ("q2", [["b3", "c2"], "e5"]),
    ]
    eng.unregister("q1")
    assert eng.stats()["derived_classes"] == 1
    eng.unregister("q2")
    assert eng.stats()["derived_classes"] == 0
    assert eng.stats()["ecqs"] == 0


def test_a_query_reads_another_querys_matches_through_its_name() -> None:
    eng = Engine()
    eng.register("pair", "SEQ(A, B) WITHIN 10 RETURN B.x AS x")
    eng.register("twice", "SEQ(@pair p, @pair q) WHERE p.x < q.x WITHIN 20")
    events = [
        Event(1, "A", 1),
        Event(1, "B", 2, attrs={"x": 1}),
        Event(1, "A", 3),
        Event(1, "B", 4, attrs={"x": 2}),
    ]
    for i, e in enumerate(events):
        e.id = i
    matches = eng.process(events)
    assert [(m.query, m.event_ids()) for m in matches] == [
        ("pair", [0, 1]),
        ("pair", [2, 3]),
        ("twice", [[0, 1], [2, 3]]),
    ]


def test_sub_patterns_are_shared_only_by_queries_that_saw_the_same_instances() -> None:
    """A query registered after a clock advance released an ``@name`` instance must not
    see that instance through a sub-pattern node shared with an earlier query."""
    eng = Engine()
    eng.register("n", "SEQ(A, !B) WITHIN 5")
    eng.process([Event(1, "A", 1, id="a")])
    eng.register("q1", "(@n; C); D WITHIN 100")
    released = eng.advance_time(10)
    assert [m.query for m in released] == ["n"]
    eng.register("q2", "(@n; C); D WITHIN 100")
    assert eng.stats()["derived_classes"] == 2
    matches = eng.process([Event(1, "C", 20, id="c"), Event(1, "D", 21, id="d")])
    assert [(m.query, m.event_ids()) for m in matches] == [("q1", [[["a"], "c"], "d"])]
