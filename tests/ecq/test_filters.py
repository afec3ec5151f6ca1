"""The filter index (ecq/compiler/filters.py) against the filters' own predicates: every event
passes exactly the filters whose predicate (ecq/compiler/conditions.py) holds for it, on random
filters and events (missing attributes, mixed kinds, equal thresholds, inclusive and
exclusive bounds, NaN and infinities) and through random register/unregister
sequences."""

from __future__ import annotations

import math
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ecq.compiler.conditions import compile_predicate, predicate_maker
from ecq.compiler.filters import Atom, FilterIndex, LocalSlots, filter_key, split_filter
from ecq.compiler.query import compile_query
from ecq.event import Event
from ecq.language import parse_query
from ecq.language.ast import Arith, AttrRef, BoolOp, Compare, Expr, Func, InList, Lit, Not
from ecq.structures.ecq import SlotFilter
from tests.match_share import min_share, record

ATTRS = ("x", "y", "z")
OPS = ("<", "<=", ">", ">=", "=", "!=")
# Values that collide on purpose: 1, 1.0 and true; 0, -0.0 and false; equal thresholds.
NUMBERS: tuple[int | float, ...] = (-1, 0, -0.0, 1, 1.0, 1.5, 2, 3, math.inf, -math.inf)
VALUES: tuple[int | float | str | bool, ...] = (*NUMBERS, "a", "b", "", True, False)
WITH_NAN: tuple[int | float | str | bool, ...] = (*VALUES, math.nan)
# 200 examples each: the five properties took ~78 s of `make test` at 300; each still
# checks that a quarter of its examples pass some filter (min_share).
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def ref(name: str) -> AttrRef:
    return AttrRef("$self", name)


@st.composite
def atoms(draw: st.DrawFn) -> Expr:
    """One conjunct the index takes (or, now and then, a residual one)."""
    a = ref(draw(st.sampled_from(ATTRS)))
    choice = draw(st.integers(0, 9))
    if choice <= 4:
        op = draw(st.sampled_from(OPS))
        value = Lit(draw(st.sampled_from(WITH_NAN if choice == 0 else VALUES)))
        return Compare(op, a, value) if draw(st.booleans()) else Compare(op, value, a)
    if choice == 5:
        lo, hi = sorted(draw(st.lists(st.sampled_from(NUMBERS), min_size=2, max_size=2)))
        ops = draw(st.sampled_from((("<", "<"), ("<=", "<"), ("<", "<="), ("<=", "<="))))
        return BoolOp("and", (Compare(ops[0], Lit(lo), a), Compare(ops[1], a, Lit(hi))))
    if choice == 6:
        return InList(a, tuple(Lit(v) for v in draw(st.lists(st.sampled_from(WITH_NAN), max_size=3))))
    if choice == 7:
        return a  # a bare attribute: true when it is the boolean true
    if choice == 8:
        # A constant written as arithmetic: folded.
        return Compare(
            draw(st.sampled_from(OPS)), a, Arith("+", Lit(1), Lit(draw(st.sampled_from((0, 0.5, 2)))))
        )
    # Residuals: several attributes, arithmetic on the attribute, OR, NOT, a function.
    other = ref(draw(st.sampled_from(ATTRS)))
    residuals: list[Expr] = [
        Compare("<", a, other),
        Compare(">", Arith("+", a, Lit(1)), Lit(2)),
        BoolOp("or", (Compare("=", a, Lit(1)), Compare("=", other, Lit("a")))),
        Not(Compare("<", a, Lit(1))),
        Compare("<=", Func("abs", (a,)), Lit(1)),
    ]
    return residuals[draw(st.integers(0, len(residuals) - 1))]


filters = st.lists(atoms(), min_size=1, max_size=4).map(tuple)


@st.composite
def events(draw: st.DrawFn) -> Event:
    attrs = {}
    for name in ATTRS:
        value = draw(st.sampled_from((None, *VALUES, math.nan, 0.5, 2.5, "c")))
        if value is not None:
            attrs[name] = value
    return Event(draw(st.integers(0, 3)), "A", 1.0, attrs=attrs)


def expected(slot_filters: dict[int, tuple[Expr, ...]], e: Event) -> int:
    """The queries (bits) whose filter holds for ``e``, one predicate at a time."""
    bits = 0
    for bit, conjuncts in slot_filters.items():
        expr = conjuncts[0] if len(conjuncts) == 1 else BoolOp("and", conjuncts)
        if compile_predicate(expr, lambda r: 0, single=True)(e):
            bits |= 1 << bit
    return bits


def add(slot: SlotFilter, bit: int, conjuncts: tuple[Expr, ...]) -> None:
    expr = conjuncts[0] if len(conjuncts) == 1 else BoolOp("and", conjuncts)
    slot.add(1 << bit, compile_predicate(expr, lambda r: 0, single=True), filter_key(conjuncts), conjuncts)


@min_share(0.25)
@SETTINGS
@given(st.lists(filters, min_size=1, max_size=12), st.lists(events(), min_size=1, max_size=8))
def test_the_index_passes_exactly_the_filters_that_hold(fs: list[tuple[Expr, ...]], evs: list[Event]) -> None:
    slot = SlotFilter()
    for bit, f in enumerate(fs):
        add(slot, bit, f)
    slot.index._check()
    by_bit = dict(enumerate(fs))
    passed = []
    for e in evs:
        got = slot.passing(e)
        assert got == expected(by_bit, e), (fs, e.attrs)
        if got:
            passed.append(got)
    record(passed)  # examples where some filter holds: not all false


@min_share(0.25)
@SETTINGS
@given(
    st.lists(
        st.tuples(st.sampled_from(("add", "add", "remove", "event")), filters, events(), st.integers(0, 20)),
        min_size=1,
        max_size=30,
    )
)
def test_register_and_unregister_keep_the_index_exact(
    steps: list[tuple[str, tuple[Expr, ...], Event, int]],
) -> None:
    """Filters come and go (several queries may share one filter: the same conjuncts);
    after each step the index still gives exactly the filters that hold."""
    slot = SlotFilter()
    live: dict[int, tuple[Expr, ...]] = {}
    pool: list[tuple[Expr, ...]] = []
    passed = []
    for action, f, e, pick in steps:
        if action == "add":
            bit = min(set(range(len(live) + 1)) - set(live))
            # Now and then a filter another query already has: they share it.
            conjuncts = pool[pick % len(pool)] if pool and pick % 3 == 0 else f
            pool.append(conjuncts)
            add(slot, bit, conjuncts)
            live[bit] = conjuncts
        elif action == "remove" and live:
            bit = sorted(live)[pick % len(live)]
            slot.remove(1 << bit, filter_key(live.pop(bit)))
        slot.index._check()
        got = slot.passing(e)
        assert got == expected(live, e)
        if got:
            passed.append(got)
    record(passed)
    for bit, conjuncts in list(live.items()):
        slot.remove(1 << bit, filter_key(conjuncts))
    assert slot.empty() and not slot.index.attrs


def _rename(expr: Any, cls: str) -> Any:
    """``expr`` with the component placeholder ``$self`` named ``cls``."""
    import dataclasses

    if isinstance(expr, AttrRef):
        return AttrRef(cls, expr.attr)
    if dataclasses.is_dataclass(expr) and not isinstance(expr, Lit):
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(expr):
            value = getattr(expr, f.name)
            if isinstance(value, tuple):
                changes[f.name] = tuple(_rename(x, cls) for x in value)
            elif dataclasses.is_dataclass(value):
                changes[f.name] = _rename(value, cls)
        return dataclasses.replace(cast(Any, expr), **changes)
    return expr


@min_share(0.25)
@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 4), st.lists(filters, min_size=1, max_size=6)), min_size=1, max_size=3),
    st.lists(events(), min_size=1, max_size=6),
)
def test_local_numbers_give_each_place_what_its_index_gives(
    places: list[tuple[int, list[tuple[Expr, ...]]]], evs: list[Event]
) -> None:
    """LocalSlots (several places' filters over local numbers, the compiled kernel's
    layout) passes, per place, exactly what that place's own index passes: queries
    without a filter, filters shared by several queries, query numbers far apart."""
    slots = []
    for always, fs in places:
        slot = SlotFilter()
        for i in range(always):
            slot.add(1 << (3 * i), None, ())
        for bit, f in enumerate(fs):
            # Query numbers spread out (words apart), two queries on the first filter.
            add(slot, 100 * bit + 1, f)
            if bit == 0:
                add(slot, 2, f)
        slots.append(slot)
    local = LocalSlots([(slot.always, slot.index) for slot in slots])
    local._check()
    passed = []
    for e in evs:
        want = [slot.passing(e) for slot in slots]
        assert local.passing(e) == want, e.attrs
        passed += [bits for bits in want if bits]
    record(passed)


# Patterns with class A at one place (0 or 1) or two (0 and 2): a class's places are one
# index in the compiled kernel.
_SHAPES = (("A", "B"), ("B", "A"), ("A", "B", "A"))


def _register(engine: Any, name: str, shape: int, f: tuple[Expr, ...], extra: tuple[Expr, ...]) -> None:
    from ecq.language.ast import Component, Query, Seq

    classes = _SHAPES[shape]
    comps = tuple(Component(classes=(c,), alias=f"c{i}") for i, c in enumerate(classes))
    # The filter on the first A, the extra one on the second when there is one.
    first = classes.index("A")
    conjuncts = tuple(_rename(c, f"c{first}") for c in f)
    if len(classes) == 3:
        conjuncts += tuple(_rename(c, "c2") for c in (extra or f[:1]))
    else:
        conjuncts += tuple(_rename(c, f"c{first}") for c in extra)
    engine.register(name, Query(Seq(comps), BoolOp("and", conjuncts), within=10.0))


def by_position(passed: Any) -> dict[int, int]:
    """A kernel's ``passing`` as position -> query numbers (an int): the compiled
    kernel gives a dict of its sets when the class has no filter, else a Passing that
    the test phase reads in place."""
    if isinstance(passed, dict):
        return {k: bits.to_int() for k, bits in passed.items()}
    return cast(dict[int, int], passed.by_position())


@min_share(0.25)
@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 2), filters), min_size=1, max_size=10),
    st.lists(events(), min_size=1, max_size=6),
    st.sampled_from((0, 2**53, 2**60, -(2**70))),
    st.integers(0, 2**12 - 1),
)
def test_the_compiled_kernel_passes_what_the_index_passes(
    fs: list[tuple[int, tuple[Expr, ...]]], evs: list[Event], big: int, more: int
) -> None:
    """The compiled kernel's form of the index (one for all the places of a class, over
    local numbers, thresholds as doubles) gives the Python index's sets at every place,
    integers beyond what a double holds exactly included; and position 0's, among the
    queries that go on from it, as the insert phase makes them (``more``: any set,
    narrower or wider than the passing one)."""
    from ecq.engine import Engine
    from ecq.kernel.select import status

    if not status().compiled:
        pytest.skip(f"no compiled kernel: {status().reason}")
    engine = Engine(compiled=True)
    passed = []
    extra = (Compare("<", ref("x"), Lit(big)),) if big else ()
    for i, (shape, f) in enumerate(fs):
        _register(engine, f"q{i}", shape, f, extra if i % 3 == 0 else ())
    ecq = engine.network.ecqs["A"]
    kernel = engine.network.kernel
    odd = [big + 1, big, 2**60, -(2**70)]
    for e in [*evs, *(Event(1, "A", 1.0, attrs={"x": v, "y": v}) for v in odd)]:
        want = {k: slot.passing(e) for k, slot in ecq.seq_filters.items()}
        made = kernel.passing(ecq, e)
        assert by_position(made) == want, e.attrs
        if not isinstance(made, dict):
            # A _filters.Passing (the kernel interface types it as what test_phase takes).
            starts = cast(Any, made).starts
            for mask in (more, (1 << 100) - 1, 0):
                assert starts(mask) == (want[0] & mask if 0 in want else None), (e.attrs, mask)
        passed += [bits for bits in want.values() if bits]
    record(passed)


@min_share(0.25)
@SETTINGS
@given(
    st.lists(
        st.tuples(st.sampled_from(("add", "add", "remove", "other")), st.integers(0, 2), filters, events()),
        min_size=1,
        max_size=20,
    )
)
def test_the_compiled_index_follows_registrations(
    steps: list[tuple[str, int, tuple[Expr, ...], Event]],
) -> None:
    """Queries come and go (some on another class only) between events: the compiled
    index of a class is made anew when one of its filters changed, kept otherwise, and
    always gives what the Python index gives."""
    from ecq.engine import Engine
    from ecq.kernel.select import status

    if not status().compiled:
        pytest.skip(f"no compiled kernel: {status().reason}")
    engine = Engine(compiled=True)
    kernel = engine.network.kernel
    live: list[str] = []
    passed = []
    made: list[object] = []  # the class's compiled index after the last event
    for i, (action, shape, f, e) in enumerate(steps):
        if action == "add":
            _register(engine, f"q{i}", shape, f, ())
            live.append(f"q{i}")
        elif action == "remove" and live:
            engine.unregister(live.pop(shape % len(live)))
        elif action == "other":
            engine.register(f"o{i}", "SEQ(C, B) WHERE C.x > 1 WITHIN 10")
        ecq = engine.network.ecqs.get("A")
        if ecq is None:
            made = []
            continue
        want = {k: slot.passing(e) for k, slot in ecq.seq_filters.items()}
        got = kernel.passing(ecq, e)
        assert by_position(got) == want, e.attrs
        natives = [slot.native for slot in ecq.seq_filters.values()]
        if ecq.static_pass is None:
            # One index for every place; kept when only another class's queries changed.
            assert natives[0] is not None and all(x is natives[0] for x in natives)
            if action == "other" and made:
                assert natives[0] is made[0]
        made = natives
        passed += [bits for bits in want.values() if bits]
    record(passed)


@pytest.mark.parametrize("n_cuts", [1, 15, 16, 17, 255, 256, 257, 300, 4100])
def test_many_thresholds_on_one_attribute(n_cuts: int) -> None:
    """The compiled index walks an attribute's cuts as a tree of blocks of 16 (one to
    four levels here, partial blocks at every level): at each cut, between two, below
    and above all of them and at the infinities, it gives what the Python index
    gives."""
    from ecq.engine import Engine
    from ecq.kernel.select import status

    if not status().compiled:
        pytest.skip(f"no compiled kernel: {status().reason}")
    engine = Engine(compiled=True)
    ops = ("<", "<=", ">", ">=")
    for i in range(n_cuts):
        engine.register(f"q{i}", f"SEQ(A, B) WHERE A.x {ops[i % 4]} {i * 0.5} WITHIN 10")
    ecq = engine.network.ecqs["A"]
    kernel = engine.network.kernel
    values: list[float] = [-math.inf, math.inf, -1, n_cuts * 0.5, n_cuts * 0.5 + 7]
    values += [i * 0.5 for i in range(n_cuts)] + [i * 0.5 + 0.25 for i in range(n_cuts)]
    values += [i for i in range(0, n_cuts // 2 + 1, max(1, n_cuts // 40))]  # ints at the cuts
    for v in values:
        e = Event(1, "A", 1.0, attrs={"x": v})
        want = {k: slot.passing(e) for k, slot in ecq.seq_filters.items()}
        assert by_position(kernel.passing(ecq, e)) == want, v
    # A cut and the values next to it pass different filters: the test can tell cells apart.
    assert (
        len({by_position(kernel.passing(ecq, Event(1, "A", 1.0, attrs={"x": v})))[0] for v in values})
        > n_cuts
    )


def test_a_passing_still_held_says_what_its_instance_passed() -> None:
    """What the compiled index gives for an instance (a Passing, read in place by the
    test phase) is its own: the next instance's filters do not change it, nor does a
    registration that replaces the class's index while it is held."""
    from ecq.engine import Engine
    from ecq.kernel.select import status

    if not status().compiled:
        pytest.skip(f"no compiled kernel: {status().reason}")
    engine = Engine(compiled=True)
    for i, bound in enumerate((10, 20, 30)):
        engine.register(f"q{i}", f"SEQ(B, A) WHERE A.x > {bound} WITHIN 10")
    engine.register("plain", "SEQ(B, A) WITHIN 10")
    ecq = engine.network.ecqs["A"]
    kernel = engine.network.kernel
    low, high = Event(1, "A", 1.0, attrs={"x": 15}), Event(1, "A", 2.0, attrs={"x": 35})
    held = kernel.passing(ecq, low)
    assert by_position(held) == {1: 0b1001}
    assert by_position(kernel.passing(ecq, high)) == {1: 0b1111}
    assert by_position(held) == {1: 0b1001}
    engine.register("q4", "SEQ(B, A) WHERE A.x > 12 WITHIN 10")
    assert by_position(kernel.passing(engine.network.ecqs["A"], low)) == {1: 0b11001}
    assert by_position(held) == {1: 0b1001}


def test_a_bound_pair_is_two_half_lines() -> None:
    q = compile_query("q", parse_query("SEQ(A, B) WHERE $20 < A.payment <= $50 WITHIN 1h"))
    atoms_, rest = split_filter(q.comps[0].filter_conjuncts)
    assert atoms_ == [Atom("payment", ">", 20), Atom("payment", "<=", 50)] and rest == []
    slot = SlotFilter()
    slot.add(1, q.comps[0].filter, q.comps[0].filter_id, q.comps[0].filter_conjuncts)
    passing = [
        v for v in (19, 20, 20.5, 50, 50.0, 51) if slot.passing(Event(1, "A", 0, attrs={"payment": v}))
    ]
    assert passing == [20.5, 50, 50.0]


def test_booleans_are_not_numbers() -> None:
    slot = SlotFilter()
    for bit, value in enumerate((True, 1, 1.0, False, 0)):
        add(slot, bit, (Compare("=", ref("x"), Lit(value)),))
    assert slot.passing(Event(1, "A", 0, attrs={"x": True})) == 0b00001
    assert slot.passing(Event(1, "A", 0, attrs={"x": 1})) == 0b00110
    assert slot.passing(Event(1, "A", 0, attrs={"x": 0.0})) == 0b10000
    assert slot.passing(Event(1, "A", 0, attrs={"x": False})) == 0b01000
    assert slot.passing(Event(1, "A", 0)) == 0


def test_nan_compares_false_and_is_unequal_to_everything() -> None:
    slot = SlotFilter()
    exprs = [Compare(op, ref("x"), Lit(1)) for op in OPS]
    for bit, expr in enumerate(exprs):
        add(slot, bit, (expr,))
    assert slot.passing(Event(1, "A", 0, attrs={"x": math.nan})) == 1 << OPS.index("!=")
    assert slot.passing(Event(1, "A", 0, attrs={"x": math.inf})) == sum(
        1 << OPS.index(o) for o in (">", ">=", "!=")
    )


def test_event_fields_are_read_when_the_attribute_is_absent() -> None:
    q = compile_query("q", parse_query("SEQ(A, B) WHERE A.start >= 10 AND A.src = 'k' WITHIN 1h"))
    slot = SlotFilter()
    slot.add(1, q.comps[0].filter, q.comps[0].filter_id, q.comps[0].filter_conjuncts)
    assert slot.passing(Event("k", "A", 10)) == 1
    assert slot.passing(Event("k", "A", 9)) == 0
    assert slot.passing(Event("j", "A", 11)) == 0
    # An attribute of that name comes first.
    assert slot.passing(Event("j", "A", 11, attrs={"src": "k"})) == 1


def test_what_the_index_cannot_take_stays_a_residual() -> None:
    q = compile_query(
        "q", parse_query("SEQ(A, B) WHERE A.x > 1 AND (A.y = 1 OR A.z = 2) AND A.x + A.y < 9 WITHIN 1h")
    )
    atoms_, rest = split_filter(q.comps[0].filter_conjuncts)
    assert atoms_ == [Atom("x", ">", 1)]
    assert len(rest) == 2


@pytest.mark.parametrize("value", [math.nan, True])
def test_comparisons_that_never_hold_are_residual(value: Any) -> None:
    """``x < NaN`` and ``x < true`` are always false: the residual says so."""
    expr = Compare("<", ref("x"), Lit(value))
    assert split_filter((expr,)) == ([], [expr])


def test_a_burst_of_registrations_builds_each_attribute_once() -> None:
    index = FilterIndex()
    for i in range(1000):
        index.add(i, [i], [Atom("x", "<", i), Atom("y", "=", i % 7)], None)
    assert all(a.dirty for a in index.attrs.values())
    got = index.passing(Event(1, "A", 0, attrs={"x": 500, "y": 3}))
    assert all(not a.dirty for a in index.attrs.values())
    assert got == sum(1 << i for i in range(501, 1000) if i % 7 == 3)


@pytest.mark.parametrize("compiled", [False, None])
def test_queries_comparing_with_true_and_with_1_are_different_filters(compiled: bool | None) -> None:
    """``Lit(True) == Lit(1)`` in Python: the filter key must still tell them apart, or
    the second query would take the first one's filter."""
    from ecq.engine import Engine

    engine = Engine(compiled=compiled)
    engine.register("q1", "SEQ(A, B) WHERE A.x = true WITHIN 10")
    engine.register("q2", "SEQ(A, B) WHERE A.x = 1 WITHIN 10")
    engine.register("q3", "SEQ(A, B) WHERE A.x = 1.0 WITHIN 10")
    got = engine.process(
        [Event(1, "A", 1, attrs={"x": 1}), Event(1, "B", 2), Event(2, "A", 3, attrs={"x": True})]
    )
    got += engine.process([Event(2, "B", 4)])
    assert sorted((m.query, m.src) for m in got) == [("q1", 2), ("q2", 1), ("q3", 1)]


@given(st.lists(st.integers(0, 200_000), max_size=40))
def test_bit_numbers_lists_the_set_bits_in_order(numbers: list[int]) -> None:
    """The filter index's walk over a query set (read word by word, wide sets included)."""
    from ecq.compiler.filters import _bit_numbers

    bits = sum(1 << n for n in set(numbers))
    assert _bit_numbers(bits) == sorted(set(numbers))


@given(st.lists(st.integers(0, 3000), min_size=100, max_size=600), st.integers(0, 100_000))
def test_bit_numbers_of_a_dense_set(numbers: list[int], shift: int) -> None:
    """A set dense for its width is read word by word, one sparse for it bit by bit
    (the shift makes the same bits sparse in a wide set): both list them in order."""
    from ecq.compiler.filters import _bit_numbers

    bits = sum(1 << n for n in set(numbers))
    assert _bit_numbers(bits) == sorted(set(numbers))
    assert _bit_numbers(bits << shift) == [n + shift for n in sorted(set(numbers))]


# Values of every kind a comparison meets: numbers, strings, booleans, and no value.
_SIDES: list[int | float | str | bool] = [1, 2, 2.5, -0.0, "a", "b", "", True, False]


@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "=", "!="])
@pytest.mark.parametrize("negated", [False, True])
def test_a_constant_on_the_left_compares_as_written(op: str, negated: bool) -> None:
    """``const op A.x`` (compiled as ``A.x`` with the flipped operator) decides as the
    general comparison of the two values in the order written, for every kind of value
    on either side and for an event without ``x``."""
    from ecq.compiler.conditions import MISSING, compare_values

    for const in _SIDES:
        pred = compile_predicate(Compare(op, Lit(const), AttrRef("A", "x")), lambda r: 0, single=True, negated=negated)
        for value in [*_SIDES, MISSING]:
            attrs = {} if value is MISSING else {"x": value}
            e = Event("s", "A", 1.0, 1.0, attrs)
            assert pred(e) == compare_values(op, const, value, negated), (const, op, value)


@min_share(0.25)
@SETTINGS
@given(
    st.lists(st.tuples(filters, st.integers(0, 3)), min_size=1, max_size=12),
    st.permutations(range(12)),
    st.lists(st.integers(0, 11), max_size=6),
    st.lists(events(), min_size=1, max_size=6),
)
def test_queries_added_by_number_in_batches_pass_as_added_one_by_one(
    fs: list[tuple[tuple[Expr, ...], int]], numbers: list[int], leave: list[int], evs: list[Event]
) -> None:
    """A slot's filters hold their queries by number (SlotFilter.add_numbers, as a bulk
    registration adds them: several queries of one filter at once, numbers out of order
    where freed ones are reused, a filter met again joined): the same filters and
    queries as one query at a time (SlotFilter.add of its bit), the same sets passed by
    the pure index, by the local numbers the compiled kernel's index is made from, and
    after some queries leave."""
    one, bulk = SlotFilter(), SlotFilter()
    # Query numbers[i] has filter fs[i][0] (or, when fs[i][1] == 0, the one before it:
    # shared); the batch brings each filter's queries together, in the order met.
    batch: dict[Any, tuple[tuple[Expr, ...], list[int]]] = {}
    live: dict[int, tuple[Expr, ...]] = {}
    for i, (f, share) in enumerate(fs):
        conjuncts = live[numbers[i - 1] * 70] if share == 0 and i else f
        n = numbers[i] * 70  # words apart: sets wider than a word
        add(one, n, conjuncts)
        batch.setdefault(filter_key(conjuncts), (conjuncts, []))[1].append(n)
        live[n] = conjuncts
    for key, (conjuncts, ns) in batch.items():
        expr = conjuncts[0] if len(conjuncts) == 1 else BoolOp("and", conjuncts)
        pred = compile_predicate(expr, lambda r: 0, single=True)
        # Half the filters' queries arrive in a second batch: the filter is joined.
        half = len(ns) // 2
        bulk.add_numbers(ns[half:], pred, key, conjuncts)
        if half:
            bulk.add_numbers(ns[:half], pred, key, conjuncts)
    for gone in leave:
        n = sorted(live)[gone % len(live)]
        if len(live) > 1:
            conjuncts = live.pop(n)
            one.remove(1 << n, filter_key(conjuncts))
            bulk.remove(1 << n, filter_key(conjuncts))
    passed = []
    for slot in (one, bulk):
        slot.index._check()
        local = LocalSlots([(slot.always, slot.index)])
        local._check()
        for e in evs:
            got = slot.passing(e)
            assert got == expected(live, e)
            assert local.passing(e) == [got]
            passed.append(got)
    assert {k: one.index.queries[f] for k, f in one.groups.items()} == {
        k: bulk.index.queries[f] for k, f in bulk.groups.items()
    }
    record([bits for bits in passed if bits])


def _wide_ints(root: object, limit: int) -> list[int]:
    """The ints of more than ``limit`` bits reachable from ``root`` through containers
    and the attributes of objects with __slots__ or a __dict__ (each object once)."""
    seen: set[int] = set()
    found: list[int] = []
    todo = [root]
    while todo:
        x = todo.pop()
        if type(x) is int:
            if x.bit_length() > limit:
                found.append(x)
            continue
        if id(x) in seen or isinstance(x, (str, float, bool, type(None))) or callable(x):
            continue
        seen.add(id(x))
        if isinstance(x, dict):
            todo += [*x.keys(), *x.values()]
        elif isinstance(x, (list, tuple, set, frozenset)):
            todo += list(x)
        else:
            for cls in type(x).__mro__:
                todo += [getattr(x, s) for s in getattr(cls, "__slots__", ()) if hasattr(x, s)]
            todo += list(getattr(x, "__dict__", {}).values())
    return found


def test_registering_makes_no_set_as_wide_as_the_query_numbers_per_filter() -> None:
    """A filter's queries are kept by number: registering 2,000 conditioned queries (each
    its own filters) leaves no int wider than a word in any place's filter index. Sets
    over the query numbers, one per filter, made registering the 100,000th query an
    operation on 12 KB integers (and ~600 MB of them at 100,000). The pure kernel makes
    its sets when an event first reads them, and they pass what the filters hold."""
    from ecq.engine import Engine
    from ecq.evaluation.workload import Workload, condition_queries

    queries = condition_queries(Workload(n_queries=2000), 1)
    engine = Engine(compiled=False)
    engine.register_many(queries)
    slots = [s for e in engine.network.ecqs.values() for s in e.seq_filters.values() if s.groups]
    assert slots
    for slot in slots:
        assert _wide_ints(slot.index, 64) == [], "a set over the query numbers in the filter index"
    # Events then pass the same queries as each filter's own predicate says.
    ecq = next(e for e in engine.network.ecqs.values() if any(s.groups for s in e.seq_filters.values()))
    by_number = {qs.bitno: qs for qs in engine.network.queries.values()}
    for value in (0.0, 20.6, 50.0, 99.9):
        e = Event(1, ecq.cls, 1.0, attrs={"a0": value})
        for p, slot in ecq.seq_filters.items():
            want = 0
            for n in range(len(by_number)):
                qs = by_number[n]
                comp = qs.cq.comps[qs.slots[p]] if p < len(qs.slots) else None
                if comp is None or ecq.cls not in comp.classes or comp.filter is None:
                    continue
                if comp.filter(e):
                    want |= 1 << n
            assert slot.index.passing(e) == want


@SETTINGS
@given(st.lists(filters, min_size=2, max_size=12))
def test_equal_filter_ids_are_equal_filters(fs: list[tuple[Expr, ...]]) -> None:
    """A slot knows a filter by its filter_id (cheap to hash): two filters with one id
    are one filter (the same conjuncts, the same literals of the same types), so that a
    query is never given another's filter (a NaN literal equals nothing, itself
    included: such filters are equal when they are one object)."""
    from ecq.compiler.filters import filter_id

    for a in fs:
        for b in fs:
            if filter_id(a) == filter_id(b):
                assert filter_key(a) == filter_key(b) or any(
                    isinstance(x, float) and math.isnan(x) for x in _literal_values(a)
                ), (a, b)
    # Rebuilt (other objects), a filter has the same id.
    for a in fs:
        copied = cast(BoolOp, _rename(BoolOp("and", a), "$self")).operands
        assert filter_id(copied) == filter_id(a)


def _literal_values(conjuncts: tuple[Expr, ...]) -> list[Any]:
    from ecq.compiler.filters import filter_skeleton

    return [lit.value for lit in filter_skeleton(conjuncts)[1]]


def test_a_component_s_filter_id_is_what_its_conjuncts_give() -> None:
    """A query compiled from another of its shape (other literals, other classes) gets
    its filter_id from the shape's skeleton and its own literals: the same as
    filter_id(its conjuncts), so its filters are shared with queries compiled anew."""
    from ecq.compiler.filters import filter_id
    from ecq.evaluation.workload import Workload, condition_queries, credit_card_workload

    texts = credit_card_workload(n_queries=300)[0] + condition_queries(Workload(n_queries=300), 2)
    texts += [
        ("b1", "SEQ(A a, B b) WHERE a.x = true AND b.y = 1 WITHIN 5 s"),
        ("b2", "SEQ(A a, B b) WHERE a.x = 1 AND b.y = 1.0 WITHIN 5 s"),
        ("b3", "SEQ(A a, B b) WHERE a.x IN (1, 2, 'c') AND b.y != 'd' AND b.y < 1 + 2 WITHIN 5 s"),
        ("b4", "SEQ(A a, B b) WHERE a.x IN (1, 2, 'e') AND b.y != 'd' AND b.y < 2 + 2 WITHIN 5 s"),
    ]
    seen: dict[Any, Any] = {}
    for name, text in texts:
        cq = compile_query(name, parse_query(text), text)
        for comp in cq.comps:
            if comp.filter is None:
                assert comp.filter_id is None
                continue
            assert comp.filter_id == filter_id(comp.filter_conjuncts), text
            key = filter_key(comp.filter_conjuncts)
            assert seen.setdefault(comp.filter_id, key) == key, text
    assert len(seen) > 100


def _a_slot(engine: Any, queries: list[tuple[str, str]], bulk: bool) -> Any:
    """Class A's first sequence slot filter after registering ``queries`` in one batch
    (``bulk``) or one by one."""
    if bulk:
        engine.register_many(queries)
    else:
        for name, text in queries:
            engine.register(name, text)
    return engine.network.ecqs["A"].seq_filters[0]


@pytest.mark.parametrize("bulk", [False, True])
def test_queries_of_other_shapes_share_an_equal_filter(bulk: bool) -> None:
    """Equal filters of queries of different shapes (compiled anew or from a shape seen
    before, with other aliases) are one filter of the slot, one by one and in a batch."""
    from ecq.engine import Engine

    queries = [
        ("q1", "SEQ(A a, B b) WHERE a.x > 1.5 WITHIN 5 s"),
        ("q2", "SEQ(A c, C d) WHERE c.x > 1.5 AND d.y < 2 WITHIN 5 s"),
        ("q3", "SEQ(A e, C f) WHERE e.x > 1.5 AND f.y < 3 WITHIN 5 s"),
        ("q4", "SEQ(A g, B h) WHERE g.x > 2 WITHIN 5 s"),
        ("q5", "SEQ(A g, B h) WHERE g.x > true WITHIN 5 s"),
    ]
    slot = _a_slot(Engine(), queries, bulk)
    assert sorted(len(slot.index.queries[f]) for f in slot.groups.values()) == [1, 1, 3]


@pytest.mark.parametrize("bulk", [False, True])
def test_a_literal_of_another_type_is_another_filter(bulk: bool) -> None:
    """``x + 1`` and ``x + 1.0`` differ past 2**53 (an int's sum is exact, a float's
    rounds), and ``x = true`` is not ``x = 1``: filters equal as values (``1 == 1.0``)
    but with literals of other types are not one filter, so each query's slot passes
    what its own filter says."""
    from ecq.engine import Engine

    big = 2**60
    queries = [
        ("i", f"SEQ(A a, B b) WHERE a.x + 1 > {big} WITHIN 5 s"),
        ("f", f"SEQ(A a, B b) WHERE a.x + 1.0 > {big} WITHIN 5 s"),
        ("t", "SEQ(A a, B b) WHERE a.y = true WITHIN 5 s"),
        ("n", "SEQ(A a, B b) WHERE a.y = 1 WITHIN 5 s"),
    ]
    engine = Engine(compiled=False)
    slot = _a_slot(engine, queries, bulk)
    assert len(slot.groups) == 4
    for attrs in ({"x": big, "y": True}, {"x": big - 1, "y": 1}):
        e = Event(1, "A", 1.0, attrs=attrs)
        passed = slot.passing(e)
        for qs in engine.network.queries.values():
            own = qs.cq.comps[0].filter
            assert own is not None
            assert bool(passed >> qs.bitno & 1) == own(e), (qs.name, attrs)


@pytest.mark.parametrize("compiled", [False, None])  # the pure kernel, then the default one
def test_conditions_that_differ_in_a_numbers_type_match_apart(compiled: bool | None) -> None:
    """At ``x = 2**60``, ``x + 1 > 2**60`` holds (an int's sum is exact) and ``x + 1.0 >
    2**60`` does not (the float rounds): queries of the two are not one filter. (Before
    filters were told apart by their constants' types, both matched.)"""
    from ecq.engine import Engine

    big = 2**60
    engine = Engine(compiled=compiled)
    engine.register("int", f"SEQ(A a, B b) WHERE a.x + 1 > {big} WITHIN 5 s")
    engine.register("float", f"SEQ(A a, B b) WHERE a.x + 1.0 > {big} WITHIN 5 s")
    out = engine.process([Event("s", "A", 1.0, 1.0, {"x": big}), Event("s", "B", 2.0, 2.0)])
    assert [m.query for m in out] == ["int"]


def _with_values(node: Any, values: dict[int, Any]) -> Any:
    """``node`` with the value ``values[id(lit)]`` in each of its literals listed there."""
    if type(node) is Lit:
        return Lit(values[id(node)]) if id(node) in values else node
    if type(node) is tuple:
        return tuple(_with_values(x, values) for x in node)
    if isinstance(node, (Compare, BoolOp, InList, Not, Arith, Func)):
        return type(node)(**{k: _with_values(v, values) for k, v in vars(node).items()})
    return node


def _literals(node: Any) -> list[Lit]:
    if type(node) is Lit:
        return [node]
    if type(node) is tuple:
        return [lit for x in node for lit in _literals(x)]
    if isinstance(node, (Compare, BoolOp, InList, Not, Arith, Func)):
        return [lit for v in vars(node).values() for lit in _literals(v)]
    return []


@min_share(0.25)
@SETTINGS
@given(filters, st.data(), st.booleans(), st.lists(events(), min_size=1, max_size=8))
def test_a_filter_made_for_other_literals_is_the_filter_compiled_with_them(
    conjuncts: tuple[Expr, ...], data: st.DataObject, negated: bool, evs: list[Event]
) -> None:
    """``predicate_maker`` (what compiling a query of a known shape with other constants
    uses) makes what compiling the filter with those constants in place makes."""
    expr = conjuncts[0] if len(conjuncts) == 1 else BoolOp("and", conjuncts)
    if data.draw(st.booleans()):
        expr = BoolOp("or", (expr, *conjuncts))
    lits = _literals(expr)
    # Some literals are the query's (put in by place), the others the shape's own.
    places = {id(lit): i for i, lit in enumerate(lits) if data.draw(st.booleans())}
    values = [data.draw(st.sampled_from(WITH_NAN)) for _ in lits]
    make = predicate_maker(expr, places, negated)
    if make is None:
        record([])
        return
    made = make(values)
    want = compile_predicate(
        _with_values(expr, {key: values[i] for key, i in places.items()}), lambda r: 0, single=True, negated=negated
    )
    held = [e for e in evs if want(e)]
    assert [made(e) for e in evs] == [want(e) for e in evs], (expr, values)
    record(held)
