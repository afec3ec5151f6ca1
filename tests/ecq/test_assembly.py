"""Assembling a plain sequence's matches (ecq/matching/assembly.py) on its own: the stored
predecessors with their PMBs, walked back from the completing instance."""

from __future__ import annotations

from ecq.compiler.query import compile_query
from ecq.event import Event
from ecq.language import parse_query
from ecq.matching.assembly import assemble_seq, by_recency
from ecq.structures.pmb import PMB
from ecq.structures.qstate import QState

OTHER = 1 << 5  # another query's bit


def node(text: str, reg: int = 0) -> QState:
    return QState(compile_query("q", parse_query(text), text), bitno=0, order=0, reg=reg)


def stored(qs: QState, spec: str) -> list[Event]:
    """``"a1 b2 c4"``: events of classes A, B, C starting at 1, 2, 4 in arrival order
    (moments 1, 3, 5), each with the PMB the test phase would have given it for ``qs``:
    position 0 reduced to the query's bit, position ``i`` the latest start of the
    partial match it ends (the latest earlier instance of position ``i - 1``'s chain).
    ``a1!`` gets a PMB without the query (another query's partial match only)."""
    out: list[Event] = []
    classes = [c.classes for c in qs.cq.comps]
    for n, token in enumerate(spec.split()):
        foreign = token.endswith("!")
        name = token.rstrip("!")
        cls = "".join(ch for ch in name if ch.isalpha()).upper()
        event = Event("s", cls, float("".join(ch for ch in name if ch.isdigit())), id=name)
        event.arrival, event.moment = n, 2 * n + 1
        position = next(i for i, c in enumerate(classes) if cls in c)
        bit = OTHER if foreign else qs.bit
        if position == 0:
            event.pmb = PMB(bit, None)
        else:
            earlier = [e for e in out if e.type in classes[position - 1] and e.pmb is not None]
            starts = [e.pmb.latest(position - 1, qs.bit, e.start) for e in earlier]
            starts = [t for t in starts if t is not None]
            event.pmb = PMB(0, {position: [(max(starts), bit)]} if starts else None)
        out.append(event)
    return out


def matches(qs: QState, spec: str) -> list[list[str]]:
    """Assemble what the last event of ``spec`` completes, the others stored."""
    *before, last = stored(qs, spec)

    def probe(cls: str) -> list[Event]:
        return [e for e in reversed(before) if e.type == cls]

    return [[str(e.id) for e in ents] for ents, _prob in assemble_seq(qs, last, probe)]


def test_recent_takes_the_most_recent_predecessors() -> None:
    assert matches(node("SEQ(A, B, C) WITHIN 10 s"), "a1 a2 b3 c4") == [["a2", "b3", "c4"]]


def test_all_takes_every_combination_most_recent_first() -> None:
    qs = node("SEQ(A, B, C) WITHIN 10 s MODE ALL")
    assert matches(qs, "a1 a2 b3 b4 c5") == [
        ["a2", "b4", "c5"],
        ["a1", "b4", "c5"],
        ["a2", "b3", "c5"],
        ["a1", "b3", "c5"],
    ]


def test_the_window_bounds_the_first_event() -> None:
    qs = node("SEQ(A, B, C) WITHIN 10 s MODE ALL")
    # c14 ends at 14: a first event must start at 4 or later.
    assert matches(qs, "a3 a5 b6 c14") == [["a5", "b6", "c14"]]
    assert matches(qs, "a3 b6 c14") == []  # b6's PMB says its partial match started at 3


def test_a_predecessor_without_the_query_in_its_pmb_is_passed_over() -> None:
    assert matches(node("SEQ(A, B) WITHIN 10 s"), "a1 a2! b3") == [["a1", "b3"]]


def test_instances_from_before_the_registration_are_not_used() -> None:
    # Registered at moment 2: a1 (moment 1) came before it, a2 (moment 3) after.
    qs = node("SEQ(A, B) WITHIN 10 s MODE ALL", reg=2)
    assert matches(qs, "a1 a2 b3") == [["a2", "b3"]]


def test_recent_backtracks_past_a_predecessor_that_fails_a_condition() -> None:
    qs = node("SEQ(A a, B b) WHERE a.x < b.x WITHIN 10 s")
    *before, last = stored(qs, "a1 a2 b3")
    before[0].attrs["x"], before[1].attrs["x"], last.attrs["x"] = 1, 9, 5

    def probe(cls: str) -> list[Event]:
        return [e for e in reversed(before) if e.type == cls]

    assert [[e.id for e in ents] for ents, _prob in assemble_seq(qs, last, probe)] == [["a1", "b3"]]


def test_the_probability_bound_is_part_of_being_a_match() -> None:
    qs = node("SEQ(A, B) WITHIN 10 s PROBABILITY >= 0.5")
    *before, last = stored(qs, "a1 a2 b3")
    before[1].prob = 0.4

    def probe(cls: str) -> list[Event]:
        return [e for e in reversed(before) if e.type == cls]

    assert [[e.id for e in ents] for ents, _prob in assemble_seq(qs, last, probe)] == [["a1", "b3"]]


def test_a_position_of_several_classes_walks_them_by_recency() -> None:
    qs = node("SEQ(ANY(A, B), C) WITHIN 10 s MODE ALL")
    assert matches(qs, "a1 b2 a3 c4") == [["a3", "c4"], ["b2", "c4"], ["a1", "c4"]]
    x, y, z = stored(qs, "a1 b2 a3")
    assert list(by_recency([[z, x], [y]])) == [z, y, x]
