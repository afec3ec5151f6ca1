"""Bad queries and bad events: a clear error that says where and why, and no change."""

from __future__ import annotations

from typing import Any

import pytest

from ecq.engine import Engine
from ecq.errors import (
    DuplicateQueryError,
    EventError,
    ParseError,
    QueryError,
    SemanticError,
    UnknownQueryError,
)
from ecq.event import Event
from ecq.language.ast import from_json


def rejected(text: str, engine: Engine | None = None) -> QueryError:
    eng = engine or Engine()
    before = eng.stats()
    with pytest.raises(QueryError) as info:
        eng.register("bad", text)
    assert eng.stats() == before
    return info.value


def located(err: QueryError) -> tuple[int | None, int | None, str | None]:
    assert isinstance(err, (ParseError, SemanticError))
    return err.line, err.column, err.token


def test_unknown_alias_in_where_is_located() -> None:
    err = rejected("SEQ(A a, B b) WHERE a.x > c.x WITHIN 5")
    assert located(err) == (1, 27, "c")
    assert "unknown component 'c'" in str(err)
    assert "^" in str(err)


def test_unknown_class_reference_in_where_is_located() -> None:
    err = rejected("PATTERN A; B\nWHERE C.price > 3\nWITHIN 5")
    assert located(err) == (2, 7, "C")


def test_ambiguous_class_reference_needs_an_alias() -> None:
    err = rejected("SEQ(A, A) WHERE A.x > 1 WITHIN 5")
    assert "names 2 components" in str(err)


def test_aggregate_over_a_non_kleene_component() -> None:
    err = rejected("SEQ(A a, B b) WHERE count(b) > 2 WITHIN 5")
    assert located(err)[2] == "count"
    assert "Kleene" in str(err)


def test_missing_within_for_a_sequence() -> None:
    err = rejected("SEQ(A, B)")
    assert "WITHIN" in str(err)


def test_two_adjacent_negations() -> None:
    err = rejected("SEQ(A, !B, !C, D) WITHIN 5")
    assert located(err)[:2] == (1, 12)


def test_negation_as_the_only_component() -> None:
    err = rejected("PATTERN !B WITHIN 5")
    assert located(err)[2] == "!"


def test_kleene_alone_needs_within() -> None:
    err = rejected("PATTERN FAIL{5}")
    assert "WITHIN" in str(err)


def test_return_that_reads_a_negated_component() -> None:
    err = rejected("SEQ(A a, !B b, C c) WITHIN 5 RETURN b.x")
    assert "negated" in str(err)
    assert located(err)[0] == 1


def test_unregistered_at_name() -> None:
    err = rejected("SEQ(@nobody, A) WITHIN 5")
    assert "@nobody" in str(err)


def test_cycle_of_derived_classes() -> None:
    eng = Engine()
    with pytest.raises(SemanticError, match="cycle"):
        eng.register("self", "SEQ(@self, A) WITHIN 5")
    eng.register("a", "SEQ(A, B) WITHIN 5")
    eng.register("b", "SEQ(@a, C) WITHIN 5")
    eng.unregister("a")
    with pytest.raises(SemanticError, match="cycle"):
        eng.register("a", "SEQ(@b, D) WITHIN 5")
    assert [q.name for q in eng.queries()] == ["b"]


def test_duplicate_name_and_unknown_unregister() -> None:
    eng = Engine()
    eng.register("q", "SEQ(A, B) WITHIN 5")
    with pytest.raises(DuplicateQueryError):
        eng.register("q", "PATTERN C")
    with pytest.raises(UnknownQueryError):
        eng.unregister("missing")
    assert [q.name for q in eng.queries()] == ["q"]


def test_parse_error_has_line_column_token_and_caret() -> None:
    err = rejected("SEQ(A, B\nWITHIN 5")
    assert isinstance(err, ParseError)
    assert err.line == 2 and err.token == "WITHIN"
    assert err.excerpt.endswith("^")


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"type": "A", "start": 1}, "src"),
        ({"src": 1, "start": 1}, "type"),
        ({"src": 1, "type": "A"}, "start"),
        ({"src": 1, "type": "A", "start": 5, "end": 4}, "end"),
        ({"src": 1, "type": "A", "start": "noon"}, "start"),
        ({"src": 1, "type": "A", "start": 1, "attrs": {"x": {"nested": 1}}}, "attrs"),
        ({"src": 1, "type": "A", "start": 1, "attrs": [1, 2]}, "attrs"),
        ({"src": 1, "type": "A", "start": 1, "prob": 0}, "prob"),
    ],
)
def test_bad_events_name_the_place_and_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(EventError) as info:
        Event.from_dict(data, where="event 4")
    assert info.value.field == field
    assert str(info.value).startswith(f"event 4, field {field!r}")


def test_deep_nesting_is_a_located_error_not_a_crash() -> None:
    err = rejected("PATTERN " + "(" * 200 + "A" + ")" * 200)
    assert isinstance(err, ParseError)
    assert (err.line, err.column, err.token) == (1, 73, "(")
    long_sum = "PATTERN A WHERE A.x > " + " + ".join(["1"] * 1500)
    assert "nested too deeply" in str(rejected(long_sum))


def test_a_window_above_the_maximum_is_refused_where_it_is_written() -> None:
    err = rejected("SEQ(A, B)\nWITHIN 1e308 seconds")
    assert located(err) == (2, 1, "WITHIN")
    assert "longer than the longest window taken, 366 days" in str(err)
    assert "longest window" in str(rejected("AND(A, B) WITHIN 367 days"))
    as_json = {
        "kind": "query",
        "pattern": {"kind": "seq", "items": [{"kind": "component", "classes": [c]} for c in "AB"]},
        "within": 1e308,
    }
    with pytest.raises(SemanticError, match="366 days"):
        Engine().register("bad", from_json(as_json))
    Engine().register("year", "SEQ(A, B) WITHIN 366 days")
