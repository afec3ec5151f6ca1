"""The benchmark harness (service/bench, ``scemon bench``) measures what it says and
writes what it says. Behaviour only: no timing thresholds, ever (tests assert
behaviour, benchmarks report numbers: docs/architecture.md)."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ecq.network import LEVELS
from ecq.workload import Workload
from service.bench import figures
from service.bench.report import refresh_doc, write_csv, write_plot
from service.bench.runner import PHASES, SEPARATE, SHARED, Setting, Variant, make_engine, measure
from service.bench.table import Plot, Table
from service.cli.app import app

TINY = Setting(Workload(n_queries=40, n_sources=20), clean_every=200, events=800, warmup=400, chunk=150)
PNG = b"\x89PNG\r\n\x1a\n"


def read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    rows = list(csv.reader(lines))
    return rows[0], rows[1:]


# ------------------------------------------------------------------- runner


def test_measure_counts_only_the_events_after_warm_up() -> None:
    shared, separate = measure(TINY, [SHARED, SEPARATE])
    for res in (shared, separate):
        assert res.events == TINY.events
        assert res.seconds > 0 and res.seconds >= res.clean_seconds > 0
        # Cleanings at 600, 800, 1000, 1200 (after the 400 warm-up events): two counts each.
        assert res.cleanings == 4 and len(res.stored_samples) == 8
    # Same stream, same queries, same semantics: the same matches.
    assert shared.matches == separate.matches > 0
    # The baseline keeps a copy per plan; the shared network one per instance.
    assert separate.stored_avg > shared.stored_avg > 0


def test_variants_with_fewer_queries_register_a_prefix() -> None:
    few, all_ = measure(TINY, [replace(SHARED, queries=5), SHARED])
    assert few.label == "shared@5"
    assert few.matches <= all_.matches


@pytest.mark.parametrize("variant", [Variant("separate", profile=True), Variant("shared", LEVELS[0], True)])
def test_profiled_variants_report_every_phase(variant: Variant) -> None:
    (res,) = measure(TINY, [variant])
    assert set(res.timers) == set(PHASES)
    assert sum(res.timers.values()) > 0
    assert res.phase_us("clean") > 0


def test_every_level_and_engine_can_be_built() -> None:
    for level in LEVELS:
        make_engine(Variant("shared", level))
    with pytest.raises(ValueError):
        make_engine(Variant("nonsense"))


def test_progress_reaches_the_end() -> None:
    seen: list[float] = []
    measure(TINY, [SHARED], lambda fraction, label: seen.append(fraction))
    assert seen == sorted(seen) and seen[-1] == 1.0


# ------------------------------------------------------------------ figures

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


# ------------------------------------------------------------------- output


def test_csv_and_plot_files(tmp_path: Path) -> None:
    table = Table("t", "a title", ["x", "a", "b"], plot=Plot("x", ("a", "b"), "y"), notes=["n1"])
    table.add(x=1, a=2.0, b=3.0)
    table.add(x=2, a=2.5, b=1.0)
    with pytest.raises(ValueError):
        table.add(x=3)
    path = write_csv(table, tmp_path)
    assert path.read_text().startswith("# n1\n")
    assert read_csv(path) == (["x", "a", "b"], [["1", "2.0", "3.0"], ["2", "2.5", "1.0"]])
    png = write_plot(table, tmp_path)
    assert png is not None and png.read_bytes().startswith(PNG)
    stacked = Table("s", "s", ["engine", "p", "q"], plot=Plot("engine", ("p", "q"), "y", kind="stacked"))
    stacked.add(engine="one", p=1.0, q=2.0)
    png = write_plot(stacked, tmp_path)
    assert png is not None and png.read_bytes().startswith(PNG)
    assert write_plot(Table("none", "none", ["x"]), tmp_path) is None


def test_refresh_doc_replaces_only_the_marked_tables(tmp_path: Path) -> None:
    table = Table("fig", "a title", ["x", "y"], notes=["paper Fig. 1", "setting"])
    table.add(x=1000, y=2.5)
    write_csv(table, tmp_path)
    doc = tmp_path / "page.md"
    doc.write_text(
        "intro\n<!-- bench:fig -->\nold\n<!-- /bench:fig -->\n"
        "<!-- bench:missing -->\nkept\n<!-- /bench:missing -->\n"
    )
    assert refresh_doc(doc, tmp_path) == ["fig"]
    assert doc.read_text() == (
        "intro\n<!-- bench:fig -->\n| x | y |\n|---|---|\n| 1,000 | 2.50 |\n\n*setting*\n"
        "<!-- /bench:fig -->\n<!-- bench:missing -->\nkept\n<!-- /bench:missing -->\n"
    )
    assert refresh_doc(tmp_path / "absent.md", tmp_path) == []


# ---------------------------------------------------------------------- CLI


@pytest.mark.parametrize("command", ["cleaning", "queries", "breakdown", "disjunction"])
def test_quick_commands_write_csv_and_png(command: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["bench", command, "--quick", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    names = EXPECTED[command]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{name}.{ext}" for name in names for ext in ("csv", "png")
    )
    for name, columns in names.items():
        header, rows = read_csv(tmp_path / f"{name}.csv")
        assert header == columns and rows
        assert name.split("_")[0] in result.output or "Fig." in result.output


def test_targets_measure_their_own_event_count() -> None:
    """The targets measure ``target_events`` (longer than a figure's point: a ratio of
    two unit times), and say so."""
    (table,) = figures.targets(replace(TINY_SCALE, target_events=500))
    assert any(note.startswith("500 events measured") for note in table.notes)
    assert figures.FULL.target_events > figures.FULL.events


def test_ratio_command_reports_the_targets_and_a_real_replay(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["bench", "ratio", "--quick", "--out", str(tmp_path), "--replay-events", "500"]
    )
    assert result.exit_code == 0, result.output
    header, rows = read_csv(tmp_path / "targets.csv")
    assert header == ["metric", "value", "target", "met"]
    metrics = [row[0] for row in rows]
    assert any("SP/shared" in m for m in metrics)
    assert any("scemon replay" in m for m in metrics)
    alone = [row for row in rows if row[0].endswith("measured alone")]
    assert len(alone) == 2 and all(float(row[1]) > 0 for row in alone)
    assert all(row[3] in ("yes", "NO") for row in rows)
