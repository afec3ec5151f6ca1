"""The paper's figures and the targets (service/bench/figures.py): each returns the tables
it says, with a row per point. Behaviour only: no timing thresholds, ever."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ecq.evaluation.workload import Workload
from ecq.network import LEVELS
from service.bench import figures
from service.bench.runner import PHASES

TINY_SCALE = replace(
    figures.QUICK,
    base=Workload(n_queries=30, n_sources=20),
    events=400,
    clean_every=200,
    queries=(10, 30),
    sources=(10, 20),
    periods=(100, 200),
    classes=(10, 50),
    steps=(2, 3),
    cnj_queries=(10, 20),
    cnj_sources=(10, 20),
    cnj_events=200,
    dsj_queries=(10, 20),
    dsj_sources=(10, 20),
    dsj_events=200,
    target_queries=(10, 20, 30),
    target_events=400,
    gaps=(1200.0, 2400.0),
    gap_events=200,
    card=Workload(n_queries=20, n_sources=20, window_min=3600.0, window_max=5 * 3600.0, source_gap=1800.0),
    card_queries=(5, 20),
    card_events=200,
    cond_queries=(10, 30),
    cond_events=200,
    op_queries=(5, 10, 20),
    op_events=200,
    sp_sample=10,
)

PAIR = [
    "shared_us",
    "separate_us",
    "ratio",
    "shared_events_per_s",
    "matches_per_event",
    "shared_stored",
    "separate_stored",
]
EXPECTED = {
    "cleaning": {
        "fig07a_cleaning_time": [
            "period",
            "shared_clean_us",
            "separate_clean_us",
            "shared_us",
            "separate_us",
        ],
        "fig07b_cleaning_storage": ["period", "shared_stored", "separate_stored"],
    },
    "queries": {"fig08a_queries": ["queries", *PAIR]},
    "sources": {"fig08b_sources": ["sources", *PAIR]},
    "breakdown": {"fig09_breakdown": ["engine", *PHASES, "other", "total"]},
    "storage": {
        "fig10a_storage_queries": ["queries", "shared_stored", "separate_stored", "separate_per_shared"],
        "fig10b_storage_sources": ["sources", "shared_stored", "separate_stored", "separate_per_shared"],
    },
    "classes": {"fig11a_classes": ["classes", *PAIR], "fig11b_steps": ["steps", *PAIR]},
    "conjunction": {
        "fig12a_cnj_queries": ["queries", *PAIR],
        "fig12b_cnj_sources": ["sources", *PAIR],
        "fig13a_cnj_storage_queries": ["queries", "shared_stored", "separate_stored", "separate_per_shared"],
        "fig13b_cnj_storage_sources": ["sources", "shared_stored", "separate_stored", "separate_per_shared"],
    },
    "disjunction": {
        name: [
            param,
            "dsj3_shared_us",
            "dsj3_separate_us",
            "dsj5_shared_us",
            "dsj5_separate_us",
            "dsj5_matches_per_event",
        ]
        for name, param in (("fig14a_dsj_queries", "queries"), ("fig14b_dsj_sources", "sources"))
    },
    "targets": {"targets": ["metric", "value", "target", "met"]},
    "rate": {
        "workload_rate": [
            "gap",
            "matches_per_event",
            "shared_us",
            "separate_us",
            "ratio",
            "shared_stored",
            "separate_stored",
        ]
    },
}


@pytest.mark.parametrize("figure", sorted(EXPECTED))
def test_each_figure_returns_its_tables(figure: str) -> None:
    tables = getattr(figures, figure)(TINY_SCALE)
    assert {t.name: t.columns for t in tables} == EXPECTED[figure]
    for table in tables:
        assert table.rows and table.notes
        assert all(len(row) == len(table.columns) for row in table.rows)
        if table.plot is not None:
            assert {table.plot.x, *table.plot.series} <= set(table.columns)


def test_sweeps_have_one_row_per_point() -> None:
    (table,) = figures.queries(TINY_SCALE)
    assert table.column("queries") == list(TINY_SCALE.queries)
    (table,) = figures.breakdown(TINY_SCALE)
    assert table.column("engine") == ["separate", *(f"shared:{level}" for level in LEVELS)]


def test_storage_is_flat_in_queries_for_the_shared_engine_only() -> None:
    """Instance sharing: with every class in use, more queries store no more instances
    in the shared network, and proportionally more in the baseline."""
    base = replace(TINY_SCALE.base, n_classes=3, window_max=200 * 60.0)  # permutations, one window
    scale = replace(TINY_SCALE, base=base, queries=(10, 30))
    by_queries, _ = figures.storage(scale)
    shared = by_queries.column("shared_stored")
    separate = by_queries.column("separate_stored")
    assert shared[0] == shared[1]
    assert separate[1] > separate[0]


def test_targets_measure_their_own_event_count() -> None:
    """The targets measure ``target_events`` (longer than a figure's point: a ratio of
    two unit times), and say so."""
    (table,) = figures.targets(replace(TINY_SCALE, target_events=500))
    assert any(note.startswith("500 events measured") for note in table.notes)
    assert figures.FULL.target_events > figures.FULL.events
