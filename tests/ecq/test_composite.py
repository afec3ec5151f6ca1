"""The matching rules of composite patterns (ecq/matching/composite.py) on their own: a node, the
instances stored for it, and the arriving one, without the network around them."""

from __future__ import annotations

from ecq.compiler.query import compile_query
from ecq.event import Event
from ecq.language import parse_query
from ecq.matching.candidate import Cand
from ecq.matching.composite import (
    Context,
    before,
    bound_ok,
    complete,
    derived_instance,
    entry_key,
    entry_prims,
    inst_key,
    match_cand,
    probability,
    trailing_factor,
)
from ecq.structures.qstate import QState


def node(text: str) -> QState:
    """A registered node, registered before every event below (moment 0)."""
    return QState(compile_query("q", parse_query(text), text), bitno=0, order=0, reg=0)


def events(spec: str, src: str = "s") -> list[Event]:
    """``"a1 b2 c4"``: events of classes A, B, C starting at 1, 2, 4, arriving in this
    order (arrival 0, 1, 2; moments 1, 3, 5); ``b2~0.25`` has probability 0.25."""
    out = []
    for n, token in enumerate(spec.split()):
        name, _, prob = token.partition("~")
        cls = "".join(ch for ch in name if ch.isalpha()).upper()
        event = Event(
            src, cls, float("".join(ch for ch in name if ch.isdigit())), id=name, prob=float(prob or 1)
        )
        event.arrival = n
        event.moment = 2 * n + 1
        out.append(event)
    return out


def arrive(qs: QState, spec: str) -> list[Cand]:
    """Store every event of ``spec`` but the last, then let the last arrive."""
    *stored, last = events(spec)
    return complete(qs, last, context(stored, last))


def context(stored: list[Event], arriving: Event | None, moment: int | None = None) -> Context:
    """The probe of what is stored: a class's instances, latest first."""

    def probe(cls: str) -> list[Event]:
        return [e for e in reversed(stored) if e.type == cls]

    now = moment if moment is not None else arriving.moment if arriving is not None else 10**6
    return Context(now, probe, arriving)


def bound(cands: list[Cand], qs: QState) -> list[list[object]]:
    return [[b.id if isinstance(b, Event) else [e.id for e in b] for b in c.entries(qs.cq)] for c in cands]


# --------------------------------------------------------------------------- negation


def test_a_blocker_between_the_neighbours_removes_the_match() -> None:
    qs = node("SEQ(A, !B, C) WITHIN 10 s")
    assert bound(arrive(qs, "a1 c3"), qs) == [["a1", "c3"]]
    assert arrive(qs, "a1 b2 c3") == []
    assert bound(arrive(qs, "b0 a1 c3"), qs) == [["a1", "c3"]]  # before a: no blocker


def test_an_uncertain_blocker_scales_the_probability() -> None:
    qs = node("SEQ(A, !B, C) WITHIN 10 s")
    [cand] = arrive(qs, "a1 b2~0.25 c3")
    assert cand.prob == 0.75


def test_a_leading_negation_looks_back_one_window_from_the_end() -> None:
    qs = node("SEQ(!B, A, C) WITHIN 10 s")
    assert arrive(qs, "b2 a3 c5") == []
    # b1 starts before c's end minus the window (15 - 10): it does not block.
    assert bound(arrive(qs, "b1 a8 c15"), qs) == [["a8", "c15"]]


def test_a_trailing_negation_counts_blockers_up_to_the_deadline() -> None:
    qs = node("SEQ(A, B, !C) WITHIN 10 s")
    stored = events("a1 b2 c5 c12~0.5")
    a1, b2, c5, c12 = stored
    [cand] = complete(qs, b2, context([a1], b2))
    # At the deadline (start 1 + 10): c5 arrived after b and ends in time; c12 too late.
    assert trailing_factor(qs, cand, context(stored, None)) == 0.0
    assert trailing_factor(qs, cand, context([a1, b2, c12], None)) == 1.0


# ----------------------------------------------------------------------- Kleene closure


def test_a_kleene_plus_takes_every_qualifying_event_between_its_neighbours() -> None:
    qs = node("SEQ(A, B+, C) WITHIN 10 s MODE ALL")
    assert bound(arrive(qs, "a1 b2 b3 b5 c6"), qs) == [["a1", ["b2", "b3", "b5"], "c6"]]
    assert arrive(qs, "a1 c6") == []  # the group must not be empty


def test_an_exact_count_slides_one_event_at_a_time() -> None:
    every = node("SEQ(A, B^2, C) WITHIN 10 s MODE ALL")
    assert bound(arrive(every, "a1 b2 b3 b5 c6"), every) == [
        ["a1", ["b2", "b3"], "c6"],
        ["a1", ["b3", "b5"], "c6"],
    ]
    recent = node("SEQ(A, B^2, C) WITHIN 10 s")
    assert bound(arrive(recent, "a1 b2 b3 b5 c6"), recent) == [["a1", ["b3", "b5"], "c6"]]


def test_a_trailing_exact_count_ends_with_the_arriving_event() -> None:
    qs = node("SEQ(A, B^2) WITHIN 10 s MODE ALL")
    assert bound(arrive(qs, "a1 b2 b3 b4"), qs) == [["a1", ["b3", "b4"]]]


def test_an_element_condition_decides_which_events_qualify() -> None:
    qs = node("SEQ(A a, B+ b, C c) WHERE b.x > a.x WITHIN 10 s MODE ALL")
    a1, b2, b3, c4 = events("a1 b2 b3 c4")
    a1.attrs["x"] = 5
    b2.attrs["x"] = 9
    b3.attrs["x"] = 1
    assert bound(complete(qs, c4, context([a1, b2, b3], c4)), qs) == [["a1", ["b2"], "c4"]]


# ------------------------------------------------------------------------ conjunctions


def test_a_conjunction_takes_events_in_any_order_inside_the_window() -> None:
    qs = node("AND(A, B) WITHIN 5 s")
    assert bound(arrive(qs, "b1 a3"), qs) == [["a3", "b1"]]
    assert arrive(qs, "b1 a7") == []  # the span 1..7 is over the window


def test_same_class_components_are_filled_in_arrival_order() -> None:
    qs = node("AND(A, A) WITHIN 5 s")
    assert bound(arrive(qs, "a1 a2"), qs) == [["a1", "a2"]]


def test_same_class_components_keep_arrival_order_even_when_a_condition_prefers_otherwise() -> None:
    qs = node("AND(A p, A q) WHERE p.x > q.x WITHIN 5 s")
    a1, a2 = events("a1 a2")
    a1.attrs["x"], a2.attrs["x"] = 1, 5
    assert complete(qs, a2, context([a1], a2)) == []  # p takes a1, q a2: 1 > 5 fails
    a1.attrs["x"], a2.attrs["x"] = 5, 1
    assert bound(complete(qs, a2, context([a1], a2)), qs) == [["a1", "a2"]]


def test_recent_mode_picks_the_most_recent_set() -> None:
    recent = node("AND(A, B) WITHIN 5 s")
    assert bound(arrive(recent, "a1 a2 b3"), recent) == [["a2", "b3"]]
    every = node("AND(A, B) WITHIN 5 s MODE ALL")
    assert bound(arrive(every, "a1 a2 b3"), every) == [["a2", "b3"], ["a1", "b3"]]


def test_a_negated_component_in_a_conjunction_forbids_an_event_inside_the_span() -> None:
    qs = node("AND(A, B, !C) WITHIN 5 s")
    assert arrive(qs, "a1 c2 b3") == []
    assert bound(arrive(qs, "c0 a1 b3"), qs) == [["a1", "b3"]]


# ------------------------------------------------------------- candidates and instances


def test_instance_order_and_sequence_order() -> None:
    a1, b2, c2 = events("a1 b2 c2")
    assert inst_key(a1) < inst_key(b2) < inst_key(c2)
    assert entry_key(a1) < entry_key([a1]) and entry_key([a1, b2]) < entry_key([b2])
    assert before(a1, b2) and not before(b2, a1)
    assert before(b2, c2)  # equal times: SCEMon's <=, arrival order breaks the tie
    assert before([a1], [b2, c2])


def test_probability_and_its_bound() -> None:
    a, b = events("a1~0.5 b2~0.5")
    assert probability([a, b]) == 0.25
    clause = compile_query("q", parse_query("SEQ(A, B) WITHIN 5 s PROBABILITY >= 0.5"))
    plain = compile_query("q", parse_query("SEQ(A, B) WITHIN 5 s"))
    assert not bound_ok(clause, 0.25) and bound_ok(clause, 0.5)
    assert bound_ok(plain, 0.01) and not bound_ok(plain, 0.0)


def test_a_derived_instance_is_the_match_made_into_an_event() -> None:
    a, b = events("a1~0.5 b4", src="card-7")
    cand = match_cand([a, b], b)
    assert (cand.start, cand.end, cand.prob, cand.entries(node("SEQ(A, B) WITHIN 5 s").cq)) == (
        1.0,
        4.0,
        0.5,
        [a, b],
    )
    prims = entry_prims([a, [b]])
    assert prims == frozenset({0, 1})
    derived = derived_instance(
        cand, "@q", {"total": 3}, 0.5, moment=4, arrival=2, entries=[a, b], flat=[a, b], prims=prims
    )
    assert (derived.src, derived.type, derived.start, derived.end, derived.attrs) == (
        "card-7",
        "@q",
        1.0,
        4.0,
        {"total": 3},
    )
    assert (derived.moment, derived.arrival, derived.parts, derived.prims) == (4, 2, [a, b], prims)
