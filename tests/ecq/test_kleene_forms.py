"""Kleene closure as users write it (docs/semantics.md §6): a Kleene component alone
(``FAIL{5}``), last in a sequence (``SEQ(LOGIN, FAIL{3,})``), upper bounds (``B{2,4}``,
``B{,n}``). The engine against the reference on both kernels, the separate-processing
baseline against the engine, and the documented examples."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ecq.engine import Engine
from ecq.evaluation.baseline import SeparateEngine
from ecq.event import Event
from ecq.kernel.select import status
from ecq.language.ast import to_json
from ecq.language.parser import parse_query
from tests import reference
from tests.ecq.test_baseline import run_ops
from tests.ecq.test_properties import engine_run, normalise, same_as_reference
from tests.match_share import min_share, record
from tests.strategies import (
    KLEENE_COMPOSED,
    KLEENE_SHAPES,
    acted_out,
    inner_alias_sets,
    kleene_composed_sets,
    kleene_form_sets,
    planted_streams,
)

CLASSES = ("A", "B", "C", "D")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def kleene_scenarios(draw: st.DrawFn, inner: bool = False, composed: bool = False) -> list[tuple[Any, ...]]:
    """Kleene-form queries (``inner``: queries reading inside their sub-patterns;
    ``composed``: groups side by side, over sub-patterns, in conjunctions), most
    registered up front, a stream acting them out (groups of one to three events over
    their minimum), clock advances now and then, then the clock flushed."""
    if composed:
        queries = draw(kleene_composed_sets(CLASSES))
    else:
        queries = draw(inner_alias_sets(CLASSES) if inner else kleene_form_sets(CLASSES))
    events = draw(planted_streams(queries, CLASSES, n_sources=2, max_len=14, blockers=3))
    return draw(acted_out(queries, events))


@pytest.mark.property
@min_share(0.35)
@SETTINGS
@given(kleene_scenarios(), st.booleans())
def test_kleene_forms_equal_the_reference(ops: list[tuple[Any, ...]], pure: bool) -> None:
    """Both kernels (the compiled one when built) against the reference."""
    compiled = False if pure or not status().compiled else None
    same_as_reference(engine_run(ops, compiled=compiled), ops)


@pytest.mark.property
@min_share(0.3)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kleene_scenarios(inner=True), st.booleans())
def test_conditions_inside_sub_patterns_equal_the_reference(ops: list[tuple[Any, ...]], pure: bool) -> None:
    """``SEQ(A a, AND(B b, C c)) WHERE b.x > a.x``, both kernels, against the reference."""
    compiled = False if pure or not status().compiled else None
    same_as_reference(engine_run(ops, compiled=compiled), ops)


@min_share(0.35)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kleene_scenarios())
def test_kleene_forms_separate_equals_shared(ops: list[tuple[Any, ...]]) -> None:
    shared = run_ops(Engine(clean_every=2), ops)
    separate = run_ops(SeparateEngine(clean_every=2), ops)
    record([m for m in shared if m[0] != "rejected"])
    assert separate == shared


@pytest.mark.property
@min_share(0.3)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kleene_scenarios(composed=True), st.booleans())
def test_composed_kleene_equals_the_reference(ops: list[tuple[Any, ...]], pure: bool) -> None:
    """Two groups side by side, a group over a sub-pattern, groups in a conjunction:
    both kernels against the reference."""
    compiled = False if pure or not status().compiled else None
    same_as_reference(engine_run(ops, compiled=compiled), ops)


@min_share(0.3)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kleene_scenarios(composed=True))
def test_composed_kleene_separate_equals_shared(ops: list[tuple[Any, ...]]) -> None:
    shared = run_ops(Engine(clean_every=2), ops)
    separate = run_ops(SeparateEngine(clean_every=2), ops)
    record([m for m in shared if m[0] != "rejected"])
    assert separate == shared


def test_every_shape_is_generated() -> None:
    assert set(KLEENE_SHAPES) == {"alone", "trailing", "middle", "leading"}
    assert set(KLEENE_COMPOSED) == {"side", "chain", "conjunction"}


# ------------------------------------------------------------ the documented examples


def run(
    queries: dict[str, str], stream: list[tuple[str, Any]], attrs: list[dict[str, Any]] | None = None
) -> list[tuple[str, list[Any]]]:
    """The engine's matches (query, events by id) for ``stream`` (class, time) at one
    source, checked against the reference."""
    events = [
        {
            "src": "u1",
            "type": t,
            "start": ts,
            "end": ts,
            "attrs": (attrs[i] if attrs else {}),
            "id": f"{t.lower()}{i}",
        }
        for i, (t, ts) in enumerate(stream)
    ]
    eng = Engine()
    for name, text in queries.items():
        eng.register(name, text)
    got = eng.process([Event.from_dict(e) for e in events]) + eng.advance_time(math.inf)
    expected = reference.evaluate_queries([(n, to_json(parse_query(t))) for n, t in queries.items()], events)
    assert [m.arrivals() for m in got] == [m["events"] for m in expected]
    return [(m.query, m.to_dict()["events"]) for m in got]


LOGINS = [
    ("LOGIN", 0),
    ("FAIL", 10),
    ("FAIL", 20),
    ("FAIL", 30),
    ("FAIL", 40),
    ("FAIL", 50),
    ("LOGIN", 200),
    ("FAIL", 210),
]


def test_count_threshold_alone_slides_one_match_per_event() -> None:
    out = run({"five": "PATTERN FAIL{3} WITHIN 1 min"}, LOGINS)
    assert out == [
        ("five", [["fail1", "fail2", "fail3"]]),
        ("five", [["fail2", "fail3", "fail4"]]),
        ("five", [["fail3", "fail4", "fail5"]]),
    ]


def test_at_least_alone_grows_with_each_event() -> None:
    out = run({"burst": "PATTERN FAIL{3,} WITHIN 25 s"}, LOGINS)
    assert out == [
        ("burst", [["fail1", "fail2", "fail3"]]),
        ("burst", [["fail2", "fail3", "fail4"]]),
        ("burst", [["fail3", "fail4", "fail5"]]),
    ]
    out = run({"burst": "PATTERN FAIL{3,} WITHIN 1 min"}, LOGINS)
    assert out[-1] == ("burst", [["fail1", "fail2", "fail3", "fail4", "fail5"]])


def test_trailing_group_emitted_at_each_element_and_bounded() -> None:
    out = run({"t": "SEQ(LOGIN, FAIL{3,}) WITHIN 2 min"}, LOGINS)
    assert out == [
        ("t", ["login0", ["fail1", "fail2", "fail3"]]),
        ("t", ["login0", ["fail1", "fail2", "fail3", "fail4"]]),
        ("t", ["login0", ["fail1", "fail2", "fail3", "fail4", "fail5"]]),
    ]
    out = run({"t": "SEQ(LOGIN, FAIL{3,4}) WITHIN 2 min"}, LOGINS)
    assert len(out) == 2


def test_trailing_negation_of_the_same_class_gives_the_maximal_group_at_window_close() -> None:
    out = run({"t": "SEQ(LOGIN, FAIL{3,}, !FAIL) WITHIN 2 min"}, LOGINS)
    assert out == [("t", ["login0", ["fail1", "fail2", "fail3", "fail4", "fail5"]])]


def test_upper_bound_between_neighbours() -> None:
    stream = [("A", 0), ("B", 1), ("B", 2), ("C", 3), ("B", 4), ("B", 5), ("B", 6), ("C", 7)]
    out = run({"q": "SEQ(A, B{2,4}, C) WITHIN 1 min MODE ALL"}, stream)
    assert out == [("q", ["a0", ["b1", "b2"], "c3"])]  # c7 has five B after a0
    out = run({"q": "SEQ(A, B{,2}, C) WITHIN 1 min MODE ALL"}, stream)
    assert out == [("q", ["a0", ["b1", "b2"], "c3"])]


# ------------------------------------------------------------ iteration conditions

PRICES = [("A", 3), ("B", 5), ("B", 1), ("B", 6), ("B", 7), ("B", 2), ("B", 9), ("C", 10)]


def priced(queries: dict[str, str]) -> list[tuple[str, list[Any], dict[str, Any]]]:
    events = [
        {
            "src": "s",
            "type": t,
            "start": float(i),
            "end": float(i),
            "attrs": {"price": p},
            "id": f"{t.lower()}{i}",
        }
        for i, (t, p) in enumerate(PRICES)
    ]
    eng = Engine()
    for name, text in queries.items():
        eng.register(name, text)
    got = eng.process([Event.from_dict(e) for e in events]) + eng.advance_time(math.inf)
    expected = reference.evaluate_queries([(n, to_json(parse_query(t))) for n, t in queries.items()], events)
    assert [(m.arrivals(), m.attrs) for m in got] == [(m["events"], m["attrs"]) for m in expected]
    return [(m.query, m.to_dict()["events"], m.attrs) for m in got]


def test_rising_run_is_built_in_arrival_order() -> None:
    out = priced(
        {
            "rise": "SEQ(A a, B+ b[], C c) WHERE b[i].price > b[i-1].price WITHIN 1 min"
            " RETURN b[1].price AS first, b[last].price AS last, count(b) AS n"
        }
    )
    # 5, then 1 (not above 5: skipped), 6, 7, 2 (skipped), 9.
    assert out == [("rise", ["a0", ["b1", "b3", "b4", "b6"], "c7"], {"first": 5, "last": 9, "n": 4})]


def test_rising_run_of_exactly_three_alone() -> None:
    out = priced({"up3": "PATTERN B^3 b WHERE b[i].price > b[i - 1].price WITHIN 1 min"})
    assert out == [("up3", [["b2", "b3", "b4"]], {})]


def test_first_and_last_elements_and_numeric_functions() -> None:
    out = priced(
        {
            "q": "SEQ(A a, B+ b[], C c) WHERE b[first].price > a.price AND b[last].price < c.price"
            " AND floor(avg(b.price)) = 5 WITHIN 1 min"
            " RETURN round(a.price / 4) AS r, ceil(2.1) AS c, int(-2.7) AS i, floor(-2.5) AS f, round(-2.5) AS m"
        }
    )
    assert out == [
        ("q", ["a0", ["b1", "b2", "b3", "b4", "b5", "b6"], "c7"], {"r": 1, "c": 3, "i": -2, "f": -3, "m": -3})
    ]


def test_match_recognize_spellings() -> None:
    sase = priced(
        {"q": "SEQ(A a, B+ b[], C c) WHERE b[i].price > b[i-1].price AND b[1].price > a.price WITHIN 1 min"}
    )
    mr = priced(
        {"q": "SEQ(A a, B+ b[], C c) WHERE b.price > prev(b.price) AND first(b.price) > a.price WITHIN 1 min"}
    )
    assert sase == mr and sase


@pytest.mark.parametrize("pure", [False, True])
def test_lone_groups_of_several_minimums_registered_and_dropped_mid_stream(pure: bool) -> None:
    """Lone groups share one test of the chains per class set (the least minimum of
    the class's queries): queries of minimums 5 and 3 and one over two classes come and
    go while one source's events arrive; every match is the reference's."""
    compiled = False if pure or not status().compiled else None
    queries = {
        "five": "PATTERN F{5} WITHIN 1 min",
        "three": "PATTERN F{3} WITHIN 1 min",
        "either": "PATTERN ANY(F, G){4} WITHIN 1 min",
        "plain": "PATTERN SEQ(G, F) WITHIN 1 min",
    }
    body = {name: to_json(parse_query(text)) for name, text in queries.items()}
    ops: list[tuple[Any, ...]] = [("register", "five", body["five"])]
    for i in range(14):
        if i == 1:  # after an F: the class's gate (five's 5) is worked out already
            ops.append(("register", "three", body["three"]))
        if i == 5:
            ops.append(("register", "either", body["either"]))
        if i == 8:
            ops += [("unregister", "three"), ("register", "plain", body["plain"])]
        if i == 13:
            ops.append(("unregister", "plain"))
        kind = "G" if i % 4 == 3 else "F"
        ops.append(("event", {"src": "s", "type": kind, "start": float(i), "id": f"e{i}"}))
    ops.append(("time", math.inf))
    got = engine_run(ops, compiled=compiled)
    assert {m["query"] for m in got} == {"five", "three", "either", "plain"}
    assert normalise(got) == normalise(reference.evaluate(ops))


# ------------------------------------------- groups side by side, chains, conjunctions


def test_two_groups_side_by_side_do_not_interleave() -> None:
    """docs/language.md: ``SEQ(A, B+, C+, D)``."""
    q = {"q": "PATTERN SEQ(A, B+, C+, D) WITHIN 1 min"}
    assert run(q, [("A", 0), ("B", 1), ("B", 2), ("C", 3), ("C", 4), ("D", 5)]) == [
        ("q", ["a0", ["b1", "b2"], ["c3", "c4"], "d5"])
    ]
    assert run(q, [("A", 0), ("B", 1), ("C", 2), ("B", 3), ("C", 4), ("D", 5)]) == []


def test_a_group_over_a_sub_pattern_is_a_chain_of_repetitions() -> None:
    """docs/language.md: each repetition begins after the one before it ends."""
    q = {"retries": "PATTERN SEQ(LOGIN l, (FAIL; RETRY){2,} r, SUCCESS s) WITHIN 5 min MODE ALL"}
    stream = [("LOGIN", 0), ("FAIL", 1), ("RETRY", 2), ("FAIL", 3), ("RETRY", 4), ("SUCCESS", 5)]
    assert run(q, stream) == [("retries", ["login0", [["fail1", "retry2"], ["fail3", "retry4"]], "success5"])]


def test_a_group_inside_a_conjunction_is_emitted_at_each_element() -> None:
    """docs/semantics.md §6 and docs/language.md: ``AND(LOGIN l, FAIL{2,} f)``."""
    q = {"both": "PATTERN AND(LOGIN l, FAIL{2,} f) WITHIN 1 min"}
    stream = [("FAIL", 10), ("LOGIN", 15), ("FAIL", 20), ("FAIL", 30)]
    assert run(q, stream) == [
        ("both", ["login1", ["fail0", "fail2"]]),
        ("both", ["login1", ["fail0", "fail2", "fail3"]]),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "PATTERN SEQ(A, B+, ANY(B, C)+, D) WITHIN 1 min",
        "PATTERN AND(A, A+) WITHIN 1 min",
        "PATTERN AND(ANY(A, B), B{2}) WITHIN 1 min",
    ],
)
def test_groups_whose_classes_overlap_are_refused(text: str) -> None:
    from ecq.errors import QueryError

    with pytest.raises(QueryError, match="share a class"):
        Engine().register("q", text)
