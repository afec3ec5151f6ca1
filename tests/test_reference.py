"""Unit tests of the naive reference evaluator (tests/reference.py) on the worked
examples of the contract and the choices of docs/semantics.md."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from tests.match_share import min_share, record
from tests.reference import evaluate, evaluate_queries, partition_of, return_name
from tests.strategies import query_sets, query_sets_full, streams

J = dict[str, Any]

# ------------------------------------------------------------------ builders


def c(
    *classes: str,
    alias: str | None = None,
    neg: bool = False,
    kleene: tuple[int, bool] | None = None,
    sub: J | None = None,
) -> J:
    out: J = {"kind": "component"}
    if sub is not None:
        out["sub"] = sub
    else:
        out["classes"] = list(classes)
        if len(classes) > 1:
            out["any"] = True
    if neg:
        out["negated"] = True
    if kleene is not None:
        out["kleene"] = {"min": kleene[0], "exact": kleene[1]}
    if alias is not None:
        out["alias"] = alias
    return out


def pat(kind: str, *items: J | str) -> J:
    return {"kind": kind, "items": [c(i) if isinstance(i, str) else i for i in items]}


def query(
    pattern: J,
    within: float | None = None,
    mode: str = "recent",
    where: J | None = None,
    ret: list[J] | None = None,
    prob: float | None = None,
) -> J:
    out: J = {"kind": "query", "pattern": pattern, "mode": mode}
    if within is not None:
        out["within"] = within
    if where is not None:
        out["where"] = where
    if ret is not None:
        out["return"] = ret
    if prob is not None:
        out["probability"] = prob
    return out


def attr(ref: str, name: str) -> J:
    return {"kind": "attr", "ref": ref, "attr": name}


def lit(value: Any) -> J:
    return {"kind": "lit", "value": value}


def cmp(op: str, left: J, right: J) -> J:
    return {"kind": "cmp", "op": op, "left": left, "right": right}


def conj(*operands: J) -> J:
    return {"kind": "bool", "op": "and", "operands": list(operands)}


def arith(op: str, left: J, right: J) -> J:
    return {"kind": "arith", "op": op, "left": left, "right": right}


def agg(func: str, ref: str, name: str | None = None) -> J:
    out: J = {"kind": "agg", "func": func, "ref": ref}
    if name is not None:
        out["attr"] = name
    return out


def ev(
    type: str,
    start: float,
    end: float | None = None,
    src: Any = "s",
    prob: float | None = None,
    attrs: J | None = None,
    **more: Any,
) -> J:
    out: J = {"src": src, "type": type, "start": start}
    attrs = {**(attrs or {}), **more}
    if end is not None:
        out["end"] = end
    if attrs:
        out["attrs"] = attrs
    if prob is not None:
        out["prob"] = prob
    return out


def stream(spec: str, src: Any = "s") -> list[J]:
    """``"a1 b2 c3"``: class from the letters, time from the digits."""
    out = []
    for token in spec.split():
        cls = "".join(ch for ch in token if ch.isalpha()).upper()
        out.append(ev(cls, float("".join(ch for ch in token if ch.isdigit())), src=src))
    return out


def events_of(matches: list[J], name: str | None = None) -> list[Any]:
    return [m["events"] for m in matches if name is None or m["query"] == name]


def run(queries: list[tuple[str, J]], events: list[J]) -> list[J]:
    return evaluate_queries(queries, events)


COVERAGE = "a1 a2 b3 b4 a5 b6 c7 c8"  # a1 a2 b1 b2 a3 b3 c1 c2 of the coverage paper

# =================================================================== Part 1


def test_coverage_paper_all_mode_gives_14_matches() -> None:
    q = query(pat("seq", "A", "B", "C"), within=100, mode="all")
    got = events_of(run([("q", q)], stream(COVERAGE)))
    pairs = [[0, 2], [0, 3], [0, 5], [1, 2], [1, 3], [1, 5], [4, 5]]
    assert got == [[a, b, 6] for a, b in pairs] + [[a, b, 7] for a, b in pairs]


def test_coverage_paper_recent_mode() -> None:
    q = query(pat("seq", "A", "B", "C"), within=100)
    matches = run([("q", q)], stream(COVERAGE))
    assert events_of(matches) == [[4, 5, 6], [4, 5, 7]]
    assert [m["trigger"] for m in matches] == [6, 7]
    assert matches[0]["start"] == 5.0 and matches[0]["end"] == 7.0 and matches[0]["src"] == "s"
    assert matches[0]["attrs"] == {} and matches[0]["prob"] == 1.0


def test_recent_finds_an_older_predecessor_when_the_latest_fails_where() -> None:
    q = query(
        pat("seq", c("A", alias="a"), c("B", alias="b")),
        within=10,
        where=cmp("<", attr("a", "x"), attr("b", "x")),
    )
    got = events_of(run([("q", q)], [ev("A", 1, x=1), ev("A", 2, x=5), ev("B", 3, x=3)]))
    assert got == [[0, 2]]


def test_recent_compares_from_the_last_but_one_component_back() -> None:
    # Candidates (a0,b2), (a0,b3), (a1,b2), (a1,b3) for c4; WHERE keeps a0 only; b3 wins.
    q = query(pat("seq", "A", "B", "C"), within=10, where=cmp("=", attr("$x1", "x"), attr("$x3", "x")))
    events = [ev("A", 1, x=1), ev("A", 2, x=2), ev("B", 3), ev("B", 4), ev("C", 5, x=1)]
    assert events_of(run([("q", q)], events)) == [[0, 3, 4]]


def test_window_boundary_is_inclusive() -> None:
    q = query(pat("seq", "A", "B"), within=5, mode="all")
    events = [ev("A", 0, src=1), ev("B", 5, src=1), ev("A", 0, src=2), ev("B", 5.5, src=2)]
    assert events_of(run([("q", q)], events)) == [[0, 1]]
    # The window runs from the first start to the last end.
    assert events_of(run([("q", q)], [ev("A", 0), ev("B", 4, 6)])) == []


def test_equal_timestamps_are_ordered_by_arrival() -> None:
    q = query(pat("seq", "A", "B"), within=5, mode="all")
    assert events_of(run([("q", q)], [ev("A", 1), ev("B", 1)])) == [[0, 1]]
    assert events_of(run([("q", q)], [ev("B", 1), ev("A", 1)])) == []
    twice = query(pat("seq", "A", "A"), within=5, mode="all")
    assert events_of(run([("q", twice)], [ev("A", 1), ev("A", 1)])) == [[0, 1]]


def test_sequence_needs_end_before_next_start() -> None:
    q = query(pat("seq", "A", "B"), within=5, mode="all")
    assert events_of(run([("q", q)], [ev("A", 0, 2), ev("B", 1, 3)])) == []
    assert events_of(run([("q", q)], [ev("A", 0, 2), ev("B", 2, 3)])) == [[0, 1]]


def test_one_source_per_match() -> None:
    q = query(pat("seq", "A", "B"), within=5, mode="all")
    assert events_of(run([("q", q)], [ev("A", 0, src="x"), ev("B", 1, src="y")])) == []
    # 1 and "1" are different sources.
    assert events_of(run([("q", q)], [ev("A", 0, src=1), ev("B", 1, src="1")])) == []


def test_one_event_never_fills_two_components() -> None:
    q = query(pat("seq", "A", c("A", "B")), within=5, mode="all")
    assert events_of(run([("q", q)], [ev("A", 1)])) == []
    assert events_of(run([("q", q)], [ev("A", 1), ev("A", 2)])) == [[0, 1]]


def test_any_component() -> None:
    q = query(pat("seq", c("A", "B"), "C"), within=5, mode="all")
    assert events_of(run([("q", q)], [ev("A", 1), ev("B", 2), ev("D", 3), ev("C", 4)])) == [[0, 3], [1, 3]]


def test_single_component_is_a_filter_without_window() -> None:
    q = query(pat("seq", c("A", alias="a")), where=cmp(">", attr("a", "x"), lit(2)))
    events = [ev("A", 0, 100, x=3), ev("A", 1, x=1), ev("B", 2, x=9), ev("A", 3, x=5)]
    assert events_of(run([("q", q)], events)) == [[0], [3]]
    assert events_of(run([("q", query(pat("and", "A"), within=1))], [ev("A", 0, 10)])) == [[0]]


def test_conjunction_any_order_and_window() -> None:
    q = query(pat("and", "A", "B"), within=5, mode="all")
    matches = run([("q", q)], [ev("B", 1), ev("A", 3, 6)])
    assert events_of(matches) == [[1, 0]]
    assert (matches[0]["start"], matches[0]["end"], matches[0]["trigger"]) == (1.0, 6.0, 1)
    assert events_of(run([("q", q)], [ev("B", 1), ev("A", 3, 6.5)])) == []


def test_conjunction_same_class_roles_fill_in_arrival_order() -> None:
    q = query(pat("and", "A", "A", "B"), within=10, mode="all")
    events = [ev("A", 1), ev("B", 2), ev("A", 3), ev("A", 4)]
    assert events_of(run([("q", q)], events)) == [[0, 2, 1], [0, 3, 1], [2, 3, 1]]
    recent = query(pat("and", "A", "A", "B"), within=10)
    # For a3: other events {a2, b1} beat {a0, b1} (latest first: (2, 1) > (1, 0)).
    assert events_of(run([("q", recent)], events)) == [[0, 2, 1], [2, 3, 1]]


def test_conjunction_same_class_roles_and_where() -> None:
    # The set {a0, a1} is one match with a0 in the first role; WHERE does not swap them.
    where = cmp("<", attr("x", "v"), attr("y", "v"))
    q = query(pat("and", c("A", alias="x"), c("A", alias="y")), within=10, mode="all", where=where)
    assert events_of(run([("q", q)], [ev("A", 1, v=5), ev("A", 2, v=3)])) == []
    assert events_of(run([("q", q)], [ev("A", 1, v=3), ev("A", 2, v=5)])) == [[0, 1]]


def test_conjunction_overlapping_classes_first_assignment_passing_where() -> None:
    where = cmp("<", attr("x", "v"), attr("y", "v"))
    q = query(pat("and", c("A", alias="x"), c("A", "B", alias="y")), within=10, mode="all", where=where)
    # (a0, a1) fails WHERE, (a1, a0) passes: one match.
    assert events_of(run([("q", q)], [ev("A", 1, v=5), ev("A", 2, v=3)])) == [[1, 0]]
    # Both pass: the first assignment.
    q2 = query(pat("and", c("A", alias="x"), c("A", "B", alias="y")), within=10, mode="all")
    assert events_of(run([("q", q2)], [ev("A", 1), ev("A", 2)])) == [[0, 1]]


def test_disjunction_where_applies_per_component() -> None:
    where = conj(cmp(">", attr("a", "x"), lit(1)), cmp("<", attr("b", "x"), lit(5)))
    q = query(pat("or", c("A", alias="a"), c("B", alias="b")), where=where)
    events = [ev("A", 1, x=0), ev("A", 2, x=2), ev("B", 3, x=9), ev("B", 4, x=1), ev("C", 5, x=3), ev("B", 6)]
    matches = run([("q", q)], events)
    assert events_of(matches) == [[1], [3]]
    assert [(m["start"], m["end"], m["trigger"]) for m in matches] == [(2.0, 2.0, 1), (4.0, 4.0, 3)]


def test_disjunction_binds_the_first_component_that_takes_the_event() -> None:
    where = cmp(">", attr("p", "x"), lit(1))
    ret = [{"expr": attr("p", "x"), "name": "px"}, {"expr": attr("q", "x"), "name": "qx"}]
    q = query(pat("or", c("A", alias="p"), c("A", "B", alias="q")), where=where, ret=ret)
    matches = run([("q", q)], [ev("A", 1, x=5), ev("A", 2, x=0), ev("B", 3, x=7)])
    assert [m["attrs"] for m in matches] == [{"px": 5}, {"qx": 0}, {"qx": 7}]


def test_missing_attribute_comparisons_are_false() -> None:
    gt = query(pat("seq", c("A", alias="a")), where=cmp(">", attr("a", "x"), lit(2)), mode="all")
    ne = query(pat("seq", c("A", alias="a")), where=cmp("!=", attr("a", "x"), lit(2)), mode="all")
    not_gt = query(
        pat("seq", c("A", alias="a")), where={"kind": "not", "operand": cmp(">", attr("a", "x"), lit(2))}
    )
    events = [ev("A", 1), ev("A", 2, x=5), ev("A", 3, x=1)]
    matches = run([("gt", gt), ("ne", ne), ("not", not_gt)], events)
    assert events_of(matches, "gt") == [[1]]
    assert events_of(matches, "ne") == [[1], [2]]
    assert events_of(matches, "not") == [[0], [2]]


def test_comparison_pairings() -> None:
    def matches_of(where: J, attrs: J) -> bool:
        q = query(pat("seq", c("A", alias="a")), where=where)
        return bool(run([("q", q)], [ev("A", 1, attrs=attrs)]))

    assert matches_of(cmp("=", attr("a", "s"), lit("foo")), {"s": "foo"})
    assert matches_of(cmp("<", attr("a", "s"), lit("goo")), {"s": "foo"})
    assert not matches_of(cmp("<", attr("a", "x"), lit("foo")), {"x": 1})
    assert matches_of(cmp("!=", attr("a", "x"), lit("foo")), {"x": 1})
    assert not matches_of(cmp("=", attr("a", "x"), lit(True)), {"x": 1})
    assert matches_of(cmp("=", attr("a", "f"), lit(True)), {"f": True})
    assert not matches_of(cmp("<", attr("a", "f"), lit(True)), {"f": False})
    assert matches_of(cmp("=", attr("a", "x"), lit(2.0)), {"x": 2})
    # Fields stand in for missing attributes; attrs win.
    assert matches_of(cmp("=", attr("a", "type"), lit("A")), {})
    assert matches_of(cmp("=", attr("a", "start"), lit(7)), {"start": 7})


def test_cross_component_condition_on_fields() -> None:
    where = cmp("<=", arith("-", attr("B", "start"), attr("A", "end")), lit(2))
    q = query(pat("seq", "A", "B"), within=10, mode="all", where=where)
    assert events_of(run([("q", q)], [ev("A", 0, 1), ev("B", 3), ev("B", 4)])) == [[0, 1]]


def test_return_expressions_and_names() -> None:
    ret: list[J] = [
        {"expr": arith("+", attr("a", "x"), lit(1)), "name": "p"},
        {"expr": {"kind": "neg", "operand": attr("a", "x")}},
        {"expr": {"kind": "func", "name": "abs", "args": [arith("-", attr("a", "x"), lit(10))]}},
        {"expr": arith("/", attr("a", "x"), lit(0))},
        {"expr": {"kind": "in", "operand": attr("a", "x"), "values": [lit(1), lit(4)]}},
        {"expr": attr("b", "y")},
        {"expr": attr("b", "z")},
        {"expr": arith("*", attr("a", "x"), attr("a", "s"))},
        {"expr": arith("/", attr("b", "y"), lit(2))},
    ]
    q = query(pat("seq", c("A", alias="a"), c("B", alias="b")), within=5, ret=ret)
    matches = run([("q", q)], [ev("A", 1, x=4, s="t"), ev("B", 2, y=3)])
    assert matches[0]["attrs"] == {"p": 5, "expr2": -4, "expr3": 6, "expr5": True, "y": 3, "expr9": 1.5}
    assert return_name({"expr": attr("a", "x")}, 1) == "x"


def test_where_expression_kinds() -> None:
    inlist = {"kind": "in", "operand": attr("a", "x"), "values": [lit(1), lit(3)]}
    absval = cmp("<", {"kind": "func", "name": "abs", "args": [attr("a", "x")]}, lit(2))
    neg = cmp(">", {"kind": "neg", "operand": attr("a", "x")}, lit(0))
    either = {"kind": "bool", "op": "or", "operands": [inlist, neg]}
    events = [ev("A", 1, x=1), ev("A", 2, x=3), ev("A", 3, x=-1), ev("A", 4, x=5), ev("A", 5)]
    cases: list[tuple[J, list[Any]]] = [
        (inlist, [[0], [1]]),
        (absval, [[0], [2]]),
        (neg, [[2]]),
        (either, [[0], [1], [2]]),
    ]
    for where, want in cases:
        q = query(pat("seq", c("A", alias="a")), where=where)
        assert events_of(run([("q", q)], events)) == want, where


def test_equivalence_tests() -> None:
    same = query(pat("seq", "A", "B"), within=5, mode="all", where={"kind": "equiv", "attr": "k"})
    events = [ev("A", 1, k=1), ev("B", 2, k=1), ev("B", 3, k=2), ev("B", 4)]
    assert events_of(run([("q", same)], events)) == [[0, 1]]
    value = query(
        pat("seq", "A", "B"), within=5, mode="all", where={"kind": "equiv", "attr": "k", "value": 2}
    )
    assert events_of(run([("q", value)], [ev("A", 1, k=2), ev("B", 2, k=2), ev("B", 3, k=1)])) == [[0, 1]]
    noop = query(pat("seq", "A", "B"), within=5, mode="all", where={"kind": "equiv", "attr": "symbol"})
    assert events_of(run([("q", noop)], [ev("A", 1), ev("B", 2)])) == [[0, 1]]


def test_constant_false_condition_never_matches() -> None:
    q = query(pat("seq", "A", "B"), within=5, where=cmp("<", lit(2), lit(1)))
    assert run([("q", q)], [ev("A", 1), ev("B", 2)]) == []


def test_probability_product_and_bound() -> None:
    q = query(pat("seq", "A", "B"), within=5)
    matches = run([("q", q)], [ev("A", 1, prob=0.5), ev("B", 2, prob=0.4)])
    assert matches[0]["prob"] == pytest.approx(0.2)
    bounded = query(pat("seq", "A", "B"), within=5, prob=0.3)
    assert run([("q", bounded)], [ev("A", 1, prob=0.5), ev("B", 2, prob=0.4)]) == []
    # RECENT chooses among the candidates that meet the bound.
    strict = query(pat("seq", "A", "B"), within=5, prob=0.8)
    assert events_of(run([("q", strict)], [ev("A", 1), ev("A", 2, prob=0.5), ev("B", 3)])) == [[0, 2]]


def test_matches_of_one_event_in_registration_order() -> None:
    q2 = query(pat("seq", "A", "B"), within=5)
    q1 = query(pat("seq", "B"))
    all_mode = query(pat("seq", "A", "B"), within=5, mode="all")
    matches = run([("zz", q2), ("aa", q1), ("mm", all_mode)], [ev("A", 1), ev("A", 2), ev("B", 3)])
    assert [(m["query"], m["events"]) for m in matches] == [
        ("zz", [1, 2]),
        ("aa", [2]),
        ("mm", [0, 2]),
        ("mm", [1, 2]),
    ]


def test_a_query_sees_only_events_after_its_registration() -> None:
    q = query(pat("seq", "A", "B"), within=10, mode="all")
    ops = [
        ("event", ev("A", 1)),
        ("register", "q", q),
        ("event", ev("B", 2)),
        ("event", ev("A", 3)),
        ("event", ev("B", 4)),
    ]
    matches = evaluate(ops)
    assert events_of(matches) == [[2, 3]]
    assert matches[0]["trigger"] == 3


def test_unregister_and_register_again() -> None:
    q = query(pat("seq", "A", "B"), within=10, mode="all")
    ops = [
        ("register", "q", q),
        ("event", ev("A", 1)),
        ("event", ev("B", 2)),
        ("unregister", "q"),
        ("event", ev("A", 3)),
        ("event", ev("B", 4)),
        ("register", "q", q),
        ("event", ev("B", 5)),
        ("event", ev("A", 6)),
        ("event", ev("B", 7)),
    ]
    assert events_of(evaluate(ops)) == [[0, 1], [5, 6]]
    with pytest.raises(ValueError):
        evaluate([("register", "q", q), ("register", "q", q)])


def test_drop_horizon_removes_a_late_match() -> None:
    q = query(pat("seq", "A", "B"), within=5, mode="all")
    # In time order: a match.
    assert events_of(run([("q", q)], [ev("A", 0), ev("B", 3)])) == [[0, 1]]
    # The clock reaches 10 first: a (start 0 < 10 - 5) is dropped before the late b.
    assert events_of(run([("q", q)], [ev("A", 0), ev("C", 10), ev("B", 3)])) == []
    # An explicit time advance drops too; the boundary start == clock - W is kept.
    ops: list[tuple[Any, ...]] = [
        ("register", "q", q),
        ("event", ev("A", 5)),
        ("time", 10),
        ("event", ev("B", 6)),
    ]
    assert events_of(evaluate(ops)) == [[0, 1]]
    ops = [("register", "q", q), ("event", ev("A", 5)), ("time", 10.5), ("event", ev("B", 6))]
    assert events_of(evaluate(ops)) == []


def test_drop_horizon_uses_the_largest_window_of_the_class() -> None:
    small = query(pat("seq", "A", "B"), within=5, mode="all")
    large = query(pat("seq", "A", "D"), within=20, mode="all")
    # W(A) = 20: a (start 0) survives clock 10 for the small query too.
    got = run([("small", small), ("large", large)], [ev("A", 0), ev("C", 10), ev("B", 3)])
    assert events_of(got) == [[0, 2]]


def test_drop_horizon_spares_the_arriving_event() -> None:
    # W(B) = 5 but the late b completes the match as it arrives; a is above H(A) = 5.
    small = query(pat("seq", "A", "B"), within=5, mode="all")
    large = query(pat("seq", "A", "D"), within=20, mode="all")
    got = run([("small", small), ("large", large)], [ev("A", 10), ev("C", 25), ev("B", 12)])
    assert events_of(got) == [[0, 2]]


def test_drop_horizon_is_the_largest_value_it_has_had() -> None:
    q1 = query(pat("seq", "A", "B"), within=2, mode="all")
    q2 = query(pat("seq", "A", "B"), within=50, mode="all")
    ops: list[tuple[Any, ...]] = [
        ("register", "q1", q1),
        ("event", ev("C", 20)),  # H(A) = 18
        ("register", "q2", q2),  # W(A) = 50 now, but H(A) stays 18
        ("event", ev("A", 15)),
        ("event", ev("B", 16)),
    ]
    assert evaluate(ops) == []
    # Once A has no query left, a new query starts afresh.
    ops = [
        ("register", "q1", q1),
        ("event", ev("C", 20)),
        ("unregister", "q1"),
        ("register", "q2", q2),
        ("event", ev("A", 15)),
        ("event", ev("B", 16)),
    ]
    assert events_of(evaluate(ops)) == [[1, 2]]


def test_filters_and_disjunctions_ignore_the_horizon() -> None:
    seq = query(pat("seq", "A", "B"), within=1, mode="all")
    flt = query(pat("seq", "A"))
    dis = query(pat("or", "A", "E"))
    got = run([("seq", seq), ("flt", flt), ("dis", dis)], [ev("C", 100), ev("A", 0)])
    assert [(m["query"], m["events"]) for m in got] == [("flt", [1]), ("dis", [1])]


# =================================================================== Part 2


ZSTREAM = "a1 b2 b3 b5 c6"


def test_zstream_kleene_plus() -> None:
    q = query(pat("seq", "A", c("B", kleene=(1, False)), "C"), within=10, mode="all")
    matches = run([("q", q)], stream(ZSTREAM))
    assert events_of(matches) == [[0, [1, 2, 3], 4]]
    assert (matches[0]["start"], matches[0]["end"]) == (1.0, 6.0)


def test_zstream_kleene_exact_count() -> None:
    b2 = c("B", kleene=(2, True))
    all_mode = query(pat("seq", "A", b2, "C"), within=10, mode="all")
    assert events_of(run([("q", all_mode)], stream(ZSTREAM))) == [[0, [1, 2], 4], [0, [2, 3], 4]]
    recent = query(pat("seq", "A", b2, "C"), within=10)
    assert events_of(run([("q", recent)], stream(ZSTREAM))) == [[0, [2, 3], 4]]


def test_kleene_condition_decides_which_events_qualify() -> None:
    where = cmp(">", attr("b", "x"), attr("a", "x"))
    q = query(
        pat("seq", c("A", alias="a"), c("B", alias="b", kleene=(1, False)), "C"),
        within=10,
        mode="all",
        where=where,
    )
    events = [ev("A", 1, x=2), ev("B", 2, x=3), ev("B", 3, x=1), ev("B", 4), ev("B", 5, x=9), ev("C", 6)]
    assert events_of(run([("q", q)], events)) == [[0, [1, 4], 5]]


def test_kleene_at_least_m_and_aggregates() -> None:
    at_least_3 = query(pat("seq", "A", c("B", kleene=(3, False)), "C"), within=10, mode="all")
    assert events_of(run([("q", at_least_3)], stream("a1 b2 b3 c4"))) == []
    assert events_of(run([("q", at_least_3)], stream(ZSTREAM))) == [[0, [1, 2, 3], 4]]
    where = conj(cmp(">=", agg("count", "b"), lit(2)), cmp("<", agg("sum", "b", "x"), lit(10)))
    ret: list[J] = [
        {"expr": agg("avg", "b", "x"), "name": "m"},
        {"expr": agg("max", "b", "x")},
        {"expr": agg("count", "b")},
        {"expr": attr("b", "x")},
    ]
    kle = c("B", alias="b", kleene=(1, False))
    q = query(pat("seq", "A", kle, "C"), within=10, mode="all", where=where, ret=ret)
    matches = run([("q", q)], [ev("A", 1), ev("B", 2, x=3), ev("B", 3, x=4), ev("C", 4)])
    assert events_of(matches) == [[0, [1, 2], 3]]
    assert matches[0]["attrs"] == {"m": 3.5, "expr2": 4, "expr3": 2}
    too_big = [ev("A", 1), ev("B", 2, x=3), ev("B", 3, x=9), ev("C", 4)]
    assert run([("q", q)], too_big) == []


def test_kleene_recent_compares_by_latest_element() -> None:
    q = query(pat("seq", "A", c("B", kleene=(1, False)), "C"), within=10)
    # Candidates for c: (a0, [b1, b3]) and (a2, [b3]); both groups end at b3, a2 is later.
    assert events_of(run([("q", q)], stream("a1 b2 a3 b4 c5"))) == [[2, [3], 4]]


def test_negation_zstream_example() -> None:
    q = query(pat("seq", "A", c("B", neg=True), "C"), within=10, mode="all")
    assert events_of(run([("q", q)], stream("a1 a2 b3 a4 c5"))) == [[3, 4]]
    recent = query(pat("seq", "A", c("B", neg=True), "C"), within=10)
    assert events_of(run([("q", recent)], stream("a1 a2 b3 c5"))) == []


def test_negation_conditions_decide_which_events_block() -> None:
    where = cmp("=", attr("b", "x"), attr("a", "x"))
    q = query(
        pat("seq", c("A", alias="a"), c("B", alias="b", neg=True), "C"), within=10, mode="all", where=where
    )
    assert events_of(run([("q", q)], [ev("A", 1, x=1), ev("B", 2, x=2), ev("C", 3)])) == [[0, 2]]
    assert events_of(run([("q", q)], [ev("A", 1, x=1), ev("B", 2, x=1), ev("C", 3)])) == []
    # A missing attribute cannot rule the event out: it blocks.
    assert events_of(run([("q", q)], [ev("A", 1, x=1), ev("B", 2), ev("C", 3)])) == []
    # An equivalence test applies to the negated component too (beside an explicit
    # PARTITION BY it is a condition: a blocker lacking the attribute still blocks).
    same = query(
        pat("seq", "A", c("B", neg=True), "C"), within=10, mode="all", where={"kind": "equiv", "attr": "k"}
    )
    same["partition"] = ["src"]
    assert events_of(run([("q", same)], [ev("A", 1, k=1), ev("B", 2, k=2), ev("C", 3, k=1)])) == [[0, 2]]
    assert events_of(run([("q", same)], [ev("A", 1, k=1), ev("B", 2), ev("C", 3, k=1)])) == []
    # Alone, [k] partitions by k: an event lacking k is not seen, so it cannot block.
    del same["partition"]
    assert events_of(run([("q", same)], [ev("A", 1, k=1), ev("B", 2, k=2), ev("C", 3, k=1)])) == [[0, 2]]
    assert events_of(run([("q", same)], [ev("A", 1, k=1), ev("B", 2), ev("C", 3, k=1)])) == [[0, 2]]


def test_negation_must_lie_between_in_time_and_arrival() -> None:
    q = query(pat("seq", "A", c("B", neg=True), "C"), within=10, mode="all")
    # b overlaps a's end: not between.
    assert events_of(run([("q", q)], [ev("A", 1, 3), ev("B", 2, 4), ev("C", 5)])) == [[0, 2]]
    # b arrives after c (same time): not between.
    assert events_of(run([("q", q)], [ev("A", 1), ev("C", 2), ev("B", 2)])) == [[0, 1]]


def test_uncertain_blockers_lower_the_probability() -> None:
    q = query(pat("seq", "A", c("B", neg=True), "C"), within=10)
    matches = run([("q", q)], [ev("A", 1), ev("B", 2, prob=0.5), ev("B", 3, prob=0.5), ev("C", 4, prob=0.8)])
    assert events_of(matches) == [[0, 3]]
    assert matches[0]["prob"] == pytest.approx(0.2)
    bounded = query(pat("seq", "A", c("B", neg=True), "C"), within=10, prob=0.5)
    assert run([("q", bounded)], [ev("A", 1), ev("B", 2, prob=0.5), ev("B", 3, prob=0.5), ev("C", 4)]) == []
    keep_zero = query(pat("seq", "A", c("B", neg=True), "C"), within=10, prob=0.0)
    matches = run([("q", keep_zero)], stream("a1 b2 c3"))
    assert events_of(matches) == [[0, 2]] and matches[0]["prob"] == 0.0


def test_leading_negation() -> None:
    q = query(pat("seq", c("B", neg=True), "A", "C"), within=10, mode="all")
    assert events_of(run([("q", q)], stream("b1 a2 c3"))) == []
    # Outside the window of c: c.end - T = 3 > b.start.
    assert events_of(run([("q", q)], stream("b2 a5 c13"))) == [[1, 2]]
    # Arrived after a: no effect.
    assert events_of(run([("q", q)], [ev("A", 2), ev("B", 1), ev("C", 3)])) == [[0, 2]]


def test_trailing_negation_waits_for_the_clock() -> None:
    q = query(pat("seq", "A", "B", c("C", neg=True)), within=10, mode="all")
    ops: list[tuple[Any, ...]] = [
        ("register", "q", q),
        ("event", ev("A", 0)),
        ("event", ev("B", 1)),
        ("event", ev("D", 10)),  # clock 10 does not exceed 0 + 10
    ]
    assert evaluate(ops) == []
    matches = evaluate([*ops, ("time", 10.5)])
    assert events_of(matches) == [[0, 1]]
    assert matches[0]["trigger"] == 3  # emitted by the clock before a 4th event
    # A blocker before the deadline removes it.
    blocked: list[tuple[Any, ...]] = [
        ("register", "q", q),
        ("event", ev("A", 0)),
        ("event", ev("B", 1)),
        ("event", ev("C", 5)),
        ("time", 11),
    ]
    assert evaluate(blocked) == []
    # An event past the deadline emits it before being processed; it does not block.
    late: list[tuple[Any, ...]] = [
        ("register", "q", q),
        ("event", ev("A", 0)),
        ("event", ev("B", 1)),
        ("event", ev("C", 10.5)),
    ]
    matches = evaluate(late)
    assert events_of(matches) == [[0, 1]] and matches[0]["trigger"] == 2
    # A blocker at the deadline (c.end == a.start + T) still blocks.
    edge: list[tuple[Any, ...]] = [
        ("register", "q", q),
        ("event", ev("A", 0)),
        ("event", ev("B", 1)),
        ("event", ev("C", 10)),
    ]
    assert evaluate([*edge, ("time", 20)]) == []


def test_trailing_negation_blockers_are_checked_before_cleaning() -> None:
    # The jump to 100 would drop c (H(C) = 90); the deadline is checked first.
    q = query(pat("seq", "A", "B", c("C", neg=True)), within=10, mode="all")
    assert run([("q", q)], [ev("A", 0), ev("B", 1), ev("C", 5), ev("D", 100)]) == []


def test_trailing_negation_completed_after_its_deadline_is_emitted_at_once() -> None:
    q = query(pat("seq", "A", "B", c("C", neg=True)), within=10, mode="all")
    keep_a = query(pat("seq", "A", "B"), within=100)  # W(A) = 100: a survives clock 50
    matches = run([("q", q), ("keep", keep_a)], [ev("A", 0), ev("D", 50), ev("B", 1)])
    assert [(m["query"], m["events"], m["trigger"]) for m in matches] == [
        ("q", [0, 2], 2),
        ("keep", [0, 2], 2),
    ]


def test_trailing_negation_recent_chooses_before_the_deadline() -> None:
    # (a0, b2) and (a1, b2) complete together; RECENT holds (a1, b2) only, which c blocks.
    events = [ev("A", 0), ev("A", 1), ev("B", 2), ev("C", 10.5)]
    all_mode = query(pat("seq", "A", "B", c("C", neg=True)), within=10, mode="all")
    matches = run([("q", all_mode)], events)
    assert [(m["events"], m["trigger"]) for m in matches] == [([0, 2], 3)]
    recent = query(pat("seq", "A", "B", c("C", neg=True)), within=10)
    assert run([("q", recent)], events) == []


def test_sub_pattern_with_trailing_negation_arrives_with_the_clock() -> None:
    q = query(pat("and", c(sub=pat("seq", "A", c("B", neg=True))), "C"), within=10, mode="all")
    matches = run([("q", q)], [ev("A", 0), ev("C", 5), ev("D", 11)])
    assert [(m["events"], m["trigger"]) for m in matches] == [([[0], 1], 2)]
    assert run([("q", q)], [ev("A", 0), ev("B", 3), ev("C", 5), ev("D", 11)]) == []


def test_named_query_with_trailing_negation_feeds_later_events() -> None:
    q1 = query(pat("seq", "A", c("B", neg=True)), within=5)
    q2 = query(pat("seq", "@q1", "C"), within=20)
    matches = run([("q1", q1), ("q2", q2)], [ev("A", 0), ev("D", 6), ev("C", 7)])
    assert [(m["query"], m["events"], m["trigger"]) for m in matches] == [("q1", [0], 1), ("q2", [[0], 2], 2)]


def test_trailing_negation_emissions_come_before_the_events_matches() -> None:
    trailing = query(pat("seq", "A", "B", c("C", neg=True)), within=10, mode="all")
    plain = query(pat("seq", "A", "E"), within=100)
    ops: list[tuple[Any, ...]] = [("register", "plain", plain), ("register", "t", trailing)]
    ops += [("event", e) for e in [ev("A", 0), ev("B", 1), ev("E", 11)]]
    got = evaluate(ops)
    assert [(m["query"], m["events"], m["trigger"]) for m in got] == [("t", [0, 1], 2), ("plain", [0, 2], 2)]


def test_conjunction_negation() -> None:
    q = query(pat("and", "A", "B", c("C", neg=True)), within=10, mode="all")
    assert events_of(run([("q", q)], stream("a1 c2 b3"))) == []
    # Arrived after the last event: does not block.
    assert events_of(run([("q", q)], [ev("A", 1), ev("B", 3), ev("C", 2)])) == [[0, 1]]
    # Outside [min start, max end]: does not block.
    assert events_of(run([("q", q)], [ev("C", 0), ev("A", 1), ev("B", 3)])) == [[1, 2]]


def test_nested_sub_pattern() -> None:
    sub = pat("seq", "B", "C")
    q = query(pat("seq", "A", c(sub=sub), "D"), within=20, mode="all")
    matches = run([("q", q)], stream("a1 b2 c3 d4"))
    assert events_of(matches) == [[0, [1, 2], 3]]
    # The sub-pattern's instance must follow a and precede d in time and arrival.
    assert events_of(run([("q", q)], stream("b1 a2 c3 d4"))) == []
    conj_sub = query(pat("and", c(sub=pat("seq", "A", "B")), "C"), within=20, mode="all")
    assert events_of(run([("q", conj_sub)], stream("c1 a2 b3"))) == [[[1, 2], 0]]


def test_named_query_as_a_derived_class() -> None:
    q1 = query(pat("seq", c("A", alias="a"), "B"), within=5, ret=[{"expr": attr("a", "x")}])
    q2 = query(pat("seq", c("@q1", alias="p"), "C"), within=3, where=cmp(">", attr("p", "x"), lit(1)))
    matches = run(
        [("q2", q2), ("q1", q1)],
        [ev("A", 1, x=2), ev("B", 2), ev("C", 3), ev("A", 4, x=0), ev("B", 5), ev("C", 6)],
    )
    assert [(m["query"], m["events"]) for m in matches] == [
        ("q1", [0, 1]),
        ("q2", [[0, 1], 2]),
        ("q1", [3, 4]),
    ]
    assert matches[0]["attrs"] == {"x": 2}
    with pytest.raises(ValueError):
        evaluate([("register", "x", query(pat("seq", "@x", "C"), within=1))])


def test_invalid_queries_are_rejected() -> None:
    with pytest.raises(ValueError):
        evaluate([("register", "q", query(pat("seq", "A", "B")))])  # no WITHIN
    with pytest.raises(ValueError):
        evaluate(
            [("register", "q", query(pat("seq", "A", "B"), within=1, where=cmp("=", attr("z", "x"), lit(1))))]
        )
    with pytest.raises(ValueError):
        evaluate(
            [("register", "q", query(pat("seq", c("B", kleene=(3, True)))))]
        )  # a lone group needs WITHIN
    with pytest.raises(ValueError):
        evaluate([("register", "q", query(pat("seq", c("B", neg=True)), within=1))])


# ============================================================ generated inputs

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _flat(entry: Any) -> list[int]:
    if isinstance(entry, list):
        return [i for x in entry for i in _flat(x)]
    return [entry]


def _with_dependencies(queries: list[tuple[str, J]], name: str) -> list[tuple[str, J]]:
    """``name`` and the queries it reads through ``@q<i>``, in their original order."""
    wanted = {name}
    for qname, q in reversed(queries):
        if qname in wanted:
            wanted |= {cls[1:] for cls in json.dumps(q).split('"') if cls.startswith("@")}
    return [(n, q) for n, q in queries if n in wanted]


@SETTINGS
@given(st.data())
def test_generated_queries_are_valid_json_queries(data: st.DataObject) -> None:
    from ecq.language.ast import from_json  # a test may use the engine's AST; the reference may not

    generated = data.draw(query_sets()) + data.draw(query_sets_full())
    assert generated
    for _, q in generated:
        from_json(q)


@min_share(0.25)
@SETTINGS
@given(query_sets(), streams())
def test_part1_matches_obey_the_basic_rules(queries: list[tuple[str, J]], events: list[J]) -> None:
    matches = evaluate_queries(queries, events)
    record(matches)
    kinds = {name: q["pattern"]["kind"] for name, q in queries}
    last_trigger = -1
    for m in matches:
        idx = _flat(m["events"])
        assert len(set(idx)) == len(idx)
        assert {_part_value(events[i], partition_of(dict(queries)[m["query"]])) for i in idx} == {m["src"]}
        assert m["trigger"] == max(idx) >= last_trigger
        last_trigger = m["trigger"]
        if kinds[m["query"]] == "seq":
            assert idx == sorted(idx)
            assert m["start"] == events[idx[0]]["start"]
        assert 0 < m["prob"] <= 1 or m["prob"] == 0 == dict(queries)[m["query"]].get("probability")


@min_share(0.25)
@SETTINGS
@given(query_sets(), streams())
def test_recent_matches_are_all_mode_matches(queries: list[tuple[str, J]], events: list[J]) -> None:
    found: list[J] = []
    for name, q in queries:
        recent = evaluate_queries([(name, {**q, "mode": "recent"})], events)
        every = evaluate_queries([(name, {**q, "mode": "all"})], events)
        assert [m for m in recent if m not in every] == []
        # RECENT emits at most one match per completing event.
        assert len({m["trigger"] for m in recent}) == len(recent)
        found += recent
    record(found)


@min_share(0.25)
@SETTINGS
@given(query_sets(), streams(in_order=True))
def test_queries_are_independent_on_in_order_streams(queries: list[tuple[str, J]], events: list[J]) -> None:
    # Dropping never removes a match of a stream whose events arrive in time order.
    together = evaluate_queries(queries, events)
    record(together)
    for name, q in queries:
        assert evaluate_queries([(name, q)], events) == [m for m in together if m["query"] == name]


def _evaluate_or_reject(queries: list[tuple[str, J]], events: list[J]) -> list[dict[str, Any]]:
    """The reference's matches; an example where a query reads ``@name`` of a query its
    ``[attr]`` tests partition by another key is not a registrable set: rejected."""
    try:
        return evaluate_queries(queries, events)
    except ValueError as err:
        if "partitioned by another key" in str(err):
            reject()
        raise


@min_share(0.25)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query_sets_full(), streams(in_order=True))
def test_full_queries_are_independent_on_in_order_streams(
    queries: list[tuple[str, J]], events: list[J]
) -> None:
    together = _evaluate_or_reject(queries, events)
    record(together)
    for name, _ in queries:
        alone = evaluate_queries(_with_dependencies(queries, name), events)
        assert [m for m in alone if m["query"] == name] == [m for m in together if m["query"] == name]


@min_share(0.25)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query_sets_full(), streams())
def test_full_queries_run_on_any_stream(queries: list[tuple[str, J]], events: list[J]) -> None:
    matches = _evaluate_or_reject(queries, events)
    record(matches)
    for m in matches:
        idx = _flat(m["events"])
        assert len(set(idx)) == len(idx)
        assert {_part_value(events[i], partition_of(dict(queries)[m["query"]])) for i in idx} == {m["src"]}
        assert m["trigger"] >= max(idx) or not idx


# ================================================================ partitions


def _part_value(event: J, key: tuple[str, ...]) -> Any:
    """The partition value of an event dict for ``key`` (choice 13), written again."""
    values = [
        (event.get("attrs") or {}).get(a, event.get(a)) if a in ("src", "type", "start") else event["attrs"][a]
        for a in key
    ]
    return None if not key else values[0] if len(key) == 1 else tuple(values)


def test_partition_by_an_attribute_matches_across_sources() -> None:
    q = query(pat("seq", "A", "B"), within=10, mode="all")
    q["partition"] = ["sym"]
    events = [ev("A", 1, src="x", sym="IBM"), ev("B", 2, src="y", sym="IBM"), ev("B", 3, src="x", sym="SUN")]
    got = run([("q", q)], events)
    assert [(m["src"], m["events"]) for m in got] == [("IBM", [0, 1])]
    # The default key (the source) gives the match of the same source only.
    del q["partition"]
    assert events_of(run([("q", q)], events)) == [[0, 2]]


def test_an_event_lacking_the_key_is_not_seen() -> None:
    q = query(pat("seq", "A", c("B", neg=True), "C"), within=10, mode="all")
    q["partition"] = ["sym"]
    # B lacks sym: not seen, so it does not block; C lacking sym cannot complete.
    events = [ev("A", 1, sym=1), ev("B", 2), ev("C", 3, sym=1), ev("C", 4)]
    assert events_of(run([("q", q)], events)) == [[0, 2]]


def test_partition_by_none_relates_every_event() -> None:
    q = query(pat("seq", "A", "B"), within=10, mode="all")
    q["partition"] = []
    events = [ev("A", 1, src="x"), ev("B", 2, src="y")]
    got = run([("q", q)], events)
    assert [(m["src"], m["events"]) for m in got] == [(None, [0, 1])]


def test_partition_values_compare_by_type_and_several_attributes_give_a_tuple() -> None:
    q = query(pat("seq", "A", "B"), within=10, mode="all")
    q["partition"] = ["k"]
    assert events_of(run([("q", q)], [ev("A", 1, k=1), ev("B", 2, k=True), ev("B", 3, k=1.0)])) == []
    q["partition"] = ["card", "shop"]
    events = [ev("A", 1, card=7, shop="a"), ev("B", 2, card=7, shop="b"), ev("B", 3, card=7, shop="a")]
    assert [(m["src"], m["events"]) for m in run([("q", q)], events)] == [((7, "a"), [0, 2])]


def test_an_equivalence_test_partitions_unless_partition_by_is_given() -> None:
    q = query(pat("seq", "A", "B"), within=10, mode="all", where={"kind": "equiv", "attr": "id"})
    events = [ev("A", 1, src="x", id=5), ev("B", 2, src="y", id=5), ev("B", 3, src="x", id=6)]
    assert [(m["src"], m["events"]) for m in run([("q", q)], events)] == [(5, [0, 1])]
    q["partition"] = ["src"]
    assert events_of(run([("q", q)], events)) == []


def test_name_reads_only_a_query_with_the_same_key() -> None:
    base = query(pat("seq", "A", "B"), within=10, mode="all")
    base["partition"] = ["sym"]
    reader = query(pat("seq", "@p", "C"), within=10, mode="all")
    with pytest.raises(ValueError, match="another key"):
        evaluate([("register", "p", base), ("register", "r", reader)])
    reader["partition"] = ["sym"]
    events = [ev("A", 1, src="x", sym="I"), ev("B", 2, src="y", sym="I"), ev("C", 3, src="z", sym="I")]
    got = evaluate([("register", "p", base), ("register", "r", reader), *[("event", e) for e in events]])
    assert [(m["query"], m["src"], m["events"]) for m in got] == [("p", "I", [0, 1]), ("r", "I", [[0, 1], 2])]


def test_drop_horizons_are_per_key() -> None:
    # A late event: the src-keyed query with a short window dropped the A; the sym-keyed
    # one, with a long window, still has it.
    short = query(pat("seq", "A", "B"), within=1, mode="all")
    long = query(pat("seq", "A", "B"), within=100, mode="all")
    long["partition"] = ["sym"]
    events = [ev("A", 1, sym=1), ev("C", 50, sym=1), ev("B", 2, sym=1)]
    got = run([("short", short), ("long", long)], events)
    assert [(m["query"], m["events"]) for m in got] == [("long", [0, 2])]
