"""The compiled kernel (ecq/kernel/_*.pyx) against the pure one, on the same inputs:
same results and same changes to the structures they share. Skipped, with the reason,
when the compiled kernel is not built or ``SCEMON_PURE`` is set
(``test_the_compiled_kernel_is_built`` fails instead when CI requires it)."""

from __future__ import annotations

import copy
import math
import os
import pickle
import random
import subprocess
import sys
from collections import Counter
from typing import Any
from unittest.mock import patch

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ecq.engine import Engine
from ecq.errors import EventError
from ecq.evaluation.workload import Workload, events, sequence_queries
from ecq.event import FIELDS, Event
from ecq.kernel import make as kernel_make
from ecq.kernel.make import block_writer, column_reader, event_reader, lines_writer, match_writer
from ecq.kernel.select import compiled_module, status
from ecq.match import Match, PyMatch, write_block, write_lines
from ecq.network import Network
from ecq.structures.pmb import PMB

pytestmark = pytest.mark.skipif(not status().compiled, reason=f"{status().reason}")


def _module(name: str) -> Any:
    module = compiled_module(name)
    assert module is not None
    return module


def test_the_compiled_kernel_is_the_default() -> None:
    """Built by ``make install``, the compiled kernel runs unless a network asks for
    the pure one (or an ablation level only the pure one has)."""
    assert Engine().network.kernel.name == "compiled"
    assert Engine(compiled=True).network.kernel.name == "compiled"
    assert Engine(compiled=False).network.kernel.name == "pure"
    assert Engine(level="bitsets").network.kernel.name == "pure"
    with pytest.raises(ValueError, match="not 'bitsets'"):
        Engine(level="bitsets", compiled=True)


def _summaries(net: Network) -> dict[Any, Any]:
    return net.kernel.summary_view()


@pytest.mark.parametrize("n_queries", [60, 700])
def test_compiled_and_pure_engines_agree_on_the_paper_workload(n_queries: int) -> None:
    """Same matches, same stored instances, same PMBs and summaries, on the benchmark's
    own workload (with ANY components and filters mixed in, so every branch runs)."""
    w = Workload(n_queries=n_queries, n_sources=40, source_gap=300.0)
    queries = sequence_queries(w)
    rng = random.Random(7)
    # Beside the plain queries the compiled loop emits itself, queries that take the
    # Python path: ANY, a filter, MODE ALL, RETURN, a probability bound, a reader of
    # another query's matches, trailing negation, a Kleene closure on shared classes.
    extra = [
        ("any0", "PATTERN SEQ(ANY(C01, C02, C03) a, C04 b, C05 c) WITHIN 3 hours"),
        ("flt0", "PATTERN SEQ(C06 a, C07 b) WHERE a.start > 5000 WITHIN 2 hours"),
        ("all0", "PATTERN SEQ(C08 a, C09 b, C10 c) MODE ALL WITHIN 1 hour"),
        ("ret0", "PATTERN SEQ(C13 a, C14 b) WITHIN 2 hours RETURN b.end - a.start AS gap"),
        ("prb0", "PATTERN SEQ(C15 a, C16 b) WITHIN 2 hours PROBABILITY >= 0.5"),
        ("src0", "PATTERN SEQ(C17 a, C18 b) WITHIN 2 hours"),
        ("use0", "PATTERN SEQ(@src0 x, C19 c) WITHIN 3 hours"),
        ("neg0", "PATTERN SEQ(C20 a, C21 b, !C22 c) WITHIN 30 mins"),
        ("kln0", "PATTERN SEQ(C23 a, C24+ b, C25 c) WITHIN 1 hour"),
    ]
    engines = [Engine(clean_every=500, compiled=c) for c in (True, False)]
    for eng in engines:
        for name, text in queries + extra:
            eng.register(name, text)
    stream = list(events(w, 6000))
    outs: list[list[tuple[object, ...]]] = [[], []]
    for i in range(0, len(stream), 1000):
        chunk = stream[i : i + 1000]
        if i == 3000:  # unregister and register mid-stream
            drop = rng.sample([n for n, _ in queries], 5)
            for eng in engines:
                for name in drop:
                    eng.unregister(name)
                eng.register("late", "PATTERN SEQ(C11, C12) WITHIN 30 mins")
        for eng, out in zip(engines, outs, strict=True):
            batch = [Event(e.src, e.type, e.start, e.end, id=e.id) for e in chunk]
            out += [(m.query, m.seq, m.prob, tuple(m.arrivals())) for m in eng.process(batch)]
    for eng, out in zip(engines, outs, strict=True):
        out += [(m.query, m.seq, m.prob, tuple(m.arrivals())) for m in eng.advance_time(float("inf"))]
    assert outs[0] == outs[1]
    found = {query for query, *_ in outs[0]}
    assert {"any0", "all0", "ret0", "prb0", "src0", "use0", "neg0"} <= found, found
    # The compiled loop counts its matches in the node's plan; the stats add them up.
    per_query = engines[0].stats()["matches_per_query"]
    assert per_query == engines[1].stats()["matches_per_query"]
    assert per_query["all0"] > 0 and sum(per_query.values()) > len(found)
    a, b = (eng.network for eng in engines)
    assert a.kernel.name == "compiled" and b.kernel.name == "pure"
    assert _summaries(a) == _summaries(b)
    assert a.stored() == b.stored() and a.pmb_entries() == b.pmb_entries()
    assert a.ecqs and a.stored(), "nothing stored: the comparison below would be empty"
    for cls, ecq in a.ecqs.items():
        assert [(x.id, x.pmb.init, x.pmb.entries) for x in ecq.siq] == [
            (x.id, x.pmb.init, x.pmb.entries) for x in b.ecqs[cls].siq
        ]


def test_native_summaries_widen_as_queries_come_and_go() -> None:
    """Queries registered in waves get ever higher bit numbers, so the native summaries'
    rows must widen mid-stream (and bits be freed and reused after unregistering)."""
    w = Workload(n_queries=400, n_classes=8, n_sources=6, source_gap=200.0)
    queries = sequence_queries(w)
    engines = [Engine(clean_every=300, compiled=c) for c in (True, False)]
    stream = list(events(w, 4000))
    outs: list[list[tuple[object, ...]]] = [[], []]
    for wave in range(8):
        for eng, out in zip(engines, outs, strict=True):
            for name, text in queries[wave * 50 : (wave + 1) * 50]:
                eng.register(name, text)
            if wave >= 2:
                for name, _ in queries[(wave - 2) * 50 : (wave - 2) * 50 + 25]:
                    eng.unregister(name)
            chunk = stream[wave * 500 : (wave + 1) * 500]
            batch = [Event(e.src, e.type, e.start, e.end, id=e.id) for e in chunk]
            out += [(m.query, m.seq, tuple(m.arrivals())) for m in eng.process(batch)]
        a, b = (eng.network for eng in engines)
        assert _summaries(a) == _summaries(b)
    assert outs[0] == outs[1] and len(outs[0]) > 100


def test_chain_heads_survive_classes_leaving_and_coming_back() -> None:
    """A source's summary keeps the head of each class's back chain for assembling
    matches. When every query of a class leaves, its queue goes (and with it the
    instances the heads point to); a query registered later must not see them, and
    cleaning must not leave heads to dropped instances that a match could reach."""
    rng = random.Random(3)
    waves: list[list[tuple[int, str, float]]] = []
    clock = 0.0
    for _ in range(6):
        wave = []
        for _ in range(60):
            clock += rng.choice([0.0, 1.0, 2.0, 5.0])
            wave.append((rng.randrange(3), rng.choice("ABC"), clock))
        waves.append(wave)
        clock += rng.choice([0.0, 30.0, 100.0])
    engines = [Engine(clean_every=7, compiled=c) for c in (True, False)]
    outs: list[list[tuple[object, ...]]] = [[], []]
    for eng, out in zip(engines, outs, strict=True):
        for i, wave in enumerate(waves):
            eng.register(f"q{i}", "PATTERN SEQ(A a, B b, C c) WITHIN 50 secs")
            eng.register(f"k{i}", "PATTERN SEQ(B b, C c) WITHIN 20 secs")
            batch = [Event(src, cls, t, t) for src, cls, t in wave]
            out += [(m.query, m.seq, tuple(m.arrivals())) for m in eng.process(batch)]
            # Every query of A, B and C leaves: their queues go; the next wave's queries
            # start afresh on new ones.
            eng.unregister(f"q{i}")
            eng.unregister(f"k{i}")
            assert not eng.network.ecqs
    assert outs[0] == outs[1]
    assert len({q for q, *_ in outs[0]}) == 12


def test_long_sequences_and_probabilities_agree() -> None:
    """Sequences longer than the positions a plan keeps inline, MODE ALL, and events
    with probabilities (a match's is its events' product, in their order), compiled
    and pure Python."""
    w = Workload(n_queries=120, n_classes=6, n_steps=6, n_sources=5, source_gap=60.0)
    queries = sequence_queries(w)
    queries += [("all6", "PATTERN SEQ(C00, C01, C02, C03, C04, C05) MODE ALL WITHIN 10 mins")]
    rng = random.Random(11)
    stream = [
        Event(e.src, e.type, e.start, e.end, prob=rng.choice([1.0, 0.9, 0.7, 0.33]), id=e.id)
        for e in events(w, 3000)
    ]
    outs: list[list[tuple[object, ...]]] = []
    for compiled in (True, False):
        eng = Engine(clean_every=400, compiled=compiled)
        for name, text in queries:
            eng.register(name, text)
        batch = [Event(e.src, e.type, e.start, e.end, prob=e.prob, id=e.id) for e in stream]
        outs.append([(m.query, m.seq, m.start, m.prob, tuple(m.arrivals())) for m in eng.process(batch)])
    assert outs[0] == outs[1]
    assert len(outs[0]) > 50 and any(q == "all6" for q, *_ in outs[0])
    assert any(p not in (1.0, 0.0) for *_, p, _a in outs[0])


def test_cleaning_moves_a_chain_head_past_a_late_instance() -> None:
    """An instance arriving late (its start long before the clock) becomes its chain's
    head; cleaning must not lose the visible instances that arrived before it."""
    for compiled in (True, False):
        eng = Engine(clean_every=1, compiled=compiled)
        eng.register("q", "PATTERN SEQ(A a, B b) WITHIN 100 secs")
        got = eng.process([Event("s", "A", 300.0, 300.0, id="a1"), Event("s", "A", 150.0, 150.0, id="a2")])
        got += eng.process([Event("s", "B", 310.0, 310.0, id="b")])
        assert [m.event_ids() for m in got] == [["a1", "b"]], compiled


def test_native_summary_merges_and_prunes_as_the_python_summary() -> None:
    """A native summary's later entries (bucketed by the class each query waits for,
    invisible below a per-position mark until a sifting merge drops them) read as the
    Python summary after every kind of merge: later and earlier starts, a cutoff lower
    than one applied before, groups all below the cutoff on a source with no later
    entries yet, positions of several classes, longer sequences; then pruning, and
    extending from what is left."""
    texts = {
        "q1": "PATTERN SEQ(A, B, C) WITHIN 10 mins",
        "q2": "PATTERN SEQ(A, ANY(B, D), ANY(C, E)) WITHIN 10 mins",
        "q3": "PATTERN SEQ(B, C, D, E) WITHIN 10 mins",
        "q4": "PATTERN SEQ(D, B, C) WITHIN 5 mins",
    }
    nets = []
    for compiled in (True, False):
        eng = Engine(compiled=compiled)
        for name, text in texts.items():
            eng.register(name, text)
        nets.append(eng.network)
    native, pure = nets
    bit = {name: 1 << native.queries[name].bitno for name in texts}
    assert bit == {name: 1 << pure.queries[name].bitno for name in texts}
    one, two, three, four = bit["q1"], bit["q2"], bit["q3"], bit["q4"]
    steps: list[tuple[str, str, float, int, dict[int, list[tuple[float, int]]] | None, float]] = [
        ("s1", "A", 0.0, one | two, None, 0.0),
        ("s1", "B", 10.0, 0, {1: [(0.0, one | two)]}, 100.0),
        ("s1", "D", 20.0, four, {1: [(0.0, two)]}, 150.0),
        ("s1", "B", 30.0, 0, {1: [(20.0, four), (0.0, one)]}, 200.0),
        ("s1", "C", 40.0, 0, {2: [(30.0, three)]}, 250.0),
        # Later starts replace earlier ones, earlier ones leave later ones be.
        ("s1", "B", 50.0, 0, {1: [(45.0, one), (5.0, two | four)]}, 300.0),
        # A cutoff that hides the entries from before 80, then a lower one.
        ("s1", "B", 900.0, 0, {1: [(700.0, one), (50.0, two)]}, 680.0),
        ("s1", "B", 910.0, 0, {1: [(60.0, two | four)]}, 500.0),
        # A source with no later entries gets groups all below the cutoff.
        ("s2", "A", 0.0, one, None, 0.0),
        ("s2", "B", 5.0, 0, {1: [(0.0, one)]}, 1000.0),
    ]
    for src, cls, start, init, kept, hclock in steps:
        native.kernel.summarise(Event(src, cls, start, start), init, kept, hclock)
        pure.kernel.summarise(Event(src, cls, start, start), init, kept, hclock)
        assert _summaries(native) == _summaries(pure)
    for cls, keys in (("C", {2}), ("E", {2, 3}), ("D", set())):
        e = Event("s1", cls, 620.0, 620.0)
        ecq_a, ecq_b = native.ecqs[cls], pure.ecqs[cls]
        assert ecq_a.static_pass is not None and ecq_b.static_pass is not None
        got = native.kernel.extend(ecq_a, e, native.kernel.passing(ecq_a, e))
        assert got == pure.kernel.extend(ecq_b, e, pure.kernel.passing(ecq_b, e)), cls
        assert set(got) == keys, cls
    for clock in (1200.0, 1400.0, 5000.0):
        native.kernel.prune(clock)
        pure.kernel.prune(clock)
        assert _summaries(native) == _summaries(pure)
    assert not _summaries(native)


def test_sparse_pmb_groups_read_as_the_lists_they_stand_for() -> None:
    """The compiled insert phase stores ``NativePMB``s whose groups are ``Groups``
    (query numbers, not ints); Python code reading PMBs
    (init/entries, latest/extends/size/_check, the tests' comparisons) must see
    exactly a PMB with the lists of ``(start, int)`` tuples."""
    w = Workload(n_queries=300, n_sources=5, source_gap=120.0)
    eng = Engine(clean_every=10**9)
    for name, text in sequence_queries(w):
        eng.register(name, text)
    eng.process(list(events(w, 3000)))
    native = [
        g
        for ecq in eng.network.ecqs.values()
        for x in ecq.siq
        if x.pmb.entries
        for g in x.pmb.entries.values()
    ]
    assert native and all(type(g) is _module("_pmb").Groups for g in native)
    several = [g for g in native if len(g) > 1]
    assert several, "the workload should give instances several groups"
    for g in several:
        as_list = list(g)
        assert all(type(t) is float and type(bits) is int and bits > 0 for t, bits in as_list)
        assert [t for t, _ in as_list] == sorted((t for t, _ in as_list), reverse=True)
        seen = 0
        for _, bits in as_list:
            assert not bits & seen  # disjoint
            seen |= bits
        assert g == as_list and not g != as_list and as_list == g
        assert g[0] == as_list[0] and g[-1] == as_list[-1] and len(g) == len(as_list)
        t, bits = as_list[-1]
        assert g != [*as_list[:-1], (t, bits | (seen + 1))]
        assert g != as_list[:-1] and g != as_list[1:]
        assert repr(as_list) in repr(g)
        with pytest.raises(IndexError):
            g[len(as_list)]
    for ecq in eng.network.ecqs.values():
        for x in ecq.siq:
            pmb = x.pmb
            assert type(pmb) is _module("_pmb").NativePMB
            assert pmb.size() == PMB(pmb.init, pmb.entries).size() >= 1
            pmb._check()
            for k, groups in (pmb.entries or {}).items():
                for t, bits in groups:
                    low = bits & -bits
                    assert pmb.latest(k, low, x.start) == t
                    assert pmb.latest(k, low << 4096, x.start) is None
                    assert pmb.extends(k, low, t, x.start) and not pmb.extends(k, low, t + 1e-6, x.start)


def _fast_reader() -> Any:
    reader = event_reader()
    assert type(reader) is _module("_events").EventReader
    return reader


def _event_fields(e: Event) -> tuple[object, ...]:
    return tuple((name, getattr(e, name), type(getattr(e, name))) for name in FIELDS)


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(
        st.text(max_size=2), st.one_of(st.integers(), st.floats(), st.text(max_size=2), st.none())
    ),
)
_KEYS = st.sampled_from(["src", "type", "start", "end", "id", "prob", "attrs", "other"])


@settings(max_examples=600, deadline=None)
@given(
    good=st.fixed_dictionaries(
        {
            "src": st.one_of(st.integers(0, 5), st.text(min_size=1, max_size=2)),
            "type": st.sampled_from(["A", "B"]),
        },
        optional={
            "start": st.one_of(st.integers(0, 100), st.floats(0, 100)),
            "end": st.one_of(st.none(), st.integers(0, 200), st.floats(0, 200)),
            "id": st.one_of(st.none(), st.integers(), st.text(max_size=2)),
            "prob": st.one_of(st.none(), st.floats(0, 1), st.just(1)),
            "attrs": st.dictionaries(
                st.text(max_size=2), st.one_of(st.integers(), st.floats(), st.booleans())
            ),
        },
    ),
    noise=st.dictionaries(_KEYS, _VALUES, max_size=3),
    mix=st.booleans(),
)
def test_compiled_event_reader_builds_what_event_from_dict_builds(
    good: dict[str, object], noise: dict[str, object], mix: bool
) -> None:
    """The compiled event reader (scemon replay's and the ingest's) gives the
    same Event as ``Event.from_dict`` on well-formed input, and the same error on the
    rest (it hands anything unusual to ``Event.from_dict``)."""
    data = {**good, **noise} if mix else good
    fast = _fast_reader()
    try:
        want = Event.from_dict(data, "line 3")
    except EventError as err:
        with pytest.raises(EventError) as got:
            fast(data, "line 3")
        assert (got.value.message, got.value.where, got.value.field) == (err.message, err.where, err.field)
        return
    except OverflowError:
        with pytest.raises(OverflowError):
            fast(data, "line 3")
        return
    assert _event_fields(fast(data, "line 3")) == _event_fields(want)


_GOOD_ROW = st.fixed_dictionaries(
    {
        "src": st.one_of(st.integers(0, 5), st.text(min_size=1, max_size=2)),
        "type": st.sampled_from(["A", "B"]),
        "start": st.one_of(st.integers(0, 100), st.floats(0, 100)),
        "end": st.one_of(st.none(), st.floats(0, 100)),
        "prob": st.one_of(st.none(), st.floats(0.01, 1), st.just(1)),
        "id": st.one_of(st.none(), st.integers(), st.text(max_size=2)),
        "attrs": st.one_of(
            st.none(),
            st.dictionaries(
                st.text(max_size=2), st.one_of(st.integers(-(2**40), 2**40), st.floats(-9, 9), st.booleans())
            ).map(lambda d: orjson.dumps(d).decode()),
        ),
    }
)
# A value no well-formed row holds in that column (as Arrow's to_pylist could give it).
_BAD = {
    "src": st.sampled_from([None, 1.5]),
    "type": st.sampled_from([None, ""]),
    "start": st.sampled_from([None, math.nan, math.inf, "1"]),
    "end": st.sampled_from([-1.0, math.nan, -math.inf]),
    "prob": st.sampled_from([0.0, 1.5, -0.5, math.nan]),
    "id": st.sampled_from([1.5, b"x"]),
    "attrs": st.sampled_from(["[1]", "{", '{"a": [1]}', '{"a": null}', '{"a": {"b": 1}}', "1", "NaN"]),
}


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(_GOOD_ROW, min_size=1, max_size=6),
    spoil=st.one_of(st.none(), st.tuples(st.integers(0, 5), st.sampled_from(sorted(_BAD)), st.data())),
)
def test_compiled_column_reader_builds_what_event_from_dict_builds(
    rows: list[dict[str, Any]], spoil: Any
) -> None:
    """``EventReader.columns`` (the service's Arrow decoding): well-formed columns give,
    row by row, the Event that ``Event.from_dict`` gives; a column holding one value
    that no well-formed row holds gives None (the caller's general path names it)."""
    for row in rows:
        if row["end"] is not None:
            row["end"] = max(row["end"], float(row["start"]))
    if spoil is not None:
        index, name, data = spoil
        rows[index % len(rows)][name] = data.draw(_BAD[name])
    columns = {name: [row[name] for row in rows] for name in rows[0]}
    reader = column_reader()
    assert reader is not None
    got = reader(
        columns["src"],
        columns["type"],
        columns["start"],
        columns["end"],
        columns["attrs"],
        columns["prob"],
        columns["id"],
        orjson.loads,
    )
    if spoil is not None:
        assert got is None
        return
    assert got is not None
    for event, row in zip(got, rows, strict=True):
        data = {k: v for k, v in row.items() if v is not None and k != "attrs"}
        if row["attrs"] is not None:
            data["attrs"] = orjson.loads(row["attrs"])
        assert _event_fields(event) == _event_fields(Event.from_dict(data))
    # All events absent a column: the same as that column all null.
    none = reader(columns["src"], columns["type"], columns["start"], None, None, None, None, orjson.loads)
    bare = [{"src": row["src"], "type": row["type"], "start": row["start"]} for row in rows]
    assert none is not None
    assert [_event_fields(e) for e in none] == [_event_fields(Event.from_dict(d)) for d in bare]
    with pytest.raises(ValueError, match="differ in length"):
        reader(columns["src"], columns["type"][:-1], columns["start"], None, None, None, None, orjson.loads)


# The text of a JSON number in any of the ways a writer may put it (exponents, leading
# minus, long fractions, integers beyond 64 bits), and some that are not JSON numbers.
_NUMBER_TEXT = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda x: f"{x:.17e}"),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda x: f"{x:.3E}"),
    st.from_regex(r"-?(0|[1-9][0-9]{0,22})(\.[0-9]{1,22})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
    st.sampled_from(
        ["01", ".5", "1.", "1e", "-", "+1", "1e400", "-1e400", "1e-400", "NaN", "Infinity", "0x10"]
    ),
)
_STRING_TEXT = st.one_of(
    st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=6),
    st.text(max_size=4),
).map(lambda t: orjson.dumps(t).decode())
_SCALAR_TEXT = st.one_of(
    _NUMBER_TEXT, _STRING_TEXT, st.sampled_from(["true", "false", "null", "[1]", "{}", '{"a": 1}'])
)
_WS = st.sampled_from(["", " ", "  ", "\t", "\r"])


def _mostly(good: st.SearchStrategy[str], wild: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    # good four times in five: most lines are events, the rest fail somewhere.
    return st.integers(0, 4).flatmap(lambda k: good if k else wild)


# Non-negative numbers in every form (an end is drawn at or after them).
_TIME_TEXT = st.one_of(
    st.integers(0, 10**6).map(str),
    st.floats(0, 1e6).map(repr),
    st.floats(0, 1e6).map(lambda x: f"{x:.17e}"),
    st.from_regex(r"(0|[1-9][0-9]{0,5})(\.[0-9]{1,22})?([eE]-?[0-9])?", fullmatch=True),
)


@st.composite
def _event_line(draw: st.DrawFn) -> str:
    """A line of JSON Lines that is mostly an event: its fields in any order, each with
    a value of the right kind or not, attributes of any scalars; sometimes a field
    twice, an unknown one, or a mistake in the text itself."""
    good_src = st.one_of(_STRING_TEXT, st.integers(-5, 2**64).map(str))
    fields: dict[str, Any] = {
        "src": draw(_mostly(good_src, _SCALAR_TEXT)),
        "type": draw(_mostly(st.sampled_from(['"A"', '"B"', '"HOTL_E"', '"\\u00e9"']), _SCALAR_TEXT)),
        "start": draw(_mostly(_TIME_TEXT, _SCALAR_TEXT)),
    }
    scalar = st.one_of(_NUMBER_TEXT, _STRING_TEXT, st.sampled_from(["true", "false"]))
    for name, value in (
        (
            "end",
            _mostly(st.sampled_from(["null", "1e7", "9999999", "10000000.5", fields["start"]]), _NUMBER_TEXT),
        ),
        (
            "prob",
            _mostly(st.sampled_from(["1", "0.5", "1.0", "null", "1e-3", "0.3333333333333333"]), _SCALAR_TEXT),
        ),
        (
            "id",
            _mostly(
                st.one_of(_STRING_TEXT, st.integers(-(2**65), 2**65).map(str), st.just("null")), _SCALAR_TEXT
            ),
        ),
        ("attrs", _mostly(st.sampled_from(["null", "{}", "OBJECT", "OBJECT", "OBJECT"]), _SCALAR_TEXT)),
    ):
        if draw(st.booleans()):
            fields[name] = draw(value)
    if fields.get("attrs") == "OBJECT":
        # At least one pair: "{}" above is the empty object (drawn empty here too, the
        # events with attributes fell under their share of a run: 23 of 1,500 once).
        pairs = draw(st.lists(st.tuples(_STRING_TEXT, _mostly(scalar, _SCALAR_TEXT)), min_size=1, max_size=3))
        fields["attrs"] = "{" + ",".join(f"{k}{draw(_WS)}:{draw(_WS)}{v}" for k, v in pairs) + "}"
    names = draw(st.permutations(list(fields)))
    if draw(st.integers(0, 9)) == 0:
        names = [*names, draw(st.sampled_from(["src", "colour", "start", "attrs"]))]
    if draw(st.integers(0, 9)) == 0:
        names = names[1:]
    parts = [
        f'{draw(_WS)}"{name}"{draw(_WS)}:{draw(_WS)}{fields.get(name, "1")}{draw(_WS)}' for name in names
    ]
    text = draw(_WS) + "{" + ",".join(parts) + "}" + draw(_WS)
    if draw(st.integers(0, 19)) == 0:
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(st.sampled_from(["", ",", "}", '"', "x"])) + text[cut + 1 :]
    return text


def _strict_fields(e: Event) -> list[tuple[str, str, type]]:
    # Every field as its repr and type (-0.0 is not 0.0, 1 is not 1.0 nor True), the
    # attributes' values too.
    out = [(name, repr(getattr(e, name)), type(getattr(e, name))) for name in FIELDS if name != "attrs"]
    out += [(f"attrs.{k}", repr(v), type(v)) for k, v in e.attrs.items()]
    return out


def test_compiled_jsonl_reads_a_line_as_orjson_and_the_reader_read_it() -> None:
    """``EventReader.jsonl`` reads a plain line itself, no ``orjson.loads``: the same
    event (every field, its type, each float to the bit, the class name shared), or,
    for any line orjson or the reader refuses, it stops there for its caller to name the
    mistake; id-less events get their line's index. Fails too when too few lines of
    either kind were drawn."""
    seen: Counter[str] = Counter()

    @settings(max_examples=1500, deadline=None)
    @given(_event_line())
    def check(line: str) -> None:
        reader = _module("_events").EventReader(Event)
        try:
            want: Event | None = _fast_reader()(orjson.loads(line), None)
        except (orjson.JSONDecodeError, EventError):
            want = None
        data = ("\n" + line + "\n").encode()
        out: list[Event] = []
        at, index = reader.jsonl(data, 0, 6, orjson.loads, out, None)
        if want is None:
            seen["refused"] += 1
            assert (at, index, out) == (1, 7, [])
            return
        seen["event with attributes" if want.attrs else "event"] += 1
        assert (at, index) == (len(data), 8) and len(out) == 1
        if want.id is None:
            want.id = 7
        assert _strict_fields(out[0]) == _strict_fields(want)
        again: list[Event] = []
        reader.jsonl(data, 0, 0, orjson.loads, again, None)
        assert again[0].type is out[0].type

    check()
    total = sum(seen.values())
    assert seen["refused"] >= total // 5 and seen["event"] >= total // 10, seen
    assert seen["event with attributes"] >= total // 50, seen


def test_compiled_jsonl_reads_its_lines_itself() -> None:
    """The demo's kind of line (and the forms around it) is read without ``loads``:
    ``loads`` is not called for them, and is for a line with an escape."""
    calls: list[bytes] = []

    def loads(raw: bytes) -> Any:
        calls.append(raw)
        return orjson.loads(raw)

    lines = [
        '{"src":"card-0658","type":"HOTL_E","start":0.965,"end":0.965,"attrs":{"payment":190.17},"id":"p0"}',
        '{ "src" : 7 , "type" : "B" , "start" : 3 , "prob" : 0.5 , "attrs" : { "ok" : true , "n" : -0 } }',
        '{"src": 1, "type": "A", "start": 1e3, "end": null, "id": null, "attrs": null, "prob": null}',
        '{"src": "a\\u00e9", "type": "A", "start": 1}',
    ]
    out: list[Event] = []
    data = "\n".join(lines).encode()
    reader = _module("_events").EventReader(Event)
    assert reader.jsonl(data, 0, 0, loads, out, None) == (len(data), 4)
    assert calls == [lines[3].encode()]
    assert [e.id for e in out] == ["p0", 1, 2, 3]
    assert out[1].attrs == {"ok": True, "n": 0} and type(out[1].attrs["n"]) is int
    indexes: list[int] = []
    out = []
    reader.jsonl(data, 0, 10, loads, out, None, indexes)
    assert indexes == [10, 11, 12, 13] and [e.id for e in out] == ["p0", None, None, None]


def _short_decimals() -> list[str]:
    """Numbers at the edges of the reader's fast path (at most 15 significant digits,
    a decimal exponent within ±22) and just past them, halfway cases among them."""
    texts = ["0.0", "-0.0", "0.1", "0.3", "1e5", "1E+22", "1e22", "1e23", "1e-22", "1e-23", "-0e-400"]
    texts += ["123456789012345.0", "1234567890123456.0", "0.123456789012345", "0.1234567890123456"]
    texts += ["999999999999999e-22", "999999999999999e7", "999999999999999e8", "9007199254740993.0"]
    texts += ["4.35", "0.000000000000000000001", "0.0000000000000000000001", "100000000000000000000000.0"]
    texts += ["2.2250738585072014e-308", "1.7976931348623157e308", "5e-324", "0.5e-22", "190.17", "0e22"]
    rnd = random.Random(16)
    for _ in range(3000):
        digits = str(rnd.randrange(1, 10 ** rnd.randint(1, 17)))
        point = rnd.randint(0, len(digits))
        text = (digits[:point] or "0") + "." + (digits[point:] or "0")
        if rnd.random() < 0.5:
            text += f"e{rnd.randint(-26, 26)}"
        texts.append(("-" if rnd.random() < 0.3 else "") + text)
    return texts


def test_compiled_jsonl_reads_short_decimals_as_orjson_to_the_bit() -> None:
    """The scanner reads a short decimal by one exact operation (w * 10**e) instead of
    the general conversion: the same float as orjson's for every number at or past
    the fast path's edges."""
    texts = _short_decimals()
    data = "\n".join(f'{{"src":"s","type":"A","start":1,"attrs":{{"x":{t}}}}}' for t in texts).encode()
    out: list[Event] = []
    reader = _module("_events").EventReader(Event)
    assert reader.jsonl(data, 0, 0, orjson.loads, out, None) == (len(data), len(texts))
    got = [(t, _bits(e.attrs["x"])) for t, e in zip(texts, out, strict=True)]
    assert got == [(t, _bits(orjson.loads(t))) for t in texts]


def _bits(x: object) -> tuple[type, str]:
    # A float to the bit (its sign too: -0.0 is not 0.0), and that it is a float.
    return type(x), x.hex() if isinstance(x, float) else repr(x)


def test_compiled_event_reader_shares_class_names() -> None:
    fast = _fast_reader()
    a = fast({"src": "".join(["s", "1"]), "type": "".join(["Cl", "x"]), "start": 1})
    b = fast({"src": "".join(["s", "1"]), "type": "".join(["Cl", "x"]), "start": 2})
    assert a.type == b.type == "Clx" and a.type is b.type
    assert a.src == b.src == "s1" and a.src is b.src
    # The same from columns and from lines read without orjson (attribute names too).
    reader = _module("_events").EventReader(Event)
    got = reader.columns(
        ["".join(["s", "1"])] * 2, ["".join(["Cl", "x"])] * 2, [1, 2], None, None, None, None, orjson.loads
    )
    assert got[0].src is got[1].src and got[0].type is got[1].type
    line = b'{"src": "s1", "type": "Clx", "start": 1, "attrs": {"payment": 2}}\n'
    out: list[Event] = []
    reader.jsonl(line * 2, 0, 0, orjson.loads, out, None)
    assert out[0].src is out[1].src is got[0].src and out[0].type is got[0].type
    assert next(iter(out[0].attrs)) is next(iter(out[1].attrs))
    with pytest.raises(EventError):
        fast([1, 2], "line 1")
    # Each reader shares its own names: readers (and engines) share nothing.
    other = _fast_reader()({"src": 3, "type": "".join(["Cl", "x"]), "start": 3})
    assert other.type == a.type and other.type is not a.type


def test_compiled_match_writer_writes_what_to_dict_writes() -> None:
    """The compiled match writer (what ``scemon replay`` writes) equals
    ``Match.to_dict()``: plain matches, events without ids, Kleene groups, sub-patterns
    and ``@name`` readers (the last three through ``to_dict`` itself)."""
    eng = Engine()
    eng.register("seq", "PATTERN SEQ(A a, B b, C c) WITHIN 1 hour")
    eng.register("kln", "PATTERN SEQ(A a, B+ b, C c) WITHIN 1 hour")
    eng.register("src", "PATTERN SEQ(A a, B b) WITHIN 1 hour")
    eng.register("use", "PATTERN SEQ(@src x, C c) WITHIN 1 hour")
    stream = [
        Event(1, "A", 1.0, id="a1"),
        Event(1, "B", 2.0),
        Event(1, "B", 3.0, id=7),
        Event(1, "C", 4.0, id="c1"),
        Event(2, "A", 5.0),
        Event(2, "B", 6.0),
        Event(2, "C", 7.0),
    ]
    matches = eng.process(stream) + eng.advance_time(float("inf"))
    assert {m.query for m in matches} == {"seq", "kln", "src", "use"}
    write = match_writer()
    assert write is _fast_writer()
    for m in matches:
        assert write(m) == m.to_dict()
    plain = [m for m in matches if m.query == "seq"]
    assert [write(m)["events"] for m in plain] == [["a1", 7, "c1"], [4, 5, 6]]


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def _one_by_one(matches: list[Any], first: int) -> str:
    """The block as the service wrote it before the block writer: one ``dumps`` of each
    match's wire dict."""
    texts = []
    for seq, m in enumerate(matches, first):
        wire = m.to_dict()
        wire["seq"] = seq
        texts.append(orjson.dumps(wire).decode())
    return "[" + ",".join(texts) + "]"


def _check_lines(matches: list[Any]) -> None:
    """Matches as ``scemon replay`` writes them: the compiled writer, the pure one and
    ``orjson.dumps`` of each match's compiled wire dict (what replay wrote before), each
    with its own ``seq``."""
    written = lines_writer()(matches, _dumps)
    assert written == write_lines(matches, _dumps)
    wire = match_writer()
    assert written == b"".join(orjson.dumps(wire(m)) + b"\n" for m in matches)


def _check_block(matches: list[Any], first: int) -> None:
    _check_lines(matches)
    text, starts = block_writer()(matches, first, _dumps)
    assert (text, starts) == write_block(matches, first, _dumps)
    with patch.object(kernel_make, "BLOCK_CHUNK", 3):  # chunks end mid-block
        assert block_writer()(matches, first, _dumps) == (text, starts)
    assert text == _one_by_one(matches, first)
    assert len(starts) == len(matches) + 1 and starts[-1] == (len(text) if matches else 1)
    for k, m in enumerate(matches):
        wire = m.to_dict()
        wire["seq"] = first + k
        assert orjson.loads(text[starts[k] : starts[k + 1] - 1]) == orjson.loads(orjson.dumps(wire))


def test_compiled_block_writer_writes_what_dumps_writes_on_the_engines_matches() -> None:
    """A batch's matches as one text (what the service logs and sends): the compiled
    writer, the pure one and one ``orjson.dumps`` per wire dict give the same text,
    on matches the kernel made (events held inline, ids and arrivals, Kleene groups and
    ``@name`` readers, which go through ``to_dict``)."""
    eng = Engine()
    eng.register("seq", "PATTERN SEQ(A a, B b, C c) WITHIN 1 hour")
    eng.register("kln", "PATTERN SEQ(A a, B+ b, C c) WITHIN 1 hour")
    eng.register("src", "PATTERN SEQ(A a, B b) WITHIN 1 hour")
    eng.register("use", "PATTERN SEQ(@src x, C c) WITHIN 1 hour")
    eng.register("ret", "PATTERN SEQ(A a, C c) WITHIN 1 hour RETURN a.v AS v")
    stream = [
        Event(1, "A", 1.0, id="a1", attrs={"v": 2}),
        Event(1, "B", 2.0),
        Event(1, "B", 3.0, id=7),
        Event(1, "C", 4.0, id='c\u00e9"1'),
        Event("s\u00e9", "A", 5.5, id=2**62),
        Event("s\u00e9", "B", 6.000001),
        Event("s\u00e9", "C", 7.125, prob=0.3),
    ]
    matches = eng.process(stream) + eng.advance_time(float("inf"))
    assert {m.query for m in matches} == {"seq", "kln", "src", "use", "ret"}
    assert {m.src for m in matches} == {1, "s\u00e9"}
    assert all(type(m) is Match for m in matches)
    _check_block(matches, 0)
    _check_block(matches, 2**40)
    _check_block([], 5)


_json_text = st.text(st.characters(codec="utf-8"), max_size=6) | st.sampled_from(
    ["q1", 'a"b', "a\\b", "\x7f", "\n"]
)
_ints = st.integers(min_value=-(2**63), max_value=2**64 - 1)


@st.composite
def _matches(draw: st.DrawFn) -> Any:
    events: list[Any] = []
    for k in range(draw(st.integers(0, 4))):
        e = Event(1, "A", 0.0, id=draw(st.none() | _json_text | _ints))
        e.arrival = k
        events.append(e)
    grouped = draw(st.booleans())
    if events and grouped:
        events = [events[0], events[1:]]  # a Kleene group
    attrs: Any = draw(
        st.none() | st.dictionaries(st.sampled_from(["v", "w"]), _ints | st.floats(allow_nan=False))
    )
    return Match(
        draw(_json_text),
        draw(_json_text | _ints),
        draw(st.floats()),
        draw(st.floats()),
        events,
        attrs,
        draw(st.floats(allow_nan=False, allow_infinity=False)),
        draw(st.integers(-1, 2**63 - 1)),
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(_matches(), max_size=8), st.integers(0, 2**62))
def test_compiled_block_writer_writes_what_dumps_writes_on_any_match(matches: list[Any], first: int) -> None:
    """Any strings (escapes, non-ASCII), any 64-bit integers, any floats (exponents,
    -0.0, infinities, NaN, written by the encoder), groups and attributes: the same text
    as one ``dumps`` per match, and the same as the pure writer."""
    _check_block(matches, first)


def test_block_writers_fail_as_the_encoder_fails() -> None:
    """An integer beyond 64 bits is the encoder's to refuse: both writers raise its error."""
    m = Match("q", 2**70, 1.0, 2.0, [])
    for write in (block_writer(), write_block):
        with pytest.raises(orjson.JSONEncodeError):
            write([m], 0, _dumps)


def test_a_finished_block_text_takes_nothing_more() -> None:
    """The compiled block text is written once: adding after ``finish`` (or finishing
    twice) is an error, not a second text over the first one's buffer."""
    text = _module("_events").BlockText(_dumps, 1)
    m = Match("q", 1, 1.0, 2.0, [])
    text.add([m], 0, 1, 0)
    one = '{"query":"q","src":1,"start":1.0,"end":2.0,"events":[],"attrs":{},"prob":1.0,"seq":0}'
    assert text.finish() == ("[" + one + "]", [1, 1 + len(one) + 1])
    with pytest.raises(ValueError, match="finished"):
        text.add([m], 0, 1, 1)
    with pytest.raises(ValueError, match="finished"):
        text.finish()
    with pytest.raises(IndexError):
        _module("_events").BlockText(_dumps).add([m], 0, 2, 0)


def test_a_text_of_lines_is_read_as_lines_and_once() -> None:
    """A block's text and a text of lines are not read by each other's method, and
    either is read once."""
    m = Match("q", 1, 1.0, 2.0, [], None, 1.0, 41)
    lines = _module("_events").BlockText(_dumps, 1, lines=True)
    lines.add([m, m], 0, 2, 0)
    with pytest.raises(ValueError, match="finish_lines"):
        lines.finish()
    one = b'{"query":"q","src":1,"start":1.0,"end":2.0,"events":[],"attrs":{},"prob":1.0,"seq":41}\n'
    assert lines.finish_lines() == one + one
    with pytest.raises(ValueError, match="finished"):
        lines.finish_lines()
    block = _module("_events").BlockText(_dumps, 1)
    block.add([m], 0, 1, 0)
    with pytest.raises(ValueError, match="finish\\b"):
        block.finish_lines()


_MATCH_FIELDS = ("query", "src", "start", "end", "events", "attrs", "prob", "seq", "trigger")


def _fields(m: Any) -> list[tuple[object, type]]:
    return [(getattr(m, f), type(getattr(m, f))) for f in _MATCH_FIELDS]


def test_the_compiled_match_behaves_as_the_python_match() -> None:
    """With the extension built, ``ecq.match.Match`` is its compiled class (numbers kept
    as C values, ``attrs`` made when first read, objects from a free list). It takes the
    same arguments and reads, writes, prints, copies and pickles as the pure-Python
    class, and both engines emit it."""
    assert Match is _module("_events").Match and Match is not PyMatch
    stream = [Event(1, "A", 1.0, id="a"), Event(1, "B", 2.0), Event(1, "B", 2.5), Event(1, "C", 3.0, 3.5)]
    for k, e in enumerate(stream):
        e.arrival = k
    evs = [stream[0], stream[1:3], stream[3]]
    pairs = [
        (Match("q", 1, 1.0, 3.5, evs), PyMatch("q", 1, 1.0, 3.5, evs)),
        (
            Match("q", "s", 1.0, 3.5, evs, {"n": 2}, 0.5, 7, trigger=4),
            PyMatch("q", "s", 1.0, 3.5, evs, {"n": 2}, 0.5, 7, trigger=4),
        ),
    ]
    for fast, slow in pairs:
        assert _fields(fast) == _fields(slow)
        assert repr(fast) == repr(slow)
        assert fast.event_ids() == slow.event_ids() == ["a", [1, 2], 3]
        assert fast.arrivals() == slow.arrivals()
        assert fast.to_dict(lambda e: e.start) == slow.to_dict(lambda e: e.start)
        assert _fast_writer()(fast) == fast.to_dict() == slow.to_dict()
        for again in (pickle.loads(pickle.dumps(fast)), copy.copy(fast), copy.deepcopy(fast)):
            assert type(again) is Match and repr(again) == repr(fast)
            assert again.to_dict() == fast.to_dict()
    # Writes, as to the Python class's slots; nothing else can be set.
    for m in pairs[0]:
        m.attrs["k"] = 1
        m.seq, m.prob, m.trigger, m.query = 9, 0.25, 3, "r"
        assert (m.attrs, m.seq, m.prob, m.trigger, m.query) == ({"k": 1}, 9, 0.25, 3, "r")
        with pytest.raises(AttributeError):
            m.other = 1  # type: ignore[attr-defined]
    for compiled in (True, False):
        eng = Engine(compiled=compiled)
        eng.register("seq", "PATTERN SEQ(A a, B b, C c) WITHIN 1 hour")
        got = eng.process([Event(1, "A", 1.0), Event(1, "B", 2.0), Event(1, "C", 3.0)])
        assert [type(m) for m in got] == [Match]
        assert got[0].attrs == {} and got[0].seq == 0 and got[0].trigger == 2


def test_compiled_matches_own_their_events() -> None:
    """The compiled loop's matches hold their own references to their events (their
    lists go back to the assembly as spares, and later matches reuse them): a match's
    events stay what they were while later events are processed, whether they are read
    at once or later, as the pure engine's; a match's events are released with it."""
    engines = [Engine(compiled=c) for c in (True, False)]
    for eng in engines:
        eng.register("abc", "PATTERN SEQ(A a, B b, C c) WITHIN 1 hour")
        eng.register("ac", "PATTERN SEQ(A a, C c) WITHIN 1 hour")
        eng.register("bc", "PATTERN SEQ(B b, C c) WITHIN 1 hour")
    rng = random.Random(3)
    stream = [(rng.randrange(3), rng.choice("ABC"), float(k)) for k in range(600)]
    got: list[list[Any]] = [[], []]
    for i, eng in enumerate(engines):
        early = []
        for at in range(0, len(stream), 50):
            batch = [Event(s, c, t, id=k) for k, (s, c, t) in enumerate(stream[at : at + 50], at)]
            out = eng.process(batch)
            early += [(m, m.arrivals()) for m in out[::2]]  # half read at once
            got[i] += out
        assert len(got[i]) > 300
        assert all(m.arrivals() == seen for m, seen in early)
    assert [(m.query, m.arrivals()) for m in got[0]] == [(m.query, m.arrivals()) for m in got[1]]
    # A match's references to its events go with it, read or not.
    for k, read in enumerate((False, True)):
        t = 1e4 * (k + 1)
        batch = [Event(9, "A", t), Event(9, "B", t + 1), Event(9, "C", t + 2)]
        out = engines[0].process(batch)
        # (Plain values in the asserts: pytest's rewritten asserts hold what they read.)
        queries, types = sorted(m.query for m in out), {type(m) for m in out}
        assert queries == ["abc", "ac", "bc"] and types == {Match}
        held = sys.getrefcount(batch[2])
        if read:
            same = all(m.events[-1] is batch[2] for m in out)
            now = sys.getrefcount(batch[2])
            assert same and now == held
        del out
        left = sys.getrefcount(batch[2])
        assert left == held - 3


def test_scemon_pure_keeps_the_python_match() -> None:
    """``SCEMON_PURE=1`` leaves the pure-Python ``Match``, ``Event`` and kernel in place."""
    code = (
        "import ecq.match as m, ecq.event as e, ecq.kernel.select as k; from ecq.engine import Engine; "
        "print(m.Match is m.PyMatch, e.Event.__bases__ == (e.SlotFields,), k.status().kind, "
        "Engine().network.kernel.name)"
    )
    env = dict(os.environ, SCEMON_PURE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "pure", "pure"]


def _fast_writer() -> Any:
    return _module("_events").write_match
