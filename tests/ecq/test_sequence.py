"""Worked examples of docs/semantics.md §3 on the engine."""

from __future__ import annotations

from tests.ecq.harness import attr, cmp, feed, ids, lit, make_events, query

COVERAGE = "a1 a2 b3 b4 a5 b6 c7 c8"  # the coverage paper's a1 a2 b1 b2 a3 b3 c1 c2


def test_coverage_example_all_mode_gives_fourteen_matches() -> None:
    matches = feed([("q", query("seq", "A", "B", "C", within=100, mode="all"))], make_events(COVERAGE))
    assert len(matches) == 14
    assert ids(matches)[:7] == [
        ["a1", "b3", "c7"],
        ["a1", "b4", "c7"],
        ["a1", "b6", "c7"],
        ["a2", "b3", "c7"],
        ["a2", "b4", "c7"],
        ["a2", "b6", "c7"],
        ["a5", "b6", "c7"],
    ]


def test_coverage_example_recent_mode_gives_the_most_recent_match_per_c() -> None:
    matches = feed([("q", query("seq", "A", "B", "C", within=100))], make_events(COVERAGE))
    assert ids(matches) == [["a5", "b6", "c7"], ["a5", "b6", "c8"]]


def test_recent_finds_an_older_predecessor_when_the_most_recent_fails_the_condition() -> None:
    events = make_events("a1 a2 b3")
    events[0]["attrs"] = {"x": 1}
    events[1]["attrs"] = {"x": 9}
    events[2]["attrs"] = {"x": 5}
    where = cmp("<", attr("A", "x"), attr("B", "x"))
    matches = feed([("q", query("seq", "A", "B", within=10, where=where))], events)
    assert ids(matches) == [["a1", "b3"]]


def test_window_admits_equal_span_and_rejects_longer() -> None:
    events = make_events("a0 b5 b6")
    matches = feed([("q", query("seq", "A", "B", within=5, mode="all"))], events)
    assert ids(matches) == [["a0", "b5"]]


def test_equal_timestamps_follow_arrival_order() -> None:
    events = [
        {"id": "b", "src": 1, "type": "B", "start": 3},
        {"id": "a", "src": 1, "type": "A", "start": 3},
        {"id": "b2", "src": 1, "type": "B", "start": 3},
    ]
    matches = feed([("q", query("seq", "A", "B", within=5, mode="all"))], events)
    assert ids(matches) == [["a", "b2"]]


def test_interval_events_need_end_before_next_start() -> None:
    events = [
        {"id": "a", "src": 1, "type": "A", "start": 1, "end": 4},
        {"id": "b1", "src": 1, "type": "B", "start": 3},
        {"id": "b2", "src": 1, "type": "B", "start": 4, "end": 6},
    ]
    matches = feed([("q", query("seq", "A", "B", within=5, mode="all"))], events)
    assert ids(matches) == [["a", "b2"]]
    assert (matches[0].start, matches[0].end) == (1.0, 6.0)


def test_sources_never_mix() -> None:
    events = make_events("a1", src="x") + make_events("b2", src="y") + make_events("b3", src="x")
    matches = feed([("q", query("seq", "A", "B", within=5, mode="all"))], events)
    assert ids(matches) == [["a1", "b3"]]
    assert matches[0].src == "x"


def test_same_class_twice_uses_distinct_events() -> None:
    matches = feed([("q", query("seq", "A", "A", within=5, mode="all"))], make_events("a1 a2 a3"))
    assert ids(matches) == [["a1", "a2"], ["a1", "a3"], ["a2", "a3"]]


def test_any_component_accepts_either_class() -> None:
    any_bc = {"kind": "component", "classes": ["B", "C"], "any": True}
    matches = feed([("q", query("seq", "A", any_bc, within=5, mode="all"))], make_events("a1 b2 c3 d4"))
    assert ids(matches) == [["a1", "b2"], ["a1", "c3"]]


def test_single_component_filter_and_missing_attribute_is_false() -> None:
    events = make_events("a1 a2 a3")
    events[0]["attrs"] = {"x": 5}
    events[1]["attrs"] = {"x": 1}
    where = cmp(">", attr("A", "x"), lit(2))
    matches = feed([("q", query("seq", "A", where=where))], events)
    assert ids(matches) == [["a1"]]


def test_matches_of_one_event_are_ordered_by_registration() -> None:
    queries = [
        ("second", query("seq", "A", "B", within=9)),
        ("first", query("seq", "B", within=None)),
    ]
    matches = feed(queries, make_events("a1 b2"))
    assert [m.query for m in matches] == ["second", "first"]
    assert [m.seq for m in matches] == [0, 1]
