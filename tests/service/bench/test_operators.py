"""The benchmarks of real queries (service/bench/card.py, service/bench/operators.py):
the credit-card workload, the conditions sweep and the operator families return the
tables they say, with a row per point. Behaviour only: no timing thresholds, ever."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from service.bench import card, figures, operators
from service.bench.runner import Progress
from service.bench.table import Table
from tests.service.bench.test_figures import PAIR, TINY_SCALE

KIND = [
    "kind",
    "queries",
    "shared_us",
    "separate_us",
    "ratio",
    "shared_events_per_s",
    "shared_matches_per_s",
    "matches_per_event",
]
TARGETS = ["metric", "value", "target", "met"]
Figure = Callable[[figures.Scale, Progress | None], list[Table]]
BEYOND: dict[Figure, dict[str, list[str]]] = {
    card.card: {"card_queries": ["queries", *PAIR], "card_kinds": KIND},
    operators.conditions: {
        "conditions_queries": [
            "queries",
            "p0_us",
            "p1_us",
            "p3_us",
            "p0_python_us",
            "p1_python_us",
            "p3_python_us",
            "p1_search_us",
            "p3_search_us",
            "p0_matches_per_event",
            "p1_matches_per_event",
            "p3_matches_per_event",
        ],
        "conditions_targets": TARGETS,
    },
    operators.operators: {
        "operators": [
            "family",
            "queries",
            "shared_events_per_s",
            "separate_events_per_s",
            "ratio",
            "shared_matches_per_s",
            "separate_matches_per_s",
            "matches_per_event",
            "separate_ran",
        ],
        "operators_targets": TARGETS,
    },
}


@pytest.mark.parametrize("figure", list(BEYOND), ids=lambda f: f.__name__)
def test_the_real_query_benchmarks_return_their_tables(figure: Figure) -> None:
    tables = figure(TINY_SCALE, None)
    assert {t.name: t.columns for t in tables} == BEYOND[figure]
    for table in tables:
        assert table.rows and table.notes
        assert all(len(row) == len(table.columns) for row in table.rows)
        if table.plot is not None:
            assert {table.plot.x, *table.plot.series} <= set(table.columns)


def test_the_card_figure_measures_the_demo_workload_by_kind() -> None:
    by_q, kinds = card.card(TINY_SCALE)
    # The paper's two queries come first, then prefixes of the generated ones.
    assert by_q.column("queries") == [7, 22]
    rows = {r["kind"]: r for r in kinds.records()}
    assert list(rows) == ["sequences", "conjunctions", "all"]
    assert (
        int(rows["sequences"]["queries"]) + int(rows["conjunctions"]["queries"])
        == rows["all"]["queries"]
        == 22
    )
    # Payment bounds and outings: the workload has matches to find.
    assert float(rows["all"]["matches_per_event"]) > 0


def test_the_conditions_sweep_measures_every_count_and_its_search_phase() -> None:
    table, targets = operators.conditions(TINY_SCALE)
    assert table.column("queries") == [10, 30]
    assert all(v > 0 for v in table.column("p3_search_us"))
    # More conditions per component: fewer matches.
    p0, p3 = table.column("p0_matches_per_event"), table.column("p3_matches_per_event")
    assert p0[-1] > p3[-1]
    assert str(targets.rows[0][0]).startswith("search µs/event, 30 / 10 queries")


def test_the_operators_table_has_a_row_per_family_and_count() -> None:
    table, targets = operators.operators(TINY_SCALE)
    assert [(r["family"], r["queries"]) for r in table.records()] == [
        (f, n) for f in TINY_SCALE.families for n in TINY_SCALE.op_queries
    ]
    assert all(r["shared_events_per_s"] and r["separate_events_per_s"] for r in table.records())
    # SP above sp_sample queries ran on a sample of them, and the table says so.
    assert {r["queries"]: r["separate_ran"] for r in table.records()} == {5: 5, 10: 10, 20: 10}
    assert any("SP above 10 queries" in note for note in table.notes)
    assert table.plot is not None and table.plot.group == "family"
    # The targets at the middle count, each met or missed.
    assert {r["met"] for r in targets.records()} <= {"yes", "NO"}
    assert all(", 10 queries" in str(metric) for metric in targets.column("metric"))


def test_the_policy_axis_has_a_row_per_family_and_policy() -> None:
    """``policies``: each policy on each family that accepts one, beside MODE RECENT;
    a family that refuses policies (trailing negation, nesting) is left out."""
    from dataclasses import replace

    scale = replace(
        TINY_SCALE, families=("bare", "neg-trailing", "kleene"), policies=("exclusive", "past-last-row")
    )
    table = operators.policies(scale, 10)
    assert table.columns == [
        "family",
        "policy",
        "events_per_s",
        "recent_events_per_s",
        "ratio",
        "matches_per_event",
        "met",
    ]
    assert [(r["family"], r["policy"]) for r in table.records()] == [
        ("bare", "exclusive"),
        ("bare", "past-last-row"),
        ("kleene", "exclusive"),
        ("kleene", "past-last-row"),
    ]
    assert all(float(r["events_per_s"]) > 0 and r["met"] in ("yes", "NO") for r in table.records())
