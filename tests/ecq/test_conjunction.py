"""Conjunction and disjunction (docs/semantics.md §4); and the conjunctions an instance
may complete, from its source's presence (ecq/conjunction.py): the bit-sliced count
gives exactly the queries whose every other class is present within their window, plus
the ones it cannot judge, through registrations and unregistrations in any order."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from ecq.conjunction import by_presence, candidates, link, note, prune, unlink
from ecq.ecq import ECQ
from ecq.language import parse_query
from ecq.qstate import QState
from ecq.query import compile_query
from ecq.windows import Windows
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


# ------------------------------------------------- candidates from the presence

CLASSES = ("A", "B", "C", "D")
WINDOWS = (5.0, 10.0, 20.0)


def node(text: str, bitno: int) -> QState:
    return QState(compile_query(f"q{bitno}", parse_query(text), text), bitno=bitno, order=bitno, reg=0)


conjunctions = st.builds(
    lambda comps, neg, w: f"AND({', '.join(comps)}{neg}) WITHIN {w:g} s",
    st.lists(st.sampled_from([*CLASSES, "ANY(A, B)", "ANY(B, C)"]), min_size=2, max_size=4),
    st.sampled_from(["", ", !D"]),
    st.sampled_from(WINDOWS),
)


def expected(ecq: ECQ, live: dict[int, QState], present: dict[str, float], end: float) -> int:
    """Directly: a countable query is a candidate when each class it needs besides the
    arriving instance's is present, starting no earlier than ``end`` minus its window."""
    out = 0
    for qs in live.values():
        comps = [qs.cq.comps[i] for i in qs.cq.positives]
        if not any(ecq.cls in c.classes for c in comps):
            continue
        if any(len(c.classes) != 1 for c in comps):
            out |= qs.bit
            continue
        left = Counter(next(iter(c.classes)) for c in comps)
        left[ecq.cls] -= 1
        window = qs.cq.window or 0.0
        if all(cls in present and present[cls] >= end - window for cls, n in left.items() if n > 0):
            out |= qs.bit
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), conjunctions), min_size=1, max_size=12),
    st.dictionaries(st.sampled_from(CLASSES), st.sampled_from([0.0, 3.0, 8.0, 15.0, 19.0])),
    st.sampled_from([0.0, 10.0, 20.0, 30.0]),
)
def test_candidates_are_the_queries_whose_other_classes_are_present(
    steps: list[tuple[bool, str]], present: dict[str, float], end: float
) -> None:
    ecq = ECQ("A")
    live: dict[int, QState] = {}
    for bitno, (drop, text) in enumerate(steps):
        qs = node(text, bitno)
        assert by_presence(qs)
        if any("A" in qs.cq.comps[i].classes for i in qs.cq.positives):
            link(ecq, qs)
        live[bitno] = qs
        if drop and len(live) > 1:
            gone = live.pop(min(live))
            unlink(ecq, gone)
    windows = Windows({w: sum(q.bit for q in live.values() if q.cq.window == w) for w in WINDOWS})
    got = candidates(ecq, present or None, end, windows)
    assert got == expected(ecq, live, present, end)
    for qs in list(live.values()):
        unlink(ecq, qs)
    assert not (ecq.cnj_final or ecq.cnj_loose or ecq.cnj_need or ecq.cnj_count)


def test_a_second_component_of_the_arriving_class_needs_another_instance() -> None:
    ecq = ECQ("A")
    qs = node("AND(A, A, B) WITHIN 10 s", 0)
    link(ecq, qs)
    windows = Windows({10.0: qs.bit})
    assert candidates(ecq, {"B": 15.0}, 20.0, windows) == 0
    assert candidates(ecq, {"A": 4.0, "B": 15.0}, 20.0, windows) == 0  # A too early
    assert candidates(ecq, {"A": 12.0, "B": 15.0}, 20.0, windows) == qs.bit


def test_sub_patterns_and_named_classes_are_not_counted() -> None:
    assert not by_presence(node("AND(A, (SEQ(B, C))) WITHIN 10 s", 0))
    assert not by_presence(node("SEQ(A, B) WITHIN 10 s", 0))


def test_presence_keeps_the_latest_start_and_goes_below_the_horizon() -> None:
    presence: dict[object, dict[str, float]] = {}
    note(presence, 1, "A", 5.0)
    note(presence, 1, "A", 3.0)  # a late instance: the latest start stays
    note(presence, 1, "B", 2.0)
    note(presence, 2, "B", 9.0)
    assert presence == {1: {"A": 5.0, "B": 2.0}, 2: {"B": 9.0}}
    prune(presence, lambda cls: 4.0)
    assert presence == {1: {"A": 5.0}, 2: {"B": 9.0}}
    prune(presence, lambda cls: 10.0)
    assert presence == {}
