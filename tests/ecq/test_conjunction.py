"""Conjunction and disjunction (docs/semantics.md §4)."""

from __future__ import annotations

from tests.ecq.harness import attr, cmp, comp, feed, ids, lit, make_events, query


def test_conjunction_matches_in_any_order_when_the_last_arrives() -> None:
    matches = feed([("q", query("and", "A", "B", "C", within=10, mode="all"))], make_events("c1 a2 b3"))
    assert ids(matches) == [["a2", "b3", "c1"]]
    assert (matches[0].start, matches[0].end) == (1.0, 3.0)


def test_conjunction_window_is_the_span_of_all_events() -> None:
    matches = feed([("q", query("and", "A", "B", within=3, mode="all"))], make_events("b1 a5 b6"))
    assert ids(matches) == [["a5", "b6"]]


def test_same_class_components_fill_in_arrival_order_one_match_per_set() -> None:
    where = cmp("<", attr("x", "v"), attr("y", "v"))
    q = query("and", comp("A", alias="x"), comp("A", alias="y"), within=10, mode="all", where=where)
    events = make_events("a1 a2 a3")
    for e, v in zip(events, [1, 3, 2], strict=True):
        e["attrs"] = {"v": v}
    matches = feed([("q", q)], events)
    # sets {a1,a2} (1<3 ok), {a1,a3} (1<2 ok), {a2,a3} (3<2 fails: roles are fixed)
    assert ids(matches) == [["a1", "a2"], ["a1", "a3"]]


def test_conjunction_recent_takes_the_most_recent_other_events() -> None:
    matches = feed([("q", query("and", "A", "B", within=10))], make_events("a1 a2 b3 b4"))
    assert ids(matches) == [["a2", "b3"], ["a2", "b4"]]


def test_disjunction_every_passing_event_is_a_match() -> None:
    where = cmp(">", attr("A", "x"), lit(1))
    events = make_events("a1 b2 a3 c4")
    events[0]["attrs"] = {"x": 0}
    events[2]["attrs"] = {"x": 2}
    matches = feed([("q", query("or", "A", "B", where=where))], events)
    assert ids(matches) == [["b2"], ["a3"]]
