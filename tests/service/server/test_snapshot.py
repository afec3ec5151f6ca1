"""The snapshot of an engine's queries (service.server.snapshot): an engine read back
from it gives the matches of the engine it was written from, for every operator family
and policy, on the kernel the tests run (``SCEMON_PURE=1``: the pure one), also after
queries are registered and deleted on the read one; and what cannot be read is refused
with the reason, never read as some other state."""

from __future__ import annotations

import gc
import io
import random
import types
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ecq.engine import Engine
from ecq.evaluation.workload import credit_card_workload
from ecq.event import Event
from ecq.language.parser import parse_query_fresh
from ecq.language.printer import format_query
from service.server import snapshot
from service.server.snapshot import HeadDigest, Header, Stale
from tests.service.faults.test_kill_restart import QUERIES, make_batch

# Read before the snapshot: a missing attribute (``w``: no event has it) is a value of
# its own, compared by identity, true in a negated component's conditions.
MISSING_ATTR = {
    "neg_missing": "SEQ(A, !C c, B) WHERE c.w > 3 WITHIN 20 s",
    "missing": "SEQ(A a, B b) WHERE a.w = b.w OR a.v < b.v WITHIN 10 s",
    "equal_k": "SEQ(A, B) WHERE [k] WITHIN 10 s",
}
MORE = {
    "late": "SEQ(C, A) WHERE C.v >= A.v WITHIN 15 s",
    "keyed_neg": "SEQ(A, !C, B) PARTITION BY k WITHIN 20 s",
    "in_list": "SEQ(A a, B b) WHERE a.v IN (1, 2, 3) AND abs(b.v - 4) < 3 WITHIN 20 s",
}


def events(batch: list[dict[str, Any]]) -> list[Event]:
    arriving = [
        Event(d["src"], d["type"], d["start"], attrs=d["attrs"], prob=d["prob"], id=d["id"]) for d in batch
    ]
    return sorted(arriving, key=lambda e: (e.end, e.start))


def run(engine: Engine, batches: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [m.to_dict(lambda e: e.id) for batch in batches for m in engine.process(events(batch))]


def written(engine: Engine, path: Path, ops: int = 1) -> Header:
    head = HeadDigest()
    for pos in range(ops):
        head.add(pos, "register", f"q{pos}", b"{}", None)
    return snapshot.write(path, engine, head, "")


def read_back(path: Path) -> Engine:
    header, start = snapshot.read_header(path)
    assert header.stands_for(snapshot.code_version(), Engine().network.kernel.name, "") is None
    return snapshot.read(path, header, start, None)


def test_an_engine_read_from_its_snapshot_gives_the_same_matches(tmp_path: Path) -> None:
    rng = random.Random(11)
    batches = [make_batch(k, rng) for k in range(30)]
    original = Engine()
    original.register_many([*QUERIES.items(), *MISSING_ATTR.items()])
    path = tmp_path / "engine.snapshot"
    header = written(original, path)
    assert header.queries == len(QUERIES) + len(MISSING_ATTR)
    loaded = read_back(path)
    assert [cq.name for cq in loaded.queries()] == [cq.name for cq in original.queries()]
    want = run(original, batches[:15])
    assert {m["query"] for m in want} == set(QUERIES) | set(MISSING_ATTR)  # non-vacuous
    assert run(loaded, batches[:15]) == want
    # Queries come and go on both: the read engine registers as the original does.
    for engine in (original, loaded):
        engine.unregister("neg_mid")
        for name, text in MORE.items():
            engine.register(name, text)
    want = run(original, batches[15:])
    assert {m["query"] for m in want} >= set(MORE)
    assert run(loaded, batches[15:]) == want
    original._check()
    loaded._check()


def test_queries_registered_after_reading_share_as_before(tmp_path: Path) -> None:
    """A sub-pattern is shared by the queries registered at the same point of the stream:
    one registered after reading shares the read ones' nodes as it would have."""
    original = Engine()
    original.register("a", "AND(A, (SEQ(B, C))) WITHIN 20 s")
    path = tmp_path / "engine.snapshot"
    written(original, path)
    loaded = read_back(path)
    for engine in (original, loaded):
        engine.register("b", "SEQ((SEQ(B, C)), A) WITHIN 20 s")
    assert sorted(loaded.network.subs) == sorted(original.network.subs)
    assert loaded.stats()["derived_classes"] == original.stats()["derived_classes"]


def test_a_query_s_syntax_tree_is_read_back_when_first_asked_for(tmp_path: Path) -> None:
    """A read query's syntax tree stays packed until asked for (reading, and what a
    start asks of a query: its mode and partition key, do not unpack it), then equals
    the written one and prints the same; an engine read and written again (some trees
    still packed) reads back the same trees."""
    original = Engine()
    original.register_many([*QUERIES.items(), *MISSING_ATTR.items(), *MORE.items()])
    path = tmp_path / "engine.snapshot"
    written(original, path)
    loaded = read_back(path)
    pairs = list(zip(original.queries(), loaded.queries(), strict=True))
    for before, after in pairs:
        assert after.mode == before.ast.mode and after.partition == before.partition
        assert "ast" not in vars(after)
    for before, after in pairs[::2]:
        assert after.ast == before.ast and "ast" in vars(after)
        assert format_query(after.ast) == format_query(before.ast)
    again = tmp_path / "again.snapshot"
    written(loaded, again)
    for before, after in zip(original.queries(), read_back(again).queries(), strict=True):
        assert after.ast == before.ast
        assert format_query(after.ast) == format_query(before.ast)


def test_what_cannot_be_read_is_refused_with_the_reason(tmp_path: Path) -> None:
    engine = Engine()
    engine.register("q", "SEQ(A, B) WITHIN 5 s")
    path = tmp_path / "engine.snapshot"
    header = written(engine, path)
    code, kernel = snapshot.code_version(), engine.network.kernel.name
    assert header.stands_for(code, kernel, "") is None
    assert "another build" in str(header.stands_for("engine-other", kernel, ""))
    assert "kernel" in str(header.stands_for(code, "other", ""))
    assert "shard" in str(header.stands_for(code, kernel, "1/2"))
    data = path.read_bytes()
    _, start = snapshot.read_header(path)
    damaged = bytearray(data)
    damaged[start + 10] ^= 1
    path.write_bytes(bytes(damaged))
    with pytest.raises(Stale, match="checksum"):
        snapshot.read(path, header, start, None)
    path.write_bytes(data[:-1])
    with pytest.raises(Stale, match="cut short"):
        snapshot.read(path, header, start, None)
    path.write_bytes(b"not a snapshot\n{}\n")
    with pytest.raises(Stale, match="not a snapshot"):
        snapshot.read_header(path)
    path.unlink()
    with pytest.raises(Stale, match="there is none"):
        snapshot.read_header(path)


def test_an_object_it_cannot_name_fails_the_write_and_leaves_the_old_file(tmp_path: Path) -> None:
    engine = Engine()
    engine.register("q", "SEQ(A, B) WITHIN 5 s")
    path = tmp_path / "engine.snapshot"
    written(engine, path)
    before = path.read_bytes()
    engine.network.foreign = lambda x: x  # type: ignore[attr-defined]  # a closure not of the engine
    with pytest.raises(Exception, match="not the engine's"):
        written(engine, path)
    assert path.read_bytes() == before
    # The engine's own shard test is left out and is the reader's to set.
    del engine.network.foreign  # type: ignore[attr-defined]
    engine.owns = lambda key, value: True
    written(engine, path)
    assert read_back(path).owns is None


def test_a_wide_integer_of_one_bit_is_read_back_as_itself() -> None:
    for k in (snapshot.WIDE_BITS, 99_999, 1 << 20):
        form = snapshot._wide_form(1 << k)
        assert form == k.to_bytes(4, "little")
        assert snapshot._wide_value(form) == 1 << k


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 6000), max_size=400), st.booleans())
def test_a_wide_integer_is_read_back_as_itself(numbers: list[int], negative: bool) -> None:
    """A wide integer (a query bitset) is written as the numbers of its set bits when
    sparse, as itself when dense or negative; either is read back as the same number."""
    n = sum(1 << k for k in set(numbers)) | 1 << snapshot.WIDE_BITS
    if negative:
        n = -n
    form = snapshot._wide_form(n)
    assert isinstance(form, bytes) == (not negative and n.bit_count() * 32 < n.bit_length())
    assert snapshot._wide_value(form) == n


def test_a_snapshot_of_thousands_of_queries_gives_the_same_matches(tmp_path: Path) -> None:
    """Past WIDE_BITS queries the query bitsets are wide (written once each, sparse ones
    as their set bits): the demo workload's matches are the same after reading."""
    queries, stream = credit_card_workload(n_queries=1500, n_events=4000)
    original = Engine()
    original.register_many(queries)
    path = tmp_path / "engine.snapshot"
    written(original, path)
    loaded = read_back(path)
    want = [(m.query, m.src, m.start, m.end) for m in original.process(stream)]
    assert len({q for q, *_ in want}) > 50  # non-vacuous: many queries match
    _, stream = credit_card_workload(n_queries=1500, n_events=4000)  # processing marks the events
    assert [(m.query, m.src, m.start, m.end) for m in loaded.process(stream)] == want


def test_a_query_compiled_from_its_tokens_is_written_as_its_text(tmp_path: Path) -> None:
    """A query compiled from its tokens (its tree never built: nearly every query of a
    workload of a few shapes) is written with its text, not a packed tree, and read
    back with the tree its text parses to, when first asked for."""
    queries, _ = credit_card_workload(n_queries=300, n_events=10)
    texts = dict(queries)
    original = Engine()
    original.register_many(queries)
    untreed = {cq.name for cq in original.queries() if "ast" not in vars(cq)}
    assert len(untreed) > 150
    path = tmp_path / "engine.snapshot"
    written(original, path)
    loaded = read_back(path)
    for cq in loaded.queries():
        if cq.name in untreed:
            assert vars(cq)["_packed_ast"][1] == texts[cq.name]
            assert cq.ast == parse_query_fresh(texts[cq.name])
        else:
            assert vars(cq)["_packed_ast"][0] is snapshot._unpack_tree


def _compiled_closures(text: str) -> list[types.FunctionType]:
    """The closures compiled for a query's conditions (by a new engine: those made by
    registering it)."""

    def closures() -> list[types.FunctionType]:
        return [
            o
            for o in gc.get_objects()
            if type(o) is types.FunctionType and o.__closure__ and o.__module__ == "ecq.compiler.conditions"
        ]

    before = closures()  # held, so that no id is reused
    known = {id(fn) for fn in before}
    engine = Engine()
    engine.register("q", text)
    return [fn for fn in closures() if id(fn) not in known]


def _round_trip(value: Any) -> tuple[Any, dict[int, bool]]:
    out = io.BytesIO()
    pickler = snapshot._Pickler(out)
    pickler.dump(value)
    return snapshot._Unpickler(io.BytesIO(out.getvalue()), pickler.wide).load(), pickler._acyclic


def _cells(fn: types.FunctionType) -> list[Any]:
    """What a closure's cells hold, a closure among them by its code and its own cells."""
    out: list[Any] = []
    for cell in fn.__closure__ or ():
        value = cell.cell_contents
        out.append((value.__code__, _cells(value)) if isinstance(value, types.FunctionType) else value)
    return out


def test_a_closure_is_read_back_whether_or_not_it_holds_itself() -> None:
    """A compiled condition's closure holds values and other closures only: it is made in
    one step when read; one that holds itself (through a tuple) is made empty first and
    filled after, and is read back holding itself."""
    closures = _compiled_closures("SEQ(A a, B b) WHERE a.v < b.v AND b.w = 'x' WITHIN 5 s")
    assert closures
    for fn in closures:
        read, acyclic = _round_trip(fn)
        assert acyclic[id(fn)] is True
        assert read.__code__ is fn.__code__
        assert read.__globals__ is fn.__globals__
        assert read.__defaults__ == fn.__defaults__
        assert _cells(read) == _cells(fn)
    fn = closures[0]
    assert fn.__closure__ is not None
    cell = fn.__closure__[0]
    kept = cell.cell_contents
    cell.cell_contents = (kept, fn)  # a cycle: fn holds itself
    try:
        read, acyclic = _round_trip(fn)
    finally:
        cell.cell_contents = kept
    assert acyclic[id(fn)] is False
    assert read.__closure__ is not None
    assert read.__closure__[0].cell_contents[1] is read


def test_equal_values_of_the_queries_are_read_back_once(tmp_path: Path) -> None:
    """The components' classes, filters' ids and conjuncts and the nodes' classes that
    queries hold as equal copies are one object each once read (fewer objects to make),
    and the read engine still gives the same matches (the test above, and here)."""
    queries, stream = credit_card_workload(n_queries=300, n_events=1500)
    original = Engine()
    original.register_many(queries)

    def distinct(engine: Engine) -> dict[str, int]:
        states = [qs for _, net in engine.networks() for qs in net.queries.values()]
        comps = [c for qs in states for c in qs.cq.comps]
        return {
            "comp classes": len({id(c.classes) for c in comps}),
            "filter ids": len({id(c.filter_id) for c in comps}),
            "conjuncts": len({id(c.filter_conjuncts) for c in comps}),
            "node classes": len({id(qs.classes) for qs in states}),
            "classes at": len({id(t) for qs in states for t in qs.classes_at}),
        }

    path = tmp_path / "engine.snapshot"
    written(original, path)
    loaded = read_back(path)
    states = [qs for _, net in loaded.networks() for qs in net.queries.values()]
    comps = [c for qs in states for c in qs.cq.comps]
    values = {
        "comp classes": len({c.classes for c in comps}),
        "filter ids": len({c.filter_id for c in comps}),
        "conjuncts": len({c.filter_conjuncts for c in comps}),
        "node classes": len({qs.classes for qs in states}),
        "classes at": len({t for qs in states for t in qs.classes_at}),
    }
    before, after = distinct(original), distinct(loaded)
    assert after == values  # one object per value
    assert all(before[k] > after[k] for k in ("comp classes", "node classes", "classes at"))
    want = [(m.query, m.src, m.start, m.end) for m in original.process(stream)]
    assert len({q for q, *_ in want}) > 20  # non-vacuous
    _, stream = credit_card_workload(n_queries=300, n_events=1500)
    assert [(m.query, m.src, m.start, m.end) for m in loaded.process(stream)] == want


def test_values_are_shared_only_between_values_of_the_same_types() -> None:
    """``1``, ``True`` and ``1.0`` are equal in Python, as are ``0.0`` and ``-0.0``: a
    value holding one is never read back holding the other."""
    from ecq.language.ast import AttrRef, Compare, Lit

    values = snapshot._Values({})
    firsts = [
        values.first(v) for v in [(1,), (True,), (1.0,), (0.0,), (-0.0,), frozenset({1}), frozenset({True})]
    ]
    assert [repr(v) for v in firsts] == [
        "(1,)",
        "(True,)",
        "(1.0,)",
        "(0.0,)",
        "(-0.0,)",
        "frozenset({1})",
        "frozenset({True})",
    ]
    one = values.first((Compare("<", AttrRef("$self", "v"), Lit(1)),))
    assert values.first((Compare("<", AttrRef("$self", "v"), Lit(1)),)) is one
    true = values.first((Compare("<", AttrRef("$self", "v"), Lit(True)),))
    assert true is not one and repr(true[0].right.value) == "True"
    # A value within a value is the first of its own value too.
    assert values.first(Lit(1)) is one[0].right
    # A tuple holding anything else (a function, a list) is written as it is.
    held = (len, [1])
    assert values.first(held) is held


def test_a_conjunction_s_kernel_shape_is_read_back_with_it(tmp_path: Path) -> None:
    """The shape the compiled kernel assembles a conjunction by is kept on the query
    once made and written with it: a read engine has it without making it again, and
    it is the shape of the read query (its very predicates, not copies)."""
    from ecq.matching.conjunction import _kernel_shape, kernel_shape

    original = Engine()
    original.register("conj", "AND(A a, B b, C c) WHERE a.v < b.v AND c.v > 2 WITHIN 10 s")
    cq = original.query_state("conj").cq
    assert kernel_shape(cq) is kernel_shape(cq) is cq.__dict__["_kernel_shape"]
    path = tmp_path / "engine.snapshot"
    written(original, path)
    loaded = read_back(path).query_state("conj").cq
    shape = loaded.__dict__["_kernel_shape"]
    assert shape is not None and shape.checks
    assert shape == _kernel_shape(loaded)
    assert shape.checks[0][0] is loaded.checks[0][1]
