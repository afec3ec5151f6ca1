"""The heap of matches waiting for the clock (ecq/matching/deadlines.py) and the engine's use of
it for trailing negation."""

from __future__ import annotations

import random

from ecq.compiler.query import compile_query
from ecq.engine import Engine
from ecq.event import Event
from ecq.language import parse_query
from ecq.matching.candidate import Cand
from ecq.matching.deadlines import Deadlines
from ecq.structures.qstate import QState


def _node(name: str, bitno: int) -> QState:
    cq = compile_query(name, parse_query("SEQ(A, B, !C) WITHIN 5"))
    return QState(cq, bitno, bitno, 0)


def _cand(t: float) -> Cand:
    e = Event("s", "A", t)
    return Cand([e], t, t, 1.0, e, (), frozenset())


def test_due_matches_come_out_in_deadline_order_and_only_once_passed() -> None:
    rng = random.Random(7)
    d = Deadlines()
    qs = _node("q", 0)
    deadlines = [rng.choice((1.0, 2.0, 3.5, 8.0)) for _ in range(40)]
    for t in deadlines:
        d.add(t, qs, _cand(t))
        d._check()
    assert qs.waiting == 40 and d.earliest == min(deadlines)
    assert d.due(1.0) == []  # the clock must exceed a deadline
    got = d.due(3.5)
    assert [c.start for _, c in got] == sorted(t for t in deadlines if t < 3.5)
    assert d.earliest == min(t for t in deadlines if t >= 3.5)
    assert qs.waiting == 40 - len(got)
    d._check()


def test_equal_deadlines_keep_the_order_they_came_in() -> None:
    d = Deadlines()
    a, b = _node("a", 0), _node("b", 1)
    first, second, third = _cand(1.0), _cand(1.0), _cand(1.0)
    d.add(4.0, b, first)
    d.add(4.0, a, second)
    d.add(4.0, b, third)
    assert [c for _, c in d.due(5.0)] == [first, second, third]


def test_a_dead_node_loses_its_waiting_matches() -> None:
    d = Deadlines()
    gone, kept = _node("gone", 0), _node("kept", 1)
    d.add(1.0, gone, _cand(0.0))
    d.add(2.0, kept, _cand(0.0))
    gone.live = False
    d.drop_dead()
    assert d.earliest == 2.0 and len(d) == 1
    assert [q for q, _ in d.due(10.0)] == [kept]


def test_engine_keeps_one_heap_and_drops_an_unregistered_querys_matches() -> None:
    eng = Engine()
    eng.register("q", "SEQ(A, B, !C) WITHIN 5")
    eng.register("r", "SEQ(A, !C) WITHIN 3")
    eng.process([Event("s", "A", 1.0), Event("s", "B", 2.0), Event("t", "A", 2.5)])
    assert eng.stats()["pending_matches"] == 3
    assert eng.network.next_deadline == 4.0
    eng.unregister("r")
    assert eng.stats()["pending_matches"] == 1
    assert eng.network.next_deadline == 6.0
    out = eng.advance_time(7.0)
    assert [(m.query, m.arrivals()) for m in out] == [("q", [0, 1])]
    assert eng.stats()["pending_matches"] == 0 and eng.network.next_deadline == float("inf")
