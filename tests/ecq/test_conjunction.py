"""Conjunction and disjunction (docs/semantics.md §4); and the conjunctions an instance
may complete, from its source's presence (ecq/matching/conjunction.py): the bit-sliced count
gives exactly the queries whose every other class is present within their window, plus
the ones it cannot judge, through registrations and unregistrations in any order."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, cast

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from ecq import network
from ecq.compiler.query import compile_query
from ecq.engine import Engine
from ecq.event import Event
from ecq.kernel.select import status
from ecq.language import parse_query
from ecq.matching.candidate import Cand
from ecq.matching.composite import Context, complete
from ecq.matching.conjunction import (
    Presences,
    _by_count,
    _by_query,
    by_presence,
    candidates,
    link,
    own_bits,
    unlink,
)
from ecq.structures.ecq import ECQ
from ecq.structures.qstate import QState
from ecq.time.windows import Windows
from tests.ecq.harness import attr, cmp, comp, feed, ids, lit, make_events, query

if TYPE_CHECKING:
    from ecq.kernel._kernel import CompiledKernel
    from ecq.kernel.pure import PureKernel

COMPILED = pytest.mark.skipif(not status().compiled, reason=str(status().reason))


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


@st.composite
def conjunctions(draw: st.DrawFn) -> str:
    """A conjunction, with one-event bounds on some of the classes it names once."""
    comps = draw(st.lists(st.sampled_from([*CLASSES, "ANY(A, B)", "ANY(B, C)"]), min_size=2, max_size=4))
    neg = draw(st.sampled_from(["", ", !D"]))
    named = [*comps, "D"] if neg else comps
    once = sorted({c for c in comps if c in CLASSES and named.count(c) == 1})
    bounds = [
        f"{c}.v {draw(st.sampled_from(['<', '>']))} {draw(st.integers(0, 4))}"
        for c in once
        if draw(st.booleans())
    ]
    where = f" WHERE {' AND '.join(bounds)}" if bounds else ""
    return f"AND({', '.join(comps)}{neg}){where} WITHIN {draw(st.sampled_from(WINDOWS)):g} s"


def passes(qs: QState, cls: str, value: int) -> bool:
    """The upper bound's filter test: an instance of ``cls`` passes ``qs``'s filter on
    it when exactly one positive component takes the class (else every one passes)."""
    comps = [qs.cq.comps[i] for i in qs.cq.positives if cls in qs.cq.comps[i].classes]
    if len(comps) != 1 or comps[0].filter is None:
        return True
    return comps[0].filter(Event("s", cls, 0.0, attrs={"v": value}))


def users(live: dict[int, QState], cls: str) -> list[QState]:
    return [qs for qs in live.values() if any(cls in qs.cq.comps[i].classes for i in qs.cq.positives)]


def expected(
    cls: str, live: dict[int, QState], present: dict[str, list[tuple[float, int]]], end: float, value: int
) -> int:
    """Directly: a query is a candidate when the arriving instance (``value``) passes
    its filter on ``cls`` and, if it is countable, each class it needs besides has an
    instance at the source passing its filter on that class and an instance passing
    some conjunction's filter on it (the latest) starting no earlier than ``end`` minus
    its window."""
    out = 0
    for qs in live.values():
        comps = [qs.cq.comps[i] for i in qs.cq.positives]
        if not any(cls in c.classes for c in comps) or not passes(qs, cls, value):
            continue
        if any(len(c.classes) != 1 for c in comps):
            out |= qs.bit
            continue
        left = Counter(next(iter(c.classes)) for c in comps)
        left[cls] -= 1
        window = qs.cq.window or 0.0
        if all(
            any(passes(qs, y, v) for _, v in present.get(y, ()))
            and end - max(t for t, v in present[y] if any(passes(o, y, v) for o in users(live, y))) <= window
            for y, n in left.items()
            if n > 0
        ):
            out |= qs.bit
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), conjunctions()), min_size=1, max_size=12),
    st.dictionaries(
        st.sampled_from(CLASSES),
        st.lists(
            st.tuples(st.sampled_from([0.0, 3.0, 8.0, 15.0, 19.0]), st.integers(0, 4)), min_size=1, max_size=3
        ),
    ),
    st.sampled_from([0.0, 10.0, 20.0, 30.0]),
    st.integers(0, 4),
)
def test_candidates_are_the_queries_whose_filters_and_other_classes_are_met(
    steps: list[tuple[bool, str]], values: dict[str, list[tuple[float, int]]], end: float, value: int
) -> None:
    """Both ways of counting (one query at a time, and the bit-sliced count) give the
    same candidates, from the instances' own bits as the network notes them."""
    ecqs = {cls: ECQ(cls) for cls in CLASSES}
    live: dict[int, QState] = {}
    for bitno, (drop, text) in enumerate(steps):
        qs = node(text, bitno)
        assert by_presence(qs)
        for cls in {c for i in qs.cq.positives for c in qs.cq.comps[i].classes}:
            link(ecqs[cls], qs)
        live[bitno] = qs
        if drop and len(live) > 1:
            gone = live.pop(min(live))
            for cls in {c for i in gone.cq.positives for c in gone.cq.comps[i].classes}:
                unlink(ecqs[cls], gone)
    presence = Presences()
    for cls, items in values.items():
        for t, v in items:
            presence.note("s", cls, t, own_bits(ecqs[cls], Event("s", cls, t, attrs={"v": v})))
    present = presence.get("s")
    windows = Windows({w: sum(q.bit for q in live.values() if q.cq.window == w) for w in WINDOWS})
    ecq = ecqs["A"]
    own = own_bits(ecq, Event("s", "A", end, attrs={"v": value}))
    want = expected("A", live, values, end, value)
    event(f"candidates: {bool(want)}")
    assert candidates(ecq, present, end, windows, own) == want
    final = ecq.cnj_final & own
    if present and ecq.cnj_count and final:
        loose = ecq.cnj_loose & own
        assert _by_query(ecq, present, end, final, loose) == want
        assert _by_count(ecq, present, end, windows, final, loose) == want
    for qs in list(live.values()):
        for cls in {c for i in qs.cq.positives for c in qs.cq.comps[i].classes}:
            unlink(ecqs[cls], qs)
    for e in ecqs.values():
        assert not (e.cnj_final or e.cnj_loose or e.cnj_need or e.cnj_count or e.cnj_each)
        assert e.cnj_filter is None


def test_a_second_component_of_the_arriving_class_needs_another_instance() -> None:
    ecq = ECQ("A")
    qs = node("AND(A, A, B) WITHIN 10 s", 0)
    link(ecq, qs)
    windows = Windows({10.0: qs.bit})
    bit = qs.bit
    assert candidates(ecq, {"B": (15.0, bit)}, 20.0, windows) == 0
    assert candidates(ecq, {"A": (4.0, bit), "B": (15.0, bit)}, 20.0, windows) == 0  # A too early
    assert candidates(ecq, {"A": (12.0, bit), "B": (15.0, bit)}, 20.0, windows) == bit


def test_an_instance_outside_a_query_s_filter_does_not_make_it_a_candidate() -> None:
    a, b = ECQ("A"), ECQ("B")
    qs = node("AND(A, B) WHERE A.v > 2 AND B.v < 5 WITHIN 10 s", 0)
    link(a, qs)
    link(b, qs)
    windows = Windows({10.0: qs.bit})
    assert own_bits(a, Event("s", "A", 20.0, attrs={"v": 1})) == 0
    assert own_bits(a, Event("s", "A", 20.0, attrs={"v": 3})) == qs.bit
    presence = Presences()
    presence.note("s", "B", 15.0, own_bits(b, Event("s", "B", 15.0, attrs={"v": 7})))
    assert presence.sources == {}  # an instance passing no filter is not noted
    assert candidates(a, presence.get("s"), 20.0, windows, qs.bit) == 0
    presence.note("s", "B", 16.0, own_bits(b, Event("s", "B", 16.0, attrs={"v": 4})))
    assert candidates(a, presence.get("s"), 20.0, windows, qs.bit) == qs.bit


@pytest.mark.parametrize(
    "compiled",
    [pytest.param(True, marks=pytest.mark.skipif(not status().compiled, reason=str(status().reason))), False],
)
def test_a_conjunction_is_assembled_only_when_every_filter_can_be_met(
    compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The arriving instance's own bound, and its partners' bounds, are checked with
    query bitsets before any assembly: an event that fails them costs no assembly call
    (before, every event of the class reached ``composite.complete``)."""
    calls: list[str] = []

    def counting(qs: QState, x: Event, ctx: Context) -> list[Cand]:
        calls.append(str(x.id))
        return complete(qs, x, ctx)

    monkeypatch.setattr(network, "complete", counting)
    text = "AND(A, B) WHERE A.v > 2 AND B.v < 5 WITHIN 10 s"
    events = make_events("b1 a2 a3 b4 a5 b6")
    for e, v in zip(events, [9, 1, 3, 1, 1, 7], strict=True):
        e["attrs"] = {"v": v}
    later = make_events("a20 b21")
    for e, v in zip(later, [1, 8], strict=True):
        e["attrs"] = {"v": v}
    # A query registered later, with other bounds: the filters' index is made anew.
    wider = "AND(A, B) WHERE A.v > 0 AND B.v < 9 WITHIN 10 s"
    engine = Engine(clean_every=3, compiled=compiled)
    matches = feed([("q", text)], [*events, ("register", "r", wider), *later], engine)
    # b1 fails B's bound, a2 A's; a3 finds no B passing B's bound; b4 completes (a3, b4);
    # a5 fails A's bound; b6 fails B's bound; b21 completes (a20, b21) for r only.
    kernel = engine.network.kernel
    if compiled:
        # The compiled kernel assembles these conjunctions itself, in C.
        assert kernel.name == "compiled"
        assert calls == []
        conj = cast("CompiledKernel", kernel).conjunctions
        assert (conj.assembled, conj.handed) == (2, 0)
    else:
        assert calls == ["b4", "b21"]
    assert ids(matches) == [["a3", "b4"], ["a20", "b21"]]


@COMPILED
@pytest.mark.parametrize(
    ("text", "seen", "python"),
    [
        # Simple: assembled in C whatever the mode, conditions across events included.
        ("AND(A, B, C) WITHIN 10 s", [["a3", "b2", "c4"]], False),
        ("AND(A, B, C) WITHIN 10 s MODE ALL", [["a1", "b2", "c4"], ["a3", "b2", "c4"]], False),
        # a3 + b2 is not below c4: the next combination, most recent first.
        ("AND(A, B, C) WHERE A.v + B.v < C.v WITHIN 10 s", [["a1", "b2", "c4"]], False),
        ("AND(A, B, C) WITHIN 1 s", [], False),
        # Negation inside, one class in two components, a component of several
        # classes: in C too.
        ("AND(A, B, !D, C) WITHIN 10 s", [["a3", "b2", "c4"]], False),
        ("AND(A, A, C) WITHIN 10 s", [["a1", "a3", "c4"]], False),
        ("AND(ANY(A, B), C) WITHIN 10 s", [["a3", "c4"]], False),
        # Overlapping class sets (the assignment needs a search): handed back to Python.
        ("AND(A, ANY(A, C)) WITHIN 10 s", [["a1", "a3"], ["a3", "c4"]], True),
    ],
)
def test_the_compiled_kernel_assembles_conjunctions_and_hands_back_the_others(
    text: str, seen: list[list[str]], python: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def counting(qs: QState, x: Event, ctx: Context) -> list[Cand]:
        calls.append(str(x.id))
        return complete(qs, x, ctx)

    monkeypatch.setattr(network, "complete", counting)
    events = make_events("a1 b2 a3 c4")
    for e, v in zip(events, [1, 2, 5, 7], strict=True):
        e["attrs"] = {"v": v}
    engine = Engine(compiled=True)
    matches = feed([("q", text)], events, engine)
    assert ids(matches) == seen
    conj = cast("CompiledKernel", engine.network.kernel).conjunctions
    if python:
        assert calls and conj.handed == len(calls) and conj.assembled == 0
    else:
        # One assembly (c4's; a3 has no C to go with), none when the window rules it out.
        assert calls == [] and conj.assembled == (1 if seen else 0) and conj.handed == 0
    # The pure kernel finds the same.
    assert ids(feed([("q", text)], events, Engine(compiled=False))) == seen


def test_sub_patterns_and_named_classes_are_not_counted() -> None:
    assert not by_presence(node("AND(A, (SEQ(B, C))) WITHIN 10 s", 0))
    assert not by_presence(node("SEQ(A, B) WITHIN 10 s", 0))


def test_presence_keeps_the_latest_start_and_the_union_of_bits_and_goes_below_the_horizon() -> None:
    presence = Presences()
    presence.note(1, "A", 5.0, 0b01)
    presence.note(1, "A", 3.0, 0b10)  # a late instance: the latest start stays
    presence.note(1, "B", 2.0, 0b11)
    presence.note(1, "C", 2.0, 0)  # passes no filter: not noted
    presence.note(2, "B", 9.0, 0b01)
    assert presence.sources == {1: {"A": (5.0, 0b11), "B": (2.0, 0b11)}, 2: {"B": (9.0, 0b01)}}
    presence._check()
    presence.prune(lambda cls: 4.0)
    presence._check()
    # A's notes leave from the front while below: (1, 5.0) stops them, so the late one
    # (3.0) behind it stays, and A with it; B's first note goes, and B at source 1.
    assert presence.sources == {1: {"A": (5.0, 0b11)}, 2: {"B": (9.0, 0b01)}}
    presence.prune(lambda cls: {"A": 5.5, "B": 9.0}[cls])
    assert presence.sources == {2: {"B": (9.0, 0b01)}}
    presence._check()
    presence.prune(lambda cls: 10.0)
    assert presence.sources == {} and presence.notes == {} and presence.count == {}


@pytest.mark.parametrize(
    "compiled",
    [pytest.param(True, marks=COMPILED), False],
)
def test_cleaning_drops_a_class_s_noted_instances_as_its_siq_drops_them(compiled: bool) -> None:
    """Both kernels forget the noted instances of a class from the front of its queue
    while below its horizon, a source's entry with the last of them (O(dropped)): the
    same presence, and the same matches, as cleaning goes along."""
    text = "AND(A, B) WITHIN 10 s"
    engine = Engine(clean_every=10**9, compiled=compiled)
    engine.register("q", text)
    events = [Event(s, c, t) for s, c, t in [(1, "A", 0.0), (2, "A", 1.0), (1, "B", 30.0), (1, "A", 31.0)]]
    matches = engine.process(events)
    assert [[e.start for e in m.events] for m in matches] == [[31.0, 30.0]]
    kernel = engine.network.kernel

    def present() -> dict[object, dict[str, tuple[float, int]]]:
        if compiled:
            return cast("CompiledKernel", kernel).conjunctions.sources()
        return cast("PureKernel", kernel).presence.sources

    bit = engine.query_state("q").bit
    assert present() == {1: {"A": (31.0, bit), "B": (30.0, bit)}, 2: {"A": (1.0, bit)}}
    engine.clean()  # the horizon is 31 - 10: both A's before it go, and source 2
    assert present() == {1: {"A": (31.0, bit), "B": (30.0, bit)}}
    engine.process([Event(1, "B", 45.0)])
    engine.clean()
    assert present() == {1: {"B": (45.0, bit)}}


MIXED = [
    ("seq_first", "SEQ(A, B) WITHIN 10 s"),
    ("cnj_all", "AND(A, B) WITHIN 10 s MODE ALL"),
    ("cnj_recent", "AND(B, C, A) WITHIN 10 s"),
    ("cnj_return", "AND(A, B) WITHIN 10 s RETURN A.v + B.v AS total"),
    ("cnj_bound", "AND(A, B) WITHIN 10 s PROBABILITY >= 0.5"),
    ("cnj_read", "AND(C, B) WITHIN 10 s"),
    ("reader", "SEQ(@cnj_read, A) WITHIN 20 s"),
    ("seq_last", "SEQ(C, B) WITHIN 10 s"),
]


@pytest.mark.parametrize("names", [["seq_first", "cnj_all", "cnj_recent", "seq_last"], [n for n, _ in MIXED]])
def test_conjunctions_matches_are_numbered_with_the_sequences_in_emission_order(names: list[str]) -> None:
    """One event completes sequences and conjunctions, some of several matches (MODE
    ALL), some needing Python (RETURN, a probability clause, an ``@name`` reader): the
    compiled kernel's loop numbers them in the order of ``Emission.sort_key`` (the
    node's registration, then the events' arrival indexes), as the pure kernel does,
    and counts each query's matches."""
    texts = dict(MIXED)
    events = make_events("a1 c2 b3 a4 b5 c6 b7 a8")
    for k, e in enumerate(events):
        e["attrs"] = {"v": k}
        e["prob"] = 0.6 if k == 3 else 1.0
    got = []
    for compiled in [True, False] if status().compiled else [False]:
        engine = Engine(clean_every=2, compiled=compiled)
        matches = feed([(n, texts[n]) for n in names], events, engine)
        rows = [
            (m.query, m.event_ids(), m.seq, m.prob, m.start, m.end, m.trigger, dict(m.attrs)) for m in matches
        ]
        got.append((rows, {n: engine.query_state(n).matches for n in names}))
        if compiled:
            # The conjunctions were assembled in C (none handed back to Python).
            conj = cast("CompiledKernel", engine.network.kernel).conjunctions
            assert conj.assembled > 0 and conj.handed == 0
    rows, counts = got[-1]
    assert [r[2] for r in rows] == list(range(len(rows)))
    assert counts == {n: sum(r[0] == n for r in rows) for n in names}
    assert {r[0] for r in rows} >= {"seq_first", "cnj_all", "cnj_recent"}
    assert all(g == got[-1] for g in got)


@COMPILED
def test_conjunctions_handed_back_beyond_the_first_64_bits_are_the_right_ones() -> None:
    """The bits the compiled kernel hands back to Python are Python ints: a conjunction
    with bit 64 or more (a C shift of 1 gave a wrong bit there, and the network a
    KeyError) is assembled as the pure kernel assembles it."""
    fillers = [(f"f{i}", f"AND(D, E) WHERE D.v > {i} WITHIN 10 s") for i in range(70)]
    # One class in two overlapping components: always handed back to Python.
    queries = [*fillers, ("q", "AND(A, ANY(A, B)) WITHIN 10 s MODE ALL")]
    events = make_events("a1 b2 a3")
    got = [ids(feed(queries, events, Engine(compiled=c))) for c in (True, False)]
    assert got[0] == got[1] == [["a1", "b2"], ["a1", "a3"], ["a3", "b2"]]


# Conjunctions the compiled kernel assembles in C beyond distinct classes: negation
# (blockers of one class or several, a blocker condition that reads other components,
# a negated class that is also a positive one), a class in several components, and
# components of several classes; RECENT and ALL, probability clauses.
KERNEL_SHAPES = [
    ("neg", "AND(A, B, !C) WITHIN 6 s"),
    ("neg_all", "AND(A, B, !C) WITHIN 6 s MODE ALL"),
    ("neg_cond", "AND(A a, B b, !C c) WHERE c.v > a.v WITHIN 6 s MODE ALL"),
    ("neg_any", "AND(A, !ANY(C, D), B) WITHIN 6 s MODE ALL PROBABILITY >= 0.1"),
    ("neg_two", "AND(!D, A, B, !C) WHERE D.v < 3 WITHIN 8 s MODE ALL"),
    ("neg_own", "AND(A, B, !A) WITHIN 6 s MODE ALL"),
    ("neg_lone", "AND(B, !C) WITHIN 2 s MODE ALL"),
    ("same", "AND(A x, A y, B) WHERE x.v < y.v WITHIN 6 s MODE ALL"),
    ("same_recent", "AND(A, B, A) WITHIN 6 s"),
    ("same_filter", "AND(A x, A y) WHERE x.v > 1 AND y.v < 4 WITHIN 6 s MODE ALL"),
    ("any", "AND(ANY(A, C), B) WITHIN 6 s MODE ALL"),
    ("any_same", "AND(ANY(A, C) p, ANY(A, C) q, !D) WHERE p.v != q.v WITHIN 6 s MODE ALL"),
    ("cross", "AND(A, B, C) WHERE A.v + B.v < C.v + 2 WITHIN 6 s MODE ALL"),
]


def _kernel_stream() -> list[dict[str, object]]:
    events = make_events("a1 c1 b2 d2 a3 c4 a4 b5 d6 c6 a7 b8 b9 c9 a10")
    for k, e in enumerate(events):
        e["attrs"] = {"v": k % 5}
        e["prob"] = (1.0, 0.5, 0.9, 0.25)[k % 4]
        if k % 6 == 5:
            e["end"] = float(e["start"]) + 1.0  # type: ignore[arg-type]
    return events


@COMPILED
@pytest.mark.parametrize(("name", "text"), KERNEL_SHAPES)
def test_negation_repeated_classes_and_any_are_assembled_in_c_as_in_python(name: str, text: str) -> None:
    """Each shape, alone and with every other registered (so the shared reads of the
    classes' instances and blockers serve several queries): the compiled kernel
    assembles them itself and finds the pure kernel's matches, probabilities to the
    last bit, numbers and all."""
    events = _kernel_stream()
    for queries in ([(name, text)], KERNEL_SHAPES):
        got = []
        for compiled in (True, False):
            engine = Engine(clean_every=4, compiled=compiled)
            matches = feed(queries, events, engine)
            got.append([(m.query, m.event_ids(), m.seq, m.prob, m.start, m.end, m.trigger) for m in matches])
            if compiled:
                conj = cast("CompiledKernel", engine.network.kernel).conjunctions
                assert conj.handed == 0 and conj.assembled > 0
        assert got[0] == got[1]
        assert any(row[0] == name for row in got[0]), f"{name} finds no match: the test proves nothing"


def test_a_certain_blocker_removes_the_match_and_an_uncertain_one_scales_it() -> None:
    """docs/semantics.md §5 in a conjunction: an x of the negated class with
    min(start) <= x.start and x.end <= max(end) that arrived before the last event."""
    text = "AND(A, B, !C) WITHIN 10 s MODE ALL"
    for compiled in [True, False] if status().compiled else [False]:
        events = make_events("a1 c2 b3 c5 a6 b7")
        events[3]["prob"] = 0.5  # c5 lies in (a6, b7)? no: 5 < 6; it lies in (a1, b7)
        matches = feed([("q", text)], events, Engine(compiled=compiled))
        # (a1, b3) is blocked by c2 (certain); (a1, b7): c2 blocks; (a6, b3): c5 (0.5)
        # lies in [3, 6]; (a6, b7): nothing in [6, 7].
        assert [(m.event_ids(), m.prob) for m in matches] == [(["a6", "b3"], 0.5), (["a6", "b7"], 1.0)]


@COMPILED
def test_queries_with_the_same_condition_across_events_share_its_evaluation() -> None:
    """Queries whose conditions across events are the same once their components are
    named by role (class and rank) evaluate them once per combination of events: the
    windows, modes, component order and aliases differ; a different condition does
    not share. The matches are the pure kernel's."""
    base = "AND(A, B, C) WHERE A.v + B.v < C.v + 3 WITHIN {w} s MODE ALL"
    queries = [(f"q{w}", base.format(w=w)) for w in (20, 21, 22)]
    queries.append(("order", "AND(C c, A a, B b) WHERE a.v + b.v < c.v + 3 WITHIN 20 s MODE ALL"))
    queries.append(("recent", "AND(B, C, A) WHERE A.v + B.v < C.v + 3 WITHIN 20 s"))
    other = ("other", "AND(A, B, C) WHERE A.v + B.v <= C.v + 3 WITHIN 20 s MODE ALL")
    events = make_events("a1 b2 a3 c4 b5 c6 a7 c8")
    for k, e in enumerate(events):
        e["attrs"] = {"v": (3, 1, 0, 2, 4, 1, 2, 0)[k]}

    def run(qs: list[tuple[str, str]], compiled: bool) -> tuple[list[tuple[str, list[str]]], int, int]:
        engine = Engine(compiled=compiled)
        matches = feed(qs, events, engine)
        rows = [(m.query, [str(i) for i in m.event_ids()]) for m in matches]
        if not compiled:
            return rows, 0, 0
        conj = cast("CompiledKernel", engine.network.kernel).conjunctions
        return rows, conj.evaluated, conj.shared

    alone, once, _ = run(queries[:1], True)
    rows, evaluated, shared = run(queries, True)
    assert rows == run(queries, False)[0]
    assert alone and once > 0
    # Every combination the first query tries, the others try too (RECENT stops at its
    # first): evaluated once each, taken from the shared evaluation otherwise.
    assert evaluated == once and shared >= 3 * once
    rows, evaluated, _ = run([*queries, other], True)
    assert rows == run([*queries, other], False)[0]
    assert evaluated == 2 * once
