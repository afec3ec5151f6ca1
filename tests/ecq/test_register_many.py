"""Registering many queries at once (``Engine.register_many``) and compiling by shape
(``ecq.compiler.shapes``): the same engine, the same matches, as registering and
compiling one query at a time; all or nothing on a refused query."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ecq.compiler import query as query_module
from ecq.compiler.query import CompiledQuery, compile_query, compile_text
from ecq.compiler.shapes import shape_of
from ecq.engine import Engine
from ecq.errors import BatchQueryError, DuplicateQueryError, ParseError, QueryError, SemanticError
from ecq.evaluation.workload import Workload, condition_queries, credit_card_workload, events
from ecq.event import Event
from ecq.kernel.select import status
from ecq.language import format_query, parse_query
from ecq.language.ast import from_json
from ecq.language.parser import parse_query_fresh
from ecq.match import Match
from service.bench.runner import fresh
from tests.ecq.test_properties import CLASSES, as_reference, scenarios
from tests.match_share import min_share, record
from tests.strategies import partitioned_sets, query_sets_full

KERNELS = [False, pytest.param(True, marks=pytest.mark.skipif(not status().compiled, reason="not built"))]

BASE = [
    ("q1", "SEQ(A, B) WITHIN 10 s"),
    ("q2", "SEQ(A, B, C) WHERE A.x > 2 WITHIN 5 s"),
    ("q3", "AND(B, C) WITHIN 4 s"),
]
BATCH = [
    ("n1", "SEQ(B, C) WITHIN 6 s"),
    ("n2", "SEQ(A, !B, C) WITHIN 8 s"),
    ("n3", "SEQ(@q1, C) WITHIN 20 s"),
    ("n4", "SEQ(C, A) WHERE C.x = A.x WITHIN 3 s RETURN A.x AS ax"),
]


def _events(start: float, count: int) -> list[Event]:
    out = []
    for i in range(count):
        t = start + i * 0.7
        out.append(Event(src=f"s{i % 2}", type="ABC"[(i * 7) % 3], start=t, end=t, attrs={"x": i % 5}))
    return out


def _state(eng: Engine) -> dict[str, Any]:
    """What registering changes in an engine, as comparable values."""
    nets = eng.networks()
    return {
        "ops": eng.ops,
        "order": eng._next_order,
        "key_of": dict(eng.key_of),
        "reads_src": {k: sorted(v) for k, v in eng._reads_src.items()},
        "stats": eng.stats(),
        "nets": [
            (
                key,
                sorted(net.queries),
                sorted(net.subs),
                net._next_bit,
                list(net._free),
                dict(net._window_bits),
                sorted(net.ecqs),
                {
                    cls: (
                        len(ecq.clt),
                        ecq.seq_final,
                        ecq.seq_more,
                        {t: dict(rl.masks) for t, rl in ecq.rclt.items()},
                        ecq.general_uses,
                        ecq.drop.window,
                        ecq.static_pass,
                    )
                    for cls, ecq in net.ecqs.items()
                },
                net.windows.bounds,
                net.windows.masks,
            )
            for key, net in nets
        ],
    }


def _started(compiled: bool) -> Engine:
    eng = Engine(clean_every=5, compiled=compiled)
    for name, text in BASE:
        eng.register(name, text)
    eng.process(_events(0.0, 12))
    return eng


BAD = [
    (1, "n2", "SEQ(A, !B, C WITHIN 8 s", ParseError),
    (2, "n3", "SEQ(@nobody, C) WITHIN 20 s", SemanticError),
    (3, "q1", "SEQ(C, A) WITHIN 3 s", DuplicateQueryError),
    (3, "n1", "SEQ(C, A) WITHIN 3 s", DuplicateQueryError),
    (0, "n1", "SEQ(A, B) WHERE Z.x > 1 WITHIN 3 s", SemanticError),
    (2, "n3", "SEQ(A, B) WITHIN 400 days", SemanticError),
    (2, "", "SEQ(A, B) WITHIN 4 s", SemanticError),
]


@pytest.mark.parametrize("compiled", KERNELS)
@pytest.mark.parametrize(("index", "name", "text", "error"), BAD)
def test_a_refused_query_leaves_the_engine_as_it_was(
    compiled: bool, index: int, name: str, text: str, error: type[QueryError]
) -> None:
    """A bad query anywhere in the batch: nothing of the batch is registered, the error
    names it, and the engine goes on exactly as one that never saw the batch."""
    eng, twin = _started(compiled), _started(compiled)
    batch = list(BATCH)
    batch[index] = (name, text)
    before = _state(eng)
    with pytest.raises(BatchQueryError) as caught:
        eng.register_many(batch)
    err = caught.value
    assert isinstance(err.inner, error)
    assert err.index == index and err.name == name
    assert f"query {index} ({name!r})" in str(err)
    assert _state(eng) == before == _state(twin)
    eng._check()
    later = _events(9.0, 30)
    got = eng.process([Event(e.src, e.type, e.start, e.end, dict(e.attrs)) for e in later])
    want = twin.process(later)
    assert [as_reference(m) for m in got] == [as_reference(m) for m in want]
    assert [m.seq for m in got] == [m.seq for m in want]
    # And then it takes the batch (fixed) as the twin does.
    assert [cq.name for cq in eng.register_many(BATCH)] == [n for n, _ in BATCH]
    for n, t in BATCH:
        twin.register(n, t)
    assert _state(eng) == _state(twin)


def test_a_batch_reads_its_own_earlier_queries_and_refuses_cycles_and_mixed_keys() -> None:
    eng = Engine()
    eng.register_many([("a", "SEQ(A, B) WITHIN 5 s"), ("b", "SEQ(@a, C) WITHIN 9 s")])
    assert eng.key_of == {"a": ("src",), "b": ("src",)}
    with pytest.raises(BatchQueryError) as caught:
        eng.register_many([("c", "SEQ(@d, C) WITHIN 9 s"), ("d", "SEQ(A, B) WITHIN 5 s")])
    assert caught.value.index == 0 and "@d names no registered query" in str(caught.value)
    with pytest.raises(BatchQueryError) as caught:
        eng.register_many([("k", "SEQ(A, B) WITHIN 5 s PARTITION BY x"), ("m", "SEQ(@k, C) WITHIN 9 s")])
    assert caught.value.index == 1 and "partitioned by" in str(caught.value)
    assert sorted(eng.key_of) == ["a", "b"] and not eng.keyed
    eng._check()


def test_register_many_takes_text_asts_and_compiled_queries() -> None:
    eng = Engine()
    cq = Engine.compile("c", "SEQ(A, C) WITHIN 2 s")
    got = eng.register_many(
        [("a", "SEQ(A, B) WITHIN 5 s"), ("b", parse_query("SEQ(B, C) WITHIN 5 s")), ("c", cq)]
    )
    assert [g.name for g in got] == ["a", "b", "c"]
    assert eng.register_many([]) == []
    eng._check()


# ------------------------------------------------------------ one by one vs in bulk


def _run(ops: list[tuple[Any, ...]], compiled: bool, bulk: bool) -> list[Match]:
    """``ops`` on a fresh engine; ``bulk``: each run of consecutive registrations is one
    ``register_many``."""
    eng = Engine(clean_every=2, compiled=compiled)
    out: list[Match] = []
    pending: list[tuple[str, Any]] = []

    def flush() -> None:
        if pending:
            eng.register_many(list(pending))
            pending.clear()

    for op in ops:
        if op[0] == "register":
            if bulk:
                pending.append((op[1], from_json(op[2])))
            else:
                eng.register(op[1], from_json(op[2]))
            continue
        flush()
        if op[0] == "unregister":
            eng.unregister(op[1])
        elif op[0] == "event":
            out.extend(eng.process([Event.from_dict(op[1])]))
        else:
            out.extend(eng.advance_time(op[1]))
    flush()
    eng._check()
    return out


def _accepted(ops: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``ops`` without the registrations one-by-one refuses (an ``@name`` whose query
    is gone) and the ops naming them."""
    eng = Engine()
    refused: set[str] = set()
    kept = []
    for op in ops:
        if op[0] in ("register", "unregister") and op[1] in refused:
            continue
        if op[0] == "register":
            try:
                eng.register(op[1], from_json(op[2]))
            except QueryError:
                refused.add(op[1])
                continue
        elif op[0] == "unregister":
            eng.unregister(op[1])
        kept.append(op)
    return kept


def _seen(matches: list[Match]) -> list[tuple[Any, ...]]:
    return [(m.seq, m.trigger, *as_reference(m).values()) for m in matches]


@min_share(0.25)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(partitioned_sets(query_sets_full(CLASSES))), st.booleans())
def test_bulk_and_one_by_one_registration_give_the_same_matches(
    ops: list[tuple[Any, ...]], compiled: bool
) -> None:
    if compiled and not status().compiled:
        compiled = False
    ops = _accepted(ops)
    one = _run(ops, compiled, bulk=False)
    record([as_reference(m) for m in one])
    assert _seen(_run(ops, compiled, bulk=True)) == _seen(one)


# ------------------------------------------------------------------ compiled by shape


def _renamed(node: Any, rename: dict[str, str]) -> Any:
    """A query's JSON with its classes renamed, where a class is read as one (a
    component's classes, a reference), as the shape cache renames them."""
    if isinstance(node, list):
        return [_renamed(x, rename) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k == "classes":
            out[k] = [rename.get(c, c) for c in v]
        elif k in ("ref", "skip_var") and isinstance(v, str):
            out[k] = rename.get(v, v)
        else:
            out[k] = _renamed(v, rename)
    return out


def _form(cq: CompiledQuery) -> Any:
    """Everything of a compiled query but its functions (of which whether there is one)."""
    return (
        cq.name,
        cq.ast,
        cq.kind,
        [
            (
                c.index,
                c.classes,
                c.alias,
                c.filter is None,
                c.filter_id,
                c.negated,
                c.kleene,
                c.kleene_max,
                None if c.sub is None else _form(c.sub),
                c.filter_conjuncts,
            )
            for c in cq.comps
        ],
        cq.window,
        cq.mode_all,
        [positions for positions, _ in cq.checks],
        cq.check_keys,
        {k: len(v) for k, v in cq.element_conds.items()},
        {k: len(v) for k, v in cq.blocker_conds.items()},
        {k: len(v) for k, v in cq.iteration_conds.items()},
        [label for label, _ in cq.returns],
        cq.probability,
        cq.never,
        cq.same_before,
        cq.overlapping,
        cq.top,
        [_form(s) for s in cq.subs],
        cq.depends,
        cq.tag,
        cq.policy is None,
        cq.partition,
        cq.length,
        cq.positives,
        cq.positive_classes,
        [(classes, f is None) for classes, f in cq.positive_tests],
        cq.is_filter,
        cq.stores,
        cq.plain,
        cq.skeletal,
        cq.open_kleene,
        cq.trailing,
        cq.classes(),
        cq.node_layout,
    )


RENAME = {"A": "Q", "B": "A", "C": "R", "D": "B"}


def _by_shape(name: str, q: dict[str, Any]) -> tuple[CompiledQuery, bool]:
    """``q`` compiled after a query of its shape with other class names: from the
    cache when it has a shape (and whether it has)."""
    ast = from_json(q)
    query_module._SHAPES.clear()
    compile_query("other", from_json(_renamed(q, RENAME)), None, "#0")
    return compile_query(name, ast, None, "#0"), shape_of(ast) is not None


def _both_compiled(
    ops: list[tuple[Any, ...]], compiled: bool, by_cache: Callable[[str, Any], Any]
) -> tuple[list[Match], list[Match]]:
    """Run ``ops`` through two engines, one given each query compiled without the shape
    cache, the other ``by_cache(name, spec)`` (checked to have the same compiled form);
    the matches of each."""
    plain = Engine(clean_every=2, compiled=compiled)
    shaped = Engine(clean_every=2, compiled=compiled)
    out: tuple[list[Match], list[Match]] = ([], [])
    for op in ops:
        if op[0] == "register":
            anew = compile_query(op[1], from_json(op[2]), None, "#0", shapes=False)
            got = by_cache(op[1], op[2])
            assert _form(got) == _form(anew)
            plain.register(op[1], anew)
            shaped.register(op[1], got)
        elif op[0] == "unregister":
            plain.unregister(op[1])
            shaped.unregister(op[1])
        else:
            for eng, got_matches in zip((plain, shaped), out, strict=True):
                if op[0] == "event":
                    got_matches.extend(eng.process([Event.from_dict(op[1])]))
                else:
                    got_matches.extend(eng.advance_time(op[1]))
    return out


@min_share(0.25)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(query_sets_full(CLASSES)), st.booleans())
def test_queries_compiled_by_shape_are_those_compiled_anew(
    ops: list[tuple[Any, ...]], compiled: bool
) -> None:
    """Each query compiled from another of its shape (its classes renamed) has the
    compiled form of the query compiled without the cache, and gives the same
    matches on both kernels."""
    if compiled and not status().compiled:
        compiled = False
    hits = shapes = 0

    def by_shape(name: str, spec: Any) -> Any:
        nonlocal hits, shapes
        got, has_shape = _by_shape(name, spec)
        shapes += has_shape
        hits += has_shape
        return got

    out = _both_compiled(_accepted(ops), compiled, by_shape)
    assert hits == shapes
    record([as_reference(m) for m in out[0]])
    assert _seen(out[1]) == _seen(out[0])


def _relit(node: Any, top: bool = True) -> Any:
    """A query's JSON with every literal changed to another of its type (and the window
    to another), as a query of the same shape with its own constants."""
    if isinstance(node, list):
        return [_relit(x, False) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _relit(v, False) for k, v in node.items()}
    if node.get("kind") == "lit":
        value = node["value"]
        if isinstance(value, bool):
            out["value"] = not value
        elif isinstance(value, int):
            out["value"] = value + 3
        elif isinstance(value, float):
            out["value"] = value * 2 + 0.5
        else:
            out["value"] = value + "z"
    if top and node.get("within") is not None:
        out["within"] = node["within"] + 1.5
    return out


@min_share(0.25)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(query_sets_full(CLASSES)), st.booleans())
def test_queries_compiled_by_shape_with_other_literals_are_those_compiled_anew(
    ops: list[tuple[Any, ...]], compiled: bool
) -> None:
    """Each query compiled after one of its shape with other classes, other literals
    and another window (so from the cache, its literals put in) has the compiled form
    of the query compiled without the cache, and gives the same matches on both
    kernels."""
    if compiled and not status().compiled:
        compiled = False

    def after_relit(name: str, spec: Any) -> Any:
        query_module._SHAPES.clear()
        compile_query("other", from_json(_relit(_renamed(spec, RENAME))), None, "#0")
        return compile_query(name, from_json(spec), None, "#0")

    out = _both_compiled(_accepted(ops), compiled, after_relit)
    record([as_reference(m) for m in out[0]])
    assert _seen(out[1]) == _seen(out[0])


# Queries of one shape: (text, events as (class, attrs), the arrivals of each match).
_ONE_SHAPE = [
    ("SEQ(A, B) WHERE A.x > 2 AND B.k = 'u' WITHIN 5 s", [0, 1]),
    ("SEQ(C, D) WHERE C.x > 10 AND D.k = 'v' WITHIN 5 s", [2, 3]),
    ("SEQ(A, B) WHERE A.x > 0 AND B.k = 'v' WITHIN 5 s", [0, 4]),
    ("SEQ(A, B) WHERE A.x > 20 AND B.k = 'u' WITHIN 5 s", []),
]
_ONE_SHAPE_EVENTS: list[tuple[str, dict[str, int | float | str | bool]]] = [
    ("A", {"x": 3}),
    ("B", {"k": "u"}),
    ("C", {"x": 11}),
    ("D", {"k": "v"}),
    ("B", {"k": "v"}),
]


@pytest.mark.parametrize("compiled", KERNELS)
def test_queries_of_one_shape_with_other_literals_each_match_on_their_own(compiled: bool) -> None:
    """Queries that differ only in their classes and constants (numbers, strings)
    share a shape; each matches on its own constants."""
    query_module._SHAPES.clear()
    shapes = [shape_of(parse_query(text)) for text, _ in _ONE_SHAPE]
    assert len({shape[0] for shape in shapes if shape is not None}) == 1 and None not in shapes
    eng = Engine(compiled=compiled)
    eng.register_many([(f"q{i}", text) for i, (text, _) in enumerate(_ONE_SHAPE)])
    assert len(query_module._SHAPES) == 1
    got = eng.process(
        [Event("s", cls, 1.0 + i, 1.0 + i, attrs) for i, (cls, attrs) in enumerate(_ONE_SHAPE_EVENTS)]
    )
    want = {(f"q{i}", tuple(arrivals)) for i, (_, arrivals) in enumerate(_ONE_SHAPE) if arrivals}
    assert {(m.query, tuple(m.arrivals())) for m in got} == want


@pytest.mark.parametrize(
    "texts",
    [
        # Numbers of one type, strings, booleans, IN lists, equivalence with a value.
        ["SEQ(A, B) WHERE A.x > 2 WITHIN 5 s", "SEQ(A, B) WHERE A.x > 4 WITHIN 7 s"],
        ["SEQ(A, B) WHERE A.x < 2.5 WITHIN 5 s", "SEQ(C, D) WHERE C.x < -1.5 WITHIN 5 s"],
        ["SEQ(A, B) WHERE A.k = 'a' WITHIN 5 s", "SEQ(A, B) WHERE A.k = 'b' WITHIN 5 s"],
        ["SEQ(A, B) WHERE A.f = true WITHIN 5 s", "SEQ(A, B) WHERE A.f = false WITHIN 5 s"],
        ["SEQ(A, B) WHERE A.x IN (1, 2) WITHIN 5 s", "SEQ(A, B) WHERE A.x IN (3, 4) WITHIN 5 s"],
        ["SEQ(A, B) WHERE [k = 'a'] WITHIN 5 s", "SEQ(A, B) WHERE [k = 'b'] WITHIN 5 s"],
        # Checks on two components, Kleene element and negation blocker conditions.
        ["SEQ(A, B) WHERE A.x + 1 < B.x WITHIN 5 s", "SEQ(A, B) WHERE A.x + 3 < B.x WITHIN 5 s"],
        ["SEQ(A, B+, C) WHERE B.x > 1 WITHIN 5 s", "SEQ(A, B+, C) WHERE B.x > 3 WITHIN 5 s"],
        ["SEQ(A, !B, C) WHERE B.x > 1 WITHIN 5 s", "SEQ(A, !B, C) WHERE B.x > 3 WITHIN 5 s"],
        # RETURN's constants, -0.0 and 0.0.
        ["SEQ(A, B) WITHIN 5 s RETURN A.x * 2 AS y", "SEQ(A, B) WITHIN 5 s RETURN A.x * 3 AS y"],
        ["SEQ(A, B) WITHIN 5 s RETURN 0.0 AS z", "SEQ(A, B) WITHIN 5 s RETURN -0.0 AS z"],
        # A condition that reads no component is decided by its constants.
        [
            "SEQ(A, B) WHERE 1 > 2 WITHIN 5 s",
            "SEQ(A, B) WHERE 3 > 2 WITHIN 5 s",
            "SEQ(A, B) WHERE 1 > 2 WITHIN 5 s",
        ],
    ],
)
def test_a_shape_hit_with_other_literals_is_the_query_compiled_anew(texts: list[str]) -> None:
    """The second query of a shape (and the third) is compiled from the first with its
    own literals and window: its compiled form and its matches are those of the query
    compiled without the cache, on both kernels."""
    query_module._SHAPES.clear()
    events = [
        Event("s", cls, 1.0 + i, 1.0 + i, {"x": i - 2, "k": "ab"[i % 2], "f": i % 3 == 0})
        for i, cls in enumerate("ACBDBACBCD")
    ]
    for i, text in enumerate(texts):
        ast = parse_query(text)
        got = compile_query(f"q{i}", ast, text, "#0")
        anew = compile_query(f"q{i}", ast, text, "#0", shapes=False)
        assert _form(got) == _form(anew)
        for compiled in (False, True) if status().compiled else (False,):
            results = []
            for cq in (got, anew):
                eng = Engine(compiled=compiled)
                eng.register(f"q{i}", cq)
                matches = eng.process(events) + eng.advance_time(100.0)
                results.append([(m.arrivals(), repr(sorted(m.attrs.items()))) for m in matches])
            assert results[0] == results[1]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # Equal Python values, different queries.
        ("SEQ(A, B) WHERE A.x = 1 WITHIN 5 s", "SEQ(C, D) WHERE C.x = true WITHIN 5 s"),
        ("SEQ(A, B) WHERE A.x = 1 WITHIN 5 s", "SEQ(C, D) WHERE C.x = 1.0 WITHIN 5 s"),
        ("SEQ(A, B) WITHIN 5 s RETURN 0.0 AS z", "SEQ(C, D) WITHIN 5 s RETURN -0.0 AS z"),
        # Which component a condition reads, which attribute.
        ("SEQ(A, B) WHERE A.x = 1 WITHIN 5 s", "SEQ(C, D) WHERE D.x = 1 WITHIN 5 s"),
        ("SEQ(A, B) WHERE A.x = 1 WITHIN 5 s", "SEQ(C, D) WHERE C.y = 1 WITHIN 5 s"),
        # Classes shared by components, the window, the mode.
        ("SEQ(A, B, A) WITHIN 5 s", "SEQ(C, D, E) WITHIN 5 s"),
        ("SEQ(A, B) WITHIN 5 s", "SEQ(C, D) WITHIN 6 s"),
        ("SEQ(A, B) WITHIN 5 s", "SEQ(C, D) WITHIN 5 s MODE ALL"),
        # A string literal that is a class name is not a reference.
        ("SEQ(A, B) WHERE A.k = 'A' WITHIN 5 s", "SEQ(C, D) WHERE C.k = 'A' WITHIN 5 s"),
    ],
)
def test_the_shape_cache_tells_apart_queries_that_differ(first: str, second: str) -> None:
    query_module._SHAPES.clear()
    a, b = parse_query(first), parse_query(second)
    compile_query("one", a, first, "#0")
    got = compile_query("two", b, second, "#0")
    assert _form(got) == _form(compile_query("two", b, second, "#0", shapes=False))
    assert shape_of(a) != shape_of(b)


def test_an_alias_spelled_as_a_class_has_no_shape() -> None:
    """``SEQ(A B, B)``: ``B.x`` reads the alias, which renaming the classes would
    turn into a reference to the class."""
    assert shape_of(parse_query("SEQ(A B, B) WHERE B.x = 1 WITHIN 5 s")) is None
    assert shape_of(parse_query("SEQ(A a, B) WHERE a.x = 1 WITHIN 5 s")) is not None
    assert shape_of(parse_query("SEQ(A, SEQ(B, C)) WITHIN 5 s")) is None
    assert shape_of(parse_query("SEQ(@q, C) WITHIN 5 s")) is None


def test_cache_hits_share_predicates_and_read_by_position() -> None:
    """A query made from another's shape matches on its own classes."""
    query_module._SHAPES.clear()
    eng = Engine()
    eng.register("one", "SEQ(A, B) WHERE A.x > 2 WITHIN 5 s")
    eng.register("two", "SEQ(C, D) WHERE C.x > 2 WITHIN 5 s")
    assert eng.query_state("two").cq.comps[0].filter is eng.query_state("one").cq.comps[0].filter
    got = eng.process(
        [
            Event("s", "C", 1.0, 1.0, {"x": 3}),
            Event("s", "A", 1.5, 1.5, {"x": 1}),
            Event("s", "D", 2.0, 2.0, {}),
            Event("s", "B", 2.5, 2.5, {}),
        ]
    )
    assert [(m.query, m.arrivals()) for m in got] == [("two", [0, 2])]
    assert math.isfinite(got[0].end)


def test_queries_that_name_themselves_share_a_shape() -> None:
    """``QUERY name`` in a query's text is no part of its shape (a file of named queries
    compiles once per shape); each compiled query keeps its own AST and name, and
    matches as the same query compiled anew."""
    from ecq.language import parse_queries

    query_module._SHAPES.clear()
    text = "\n".join(
        f"QUERY n{i} PATTERN Sequence WITH {a}, {b} WHERE [symbol] {a}.x > {i} WITHIN 10 s"
        for i, (a, b) in enumerate([("A", "B"), ("C", "D"), ("B", "A")])
    )
    queries = parse_queries(text)
    shapes = {shape_of(q)[0] for q in queries}  # type: ignore[index]
    assert len(shapes) == 1
    eng = Engine()
    got = eng.register_many([(q.name, q) for q in queries])  # type: ignore[misc]
    assert len(query_module._SHAPES) == 1
    assert [cq.ast.name for cq in got] == ["n0", "n1", "n2"] == [cq.name for cq in got]
    for cq, q in zip(got, queries, strict=True):
        assert _form(cq) == _form(compile_query(cq.name, q, None, "#0", shapes=False))
    events = [Event("s", "A", 1.0, 1.0, {"x": 5}), Event("s", "B", 2.0, 2.0, {"x": 5})]
    events.append(Event("s", "A", 3.0, 3.0, {"x": 5}))
    matches = eng.process(events)
    assert sorted({m.query for m in matches}) == ["n0", "n2"]


# Query texts whose names and constants vary from one query to the next, all of one
# parse shape per text: the parser builds the later ones from a template (their
# ``Origin``), where the compiler reads their shape key.
_TEMPLATED = [
    "SEQ({A}, {B}) WHERE {A}.{x} > {n} WITHIN 5 s",
    "SEQ({A} a, {B}) WHERE a.{x} > {n} AND {B}.{x} < {m} WITHIN 5 s",
    "SEQ({A}, {B}) WHERE {A}.{B} = {n} WITHIN 5 s",
    "SEQ({A}, {B}) WITHIN 5 s RETURN {A}.{x} * {n} AS {y}",
    "PATTERN Sequence WITH {A}, {B}, {C} WHERE [{x}] {A}.{x} > {n} WITHIN {w} mins",
    "AND({A}, {B}) WHERE {A}.{x} + {B}.{x} < {n} WITHIN 5 s",
    "SEQ({A}, !{B}, {C}+) WHERE {B}.{x} > {n} AND {C}.{x} < {m} WITHIN 5 s",
    "SEQ({A}, {B}) WHERE {A}.{x} = '{s}' AND {B}.{y} IN ({n}, {m}) WITHIN 5 s",
    "SEQ({A}, {B}, {A}) WHERE {B}.{x} > {n} WITHIN {w} s",
    "QUERY {q} SEQ({A}, {B}) WHERE {B}.{x} != {m} WITHIN 5 s",
]
_VALUES = [
    {"A": "A", "B": "B", "C": "C", "x": "x", "y": "y", "n": 1, "m": 2, "w": 200, "s": "u", "q": "one"},
    {"A": "C1", "B": "C2", "C": "C3", "x": "x", "y": "y", "n": 5, "m": 7, "w": 220, "s": "v", "q": "two"},
    {"A": "P", "B": "Q", "C": "R", "x": "z", "y": "w", "n": 3, "m": 9, "w": 5, "s": "t", "q": "three"},
    {"A": "D", "B": "E", "C": "F", "x": "x", "y": "y", "n": 8, "m": 4, "w": 7, "s": "u", "q": "four"},
    {"A": "P", "B": "Q", "C": "R", "x": "z", "y": "w", "n": 6, "m": 1, "w": 9, "s": "a", "q": "five"},
    {"A": "G", "B": "H", "C": "I", "x": "Q", "y": "x", "n": 2, "m": 3, "w": 11, "s": "b", "q": "six"},
]


@pytest.mark.parametrize("pattern", _TEMPLATED)
def test_a_shape_read_from_the_parsers_template_is_the_shape_walked(pattern: str) -> None:
    """A query the parser built from a template has the compiler's shape key, classes
    and literals that walking its tree gives, and compiles to what compiling it anew
    gives, whatever its names, attributes and constants."""
    from ecq.compiler.shapes import _shape_parts, shape_parts
    from ecq.language import shapes as language_shapes

    language_shapes._CACHE = None
    query_module._SHAPES.clear()
    templated = 0
    for _ in range(2):
        for i, values in enumerate(_VALUES):
            text = pattern.format(**values)
            ast = parse_query(text)
            templated += ast.__dict__.get("_origin") is not None
            got, want = shape_parts(ast), _shape_parts(ast)
            assert got is not None and want is not None
            assert got[:2] == want[:2] and [id(x) for x in got[2]] == [id(x) for x in want[2]]
            cq = compile_query(f"q{i}", ast, text, "#0")
            assert _form(cq) == _form(compile_query(f"q{i}", ast, text, "#0", shapes=False))
    assert templated >= 3


@min_share(0.25)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(query_sets_full(CLASSES)), st.booleans())
def test_queries_compiled_from_their_tokens_are_those_compiled_anew(ops: list[tuple[Any, ...]], compiled: bool) -> None:
    """Each query compiled from its text after others of its shape with other classes,
    literals and window (so from its tokens where its shape allows, its tree not built:
    ``compile_text``) has the compiled form of the query compiled without any cache,
    its tree (parsed when read) included, and gives the same matches on both kernels."""
    if compiled and not status().compiled:
        compiled = False

    def from_tokens(name: str, spec: Any) -> Any:
        query_module._SHAPES.clear()
        other = format_query(from_json(_relit(_renamed(spec, RENAME))))
        # Parsed twice, the shape has a template; compiled from it, the template knows
        # the compiler's shape.
        for _ in range(3):
            compile_text("other", other, "#0")
        return compile_text(name, format_query(from_json(spec)), "#0")

    out = _both_compiled(_accepted(ops), compiled, from_tokens)
    record([as_reference(m) for m in out[0]])
    assert _seen(out[1]) == _seen(out[0])


def _workload(name: str) -> tuple[list[tuple[str, str]], list[Event]]:
    if name == "card":
        queries, stream = credit_card_workload(n_queries=200, n_events=3000)
        return queries, list(stream)
    w = Workload(n_queries=200, n_sources=20, n_classes=10, n_attrs=1, seed=3)
    return condition_queries(w, 1), list(events(w, 3000))


@pytest.mark.parametrize("workload", ["conditions", "card"])
@pytest.mark.parametrize("compiled", KERNELS)
def test_a_workload_registered_as_texts_is_compiled_from_tokens_as_compiled_anew(
    compiled: bool, workload: str
) -> None:
    """Queries of a few shapes registered as texts are compiled from their tokens (no
    tree built, nearly all of them); they give the matches of the queries compiled
    without any cache, and their trees, parsed when read, are the parser's."""
    queries, stream = _workload(workload)
    by_text = Engine(compiled=compiled)
    by_text.register_many(queries)
    direct = [cq for cq in by_text.queries() if "ast" not in vars(cq)]
    # (A shape's first three queries are parsed: the card workload's 200 have dozens.)
    assert len(direct) > 0.5 * len(queries)
    anew = Engine(compiled=compiled)
    anew.register_many([(n, compile_query(n, parse_query_fresh(t), t, "", shapes=False)) for n, t in queries])
    want = [(m.query, m.arrivals()) for m in anew.process(fresh(stream))]
    assert len({q for q, _ in want}) > 20  # non-vacuous
    assert [(m.query, m.arrivals()) for m in by_text.process(fresh(stream))] == want
    texts = dict(queries)
    for cq in direct:
        assert cq.ast == parse_query_fresh(texts[cq.name]) and "ast" in vars(cq)
        assert cq.ast.spans == parse_query_fresh(texts[cq.name]).spans
