"""Kleene closure as users write it: bounds, SASE+'s run elements (``b[i]``,
``b[i-1]``, ``b[1]``, ``b[first]``, ``b[last]``), MATCH_RECOGNIZE's ``prev/first/last``,
the numeric functions, and the errors (docs/semantics.md §6)."""

from __future__ import annotations

from typing import Any

import pytest

from ecq.engine import Engine
from ecq.errors import ParseError, QueryError
from ecq.language.ast import Agg, AttrRef, Compare, Func, Prev, from_json, to_json
from ecq.language.parser import parse_query
from ecq.language.printer import format_query


def where(text: str) -> Any:
    return parse_query(f"SEQ(A a, B+ b[], C c) WHERE {text} WITHIN 5").where


def test_run_elements() -> None:
    assert where("b[i].x > b[i-1].x") == Compare(">", AttrRef("b", "x"), Prev("b", "x"))
    assert where("b[i].x > b[i - 1].x") == where("b[i].x > b[i-1].x")
    assert where("b.x > prev(b.x)") == where("b[i].x > b[i-1].x")
    assert where("b[1].x < 3") == Compare("<", Agg("first", "b", "x"), where("3 < 4").left)
    assert where("b[first].x < 3") == where("b[1].x < 3") == where("first(b.x) < 3")
    assert where("b[last].x < 3") == where("last(b.x) < 3")
    assert where("floor(a.x) = 1") == Compare("=", Func("floor", (AttrRef("a", "x"),)), where("1 = 1").right)


@pytest.mark.parametrize(
    "text",
    [
        "SEQ(A a, B+ b[], C c) WHERE b[i].x > b[i-1].x AND b[1].x > a.x AND b[last].x < c.x WITHIN 5",
        "PATTERN B{2,4} b WHERE round(b.x) != int(b.y) AND ceil(b.x) >= floor(b.y) WITHIN 5",
        "SEQ(A, B{,3}, C) WITHIN 5",
    ],
)
def test_round_trip(text: str) -> None:
    q = parse_query(text)
    assert parse_query(format_query(q)) == q
    assert from_json(to_json(q)) == q


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("SEQ(A a, B+ b[], C c) WHERE b[2].x > 1 WITHIN 5", "expected i, i-1, 1, first or last"),
        ("SEQ(A a, B+ b[], C c) WHERE b[i-2].x > 1 WITHIN 5", "expected i, i-1"),
        ("SEQ(A a, B+ b[], C c) WHERE b[i].x > 1 RETURN b WITHIN 5", "expected '.'"),
    ],
)
def test_bad_run_elements(text: str, needle: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_query(text)
    assert needle in str(info.value)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("SEQ(A a, B b, C c) WHERE b[i].x > b[i-1].x WITHIN 5", "Kleene"),
        ("SEQ(A a, B+ b, C c) WHERE b[i-1].x > count(b) WITHIN 5", "aggregate"),
        ("SEQ(A a, B+ b, !D d, C c) WHERE b[i-1].x > d.x WITHIN 5", "negated"),
        ("SEQ(A a, B+ b, C c) WITHIN 5 RETURN b[i-1].x", "RETURN"),
        ("OR(A a, B b) WHERE a[i-1].x > 1", "disjunction"),
        ("SEQ(A a, B+ b, C c) WHERE first(a.x) > 1 WITHIN 5", "Kleene"),
    ],
)
def test_iteration_conditions_rejected(text: str, needle: str) -> None:
    eng = Engine()
    with pytest.raises(QueryError) as info:
        eng.register("q", text)
    assert needle in str(info.value)
    assert not eng.queries()


def test_conditions_inside_sub_patterns_by_alias() -> None:
    eng = Engine()
    eng.register("q", "SEQ(A a, AND(B b, C c)) WHERE b.x > a.x WITHIN 10 MODE ALL RETURN c.x AS cx")
    for text, needle in [
        ("SEQ(A a, (B b; !C c; D)) WHERE c.x = 1 WITHIN 10", "negated"),
        ("SEQ(A a, (B b | C c)) WHERE b.x > 1 WITHIN 3", "disjunction"),
        ("OR(A a, AND(B b, C c)) WHERE b.x > 1 WITHIN 3", "disjunction"),
        ("SEQ(A a, (B a; C c)) WITHIN 3", "twice"),
    ]:
        with pytest.raises(QueryError) as info:
            eng.register("bad", text)
        assert needle in str(info.value)
    assert [q.name for q in eng.queries()] == ["q"]
