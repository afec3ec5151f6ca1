"""Negation that the kernels check themselves (``QState.negs``: the pure kernel's
``ecq.matching.skeleton.negation_factor``, the compiled kernel's ``ecq/kernel/_negation.pyx`` and
its heap of matches waiting for the clock): each rule of docs/semantics.md §5 at its
edge, on both kernels, against the reference, with the two kernels' matches equal to
the last bit."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ecq.engine import Engine
from ecq.kernel.select import status
from ecq.language import parse_query
from ecq.language.ast import to_json
from tests import reference
from tests.ecq.test_properties import engine_run, normalise

KERNELS = [False, None]  # the pure kernel, and the compiled one when built


def _ops(queries: list[tuple[str, str]], script: list[Any]) -> list[tuple[Any, ...]]:
    """Reference-style ops: the queries registered, then ``script`` (an event as
    ``(class, start[, end][, attrs][, prob])``, a number for a clock advance, or a
    ``("register" | "unregister", ...)`` op), then the clock flushed."""
    ops: list[tuple[Any, ...]] = [("register", name, to_json(parse_query(text))) for name, text in queries]
    for item in script:
        if isinstance(item, (int, float)):
            ops.append(("time", float(item)))
        elif item[0] == "register":
            ops.append(("register", item[1], to_json(parse_query(item[2]))))
        elif item[0] == "unregister":
            ops.append(item)
        else:
            cls, start, *rest = item
            ev: dict[str, Any] = {"src": 1, "type": cls, "start": float(start)}
            for x in rest:
                if isinstance(x, dict):
                    ev["attrs"] = x
                elif isinstance(x, str):
                    ev["prob"] = float(x)
                else:
                    ev["end"] = float(x)
            ops.append(("event", ev))
    ops.append(("time", math.inf))
    return ops


def _run(queries: list[tuple[str, str]], script: list[Any]) -> list[dict[str, Any]]:
    """The matches of both kernels (which must be equal to the last bit) after checking
    them against the reference."""
    ops = _ops(queries, script)
    runs = []
    for compiled in KERNELS:
        if compiled is None and not status().compiled:
            continue
        got = engine_run(list(ops), compiled=compiled)
        assert normalise(got) == normalise(reference.evaluate(ops))
        runs.append(got)
    assert all(r == runs[0] for r in runs), "the kernels differ"
    return runs[0]


MIDDLE = [("q", "SEQ(A, !B, C) WITHIN 10")]


@pytest.mark.parametrize(
    ("blocker", "blocks"),
    [
        (("B", 1, 2), True),  # ends exactly when C starts
        (("B", 1, 2.5), False),  # ends after C starts
        (("B", 1), True),
        (("B", 0.5, 1), False),  # starts before A ends
    ],
)
def test_a_middle_blocker_lies_between_its_neighbours_in_time(blocker: tuple[Any, ...], blocks: bool) -> None:
    got = _run(MIDDLE, [("A", 0, 1), blocker, ("C", 2)])
    assert len(got) == (0 if blocks else 1)


def test_a_middle_blocker_must_arrive_between_its_neighbours() -> None:
    # B lies between A and C in time but arrived before A.
    assert len(_run(MIDDLE, [("B", 1.5), ("A", 1), ("C", 2)])) == 1
    assert len(_run(MIDDLE, [("A", 1), ("B", 1.5), ("C", 2)])) == 0


def test_a_right_neighbour_of_the_negated_class_does_not_block_itself() -> None:
    got = _run([("q", "SEQ(A, !B, B, C) WITHIN 10")], [("A", 0), ("B", 1), ("C", 2)])
    assert [m["events"] for m in got] == [[0, 1, 2]]


def test_recent_falls_back_to_an_older_left_neighbour_that_no_blocker_follows() -> None:
    # B follows the latest A; the older A ends after B starts: RECENT takes the older.
    got = _run(MIDDLE, [("A", 0, 1.6), ("A", 1), ("B", 1.5), ("C", 2)])
    assert [m["events"] for m in got] == [[0, 3]]


@pytest.mark.parametrize(("a", "blocks"), [(0, False), (0.75, False), (1, True), (1.5, True)])
def test_a_leading_blocker_lies_within_the_window_of_the_match_end(a: float, blocks: bool) -> None:
    # c.end - T = 6 - 5 = 1: an A starting at 1 or later blocks (the wider window of
    # another query keeps the earlier ones visible).
    queries = [("q", "SEQ(!A, B, C) WITHIN 5"), ("wide", "SEQ(A, D) WITHIN 100")]
    got = _run(queries, [("A", a), ("B", 5.5), ("C", 5.5, 6)])
    assert len(got) == (0 if blocks else 1)


def test_a_leading_blocker_must_arrive_after_the_registration() -> None:
    script = [("A", 1), ("register", "late", "SEQ(!A, B, C) WITHIN 5"), ("B", 2), ("C", 3)]
    got = _run([("early", "SEQ(!A, B, C) WITHIN 5")], script)
    assert [m["query"] for m in got] == ["late"]


def test_blocker_conditions_read_a_missing_attribute_as_true() -> None:
    queries = [("q", "SEQ(A a, !B b, C c) WHERE b.x > 3 WITHIN 10")]
    assert len(_run(queries, [("A", 0), ("B", 1, {"x": 1}), ("C", 2)])) == 1
    assert len(_run(queries, [("A", 0), ("B", 1, {"x": 5}), ("C", 2)])) == 0
    assert len(_run(queries, [("A", 0), ("B", 1), ("C", 2)])) == 0


def test_blocker_conditions_may_read_the_positive_components() -> None:
    queries = [("q", "SEQ(A a, !B b, C c) WHERE b.x > a.x WITHIN 10")]
    assert len(_run(queries, [("A", 0, {"x": 2}), ("B", 1, {"x": 1}), ("C", 2)])) == 1
    assert len(_run(queries, [("A", 0, {"x": 2}), ("B", 1, {"x": 3}), ("C", 2)])) == 0


def test_an_equivalence_test_reads_each_negated_component_alone() -> None:
    # B's x differs (no block); D's agrees and blocks, whatever B held.
    queries = [("q", "SEQ(A, !B, C, !D, E) WHERE [x] WITHIN 10")]
    x1, x2 = {"x": 1}, {"x": 2}
    assert len(_run(queries, [("A", 0, x1), ("B", 1, x2), ("C", 2, x1), ("D", 3, x1), ("E", 4, x1)])) == 0
    assert len(_run(queries, [("A", 0, x1), ("B", 1, x2), ("C", 2, x1), ("D", 3, x2), ("E", 4, x1)])) == 1


def test_uncertain_blockers_multiply_the_probability_in_chain_order() -> None:
    script = [("A", 0, "0.9"), ("B", 1, "0.5"), ("B", 1.5, "0.25"), ("B", 1.7, "0.3"), ("C", 2, "0.75")]
    got = _run(MIDDLE, script)
    factor = 1.0
    for p in (0.3, 0.25, 0.5):  # latest first
        factor *= 1.0 - p
    assert [m["prob"] for m in got] == [0.9 * 0.75 * factor]


def test_mode_all_checks_every_pair_of_neighbours() -> None:
    got = _run(
        [("q", "SEQ(A, !B, C) WITHIN 10 MODE ALL")], [("A", 0), ("A", 1), ("B", 1.5), ("A", 2), ("C", 3)]
    )
    assert [m["events"] for m in got] == [[3, 4]]


@pytest.mark.parametrize(
    ("blocker", "blocks"),
    [
        (("C", 4, 5), True),  # ends exactly at the deadline start + T = 5
        (("C", 4, 5.5), False),  # ends after it
        (("C", 0.5), False),  # starts before B ends
    ],
)
def test_a_trailing_blocker_ends_by_the_deadline(blocker: tuple[Any, ...], blocks: bool) -> None:
    got = _run([("q", "SEQ(A, B, !C) WITHIN 5")], [("A", 0), ("B", 0.5, 1), blocker])
    assert len(got) == (0 if blocks else 1)


def test_a_trailing_match_is_released_at_the_op_whose_clock_passes_its_deadline() -> None:
    # The C at 6 moves the clock past 5: the match is released before C is processed.
    got = _run([("q", "SEQ(A, B, !C) WITHIN 5")], [("A", 0), ("B", 1), ("C", 6)])
    assert [(m["events"], m["trigger"]) for m in got] == [([0, 1], 2)]
    # A clock advance to 5 does not pass it; a C then blocks.
    assert _run([("q", "SEQ(A, B, !C) WITHIN 5")], [("A", 0), ("B", 1), 5, ("C", 5)]) == []


def test_released_matches_keep_registration_then_arrival_order() -> None:
    queries = [("q1", "SEQ(A, B, !C) WITHIN 5 MODE ALL"), ("q0", "SEQ(A, !D) WITHIN 4")]
    got = _run(queries, [("A", 0), ("A", 0.5), ("B", 1), ("B", 1.5), 10])
    assert [(m["query"], m["events"]) for m in got] == [
        ("q1", [0, 2]),
        ("q1", [0, 3]),
        ("q1", [1, 2]),
        ("q1", [1, 3]),
        ("q0", [0]),
        ("q0", [1]),
    ]


def test_a_trailing_match_past_its_deadline_when_found_is_emitted_at_once() -> None:
    # The clock is at 20 when the late B completes the match (deadline 5); A stays
    # visible for the wider window of another query.
    queries = [("q", "SEQ(A, B, !C) WITHIN 5"), ("wide", "SEQ(A, D) WITHIN 100")]
    got = _run(queries, [("A", 0), ("C", 20, 21), ("B", 1), ("C", 3)])
    assert [(m["query"], m["trigger"]) for m in got] == [("q", 2)]


def test_the_probability_clause_applies_after_the_trailing_blockers() -> None:
    queries = [("q", "SEQ(A, B, !C) WITHIN 5 PROBABILITY >= 0.5")]
    assert len(_run(queries, [("A", 0), ("B", 1), ("C", 2, "0.4")])) == 1
    assert len(_run(queries, [("A", 0), ("B", 1), ("C", 2, "0.6")])) == 0


def test_probability_at_least_0_keeps_a_match_its_blockers_bring_to_0() -> None:
    # PROBABILITY >= 0 admits a probability of 0: a certain blocker makes it 0, and the
    # match is still emitted (the compiled loop once dropped every match of
    # probability 0 it emitted directly, whatever the bound).
    trailing = [("A", 0), ("B", 0.5), ("C", 0.75), ("A", 0.5), ("B", 6), ("A", 9)]
    for query, script in (
        ("SEQ(A, !A) WITHIN 1 PROBABILITY >= 0", trailing),
        ("SEQ(A, B, !C) WITHIN 5 PROBABILITY >= 0", trailing),
        ("SEQ(A, !C, B) WITHIN 5 PROBABILITY >= 0", [("A", 0), ("C", 1), ("B", 2)]),
        ("SEQ(!C, A, B) WITHIN 5 PROBABILITY >= 0", [("C", 0), ("A", 1), ("B", 2)]),
    ):
        got = _run([("q", query)], script)
        assert 0.0 in [m["prob"] for m in got], query
    # Without the clause, a probability of 0 is no match (the default bound is > 0).
    got = _run([("q", "SEQ(A, !A) WITHIN 1")], [("A", 0), ("A", 0.5), ("A", 9)])
    assert [(m["start"], m["prob"]) for m in got] == [(0.5, 1.0), (9.0, 1.0)]


def test_an_unregistered_query_drops_its_waiting_matches() -> None:
    queries = [("q", "SEQ(A, B, !C) WITHIN 5"), ("r", "SEQ(A, B, !C) WITHIN 6")]
    got = _run(
        queries, [("A", 0), ("B", 1), ("unregister", "q"), ("register", "q", "SEQ(A, !C) WITHIN 1"), 10]
    )
    assert [m["query"] for m in got] == ["r"]


def test_a_waiting_match_whose_query_is_read_through_at_name_makes_its_instance() -> None:
    # r reads q's matches (registered while q's match waits): the release goes through
    # the network, which makes the @q instance.
    script = [("A", 0), ("B", 1), ("register", "r", "SEQ(@q, D) WITHIN 20"), ("X", 7), ("D", 8)]
    got = _run([("q", "SEQ(A, B, !C) WITHIN 5")], script)
    assert [m["query"] for m in got] == ["q", "r"]


@pytest.mark.skipif(not status().compiled, reason=status().reason or "no compiled kernel")
def test_the_compiled_kernel_holds_the_waiting_matches_and_counts_them() -> None:
    eng = Engine(compiled=True)
    eng.register("q", "SEQ(A, B, !C) WITHIN 5")
    eng.register("r", "SEQ(A, B, !C) WITHIN 5 RETURN A.x AS x")  # RETURN: the network's
    from ecq.event import Event

    eng.process([Event(1, "A", 0.0), Event(1, "B", 1.0)])
    net = eng.network
    assert net.kernel.pending() == 1 and len(net.deadlines) == 1
    assert eng.stats()["pending_matches"] == 2
    assert net.next_deadline == 5.0 and net.own_deadline == 5.0
    eng.unregister("q")
    assert net.kernel.pending() == 0 and net.kernel.next_deadline == math.inf
    assert [m.query for m in eng.advance_time(6.0)] == ["r"]
    eng._check()
