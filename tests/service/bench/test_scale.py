"""The credit-card workload at scale (``card_scale``): one row per size, SP beside the
shared engine up to its limit and said to be left out above it, the same matches from
both engines, and memory measured in a process of each point's own."""

from __future__ import annotations

from dataclasses import replace

from service.bench.card import card_setting
from service.bench.figures import QUICK
from service.bench.runner import SEPARATE, SHARED
from service.bench.scale import COLUMNS, card_scale, run_point

SCALE = replace(QUICK, scale_queries=(10, 40), scale_events=300, scale_sp_max=10)


def test_one_row_per_size_and_sp_left_out_above_its_limit_says_so() -> None:
    table = card_scale(SCALE)
    assert table.columns == COLUMNS
    assert table.column("queries") == [12, 42]  # the paper's two first
    first, second = table.records()
    assert isinstance(first["separate_cpu_us"], float) and first["separate_cpu_us"] > 0
    assert second["separate_cpu_us"] == second["ratio"] == second["separate_peak_mb"] == "-"
    assert all(
        isinstance(row["shared_events_per_s"], int) and row["shared_events_per_s"] > 0
        for row in (first, second)
    )
    # Each point in a process of its own: its memory is its run's, not this process's.
    assert all(0 < float(row["shared_peak_mb"]) < 500 for row in (first, second))
    assert any("SP not run above 12 queries (42)" in note for note in table.notes)


def test_max_queries_stops_the_table() -> None:
    table = card_scale(SCALE, max_queries=12)
    assert table.column("queries") == [12]
    assert not any("SP not run" in note for note in table.notes)


def test_both_engines_find_the_same_matches() -> None:
    """Non-vacuous: the workload completes matches at this size."""
    setting = card_setting(SCALE, events=SCALE.scale_events)
    setting = replace(setting, workload=replace(setting.workload, n_queries=40))
    shared = run_point(setting, replace(SHARED, queries=42))
    separate = run_point(setting, replace(SEPARATE, queries=42))
    assert shared.matches == separate.matches > 0
    assert shared.register_seconds > 0 and shared.register_cpu_seconds > 0 and shared.cpu_seconds > 0
    assert shared.events == separate.events == SCALE.scale_events
