"""``scemon bench ...`` in process: quick runs write the CSV and PNG files of their
figures, and ``ratio`` the targets with a real ``scemon replay``."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from service.bench.scale import COLUMNS
from service.cli.app import app
from tests.service.bench.test_figures import EXPECTED
from tests.service.bench.test_report import PNG, read_csv

# Tables a command writes beside its figure's: `bench queries` adds the credit-card
# workload at scale (service/bench/scale.py).
BESIDE = {"queries": {"card_scale": COLUMNS}}


@pytest.mark.parametrize("command", ["cleaning", "queries", "breakdown", "disjunction"])
def test_quick_commands_write_csv_and_png(command: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["bench", command, "--quick", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    names = EXPECTED[command] | BESIDE.get(command, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*(f"{name}.{ext}" for name in names for ext in ("csv", "png")), "machine.json"]
    )
    for name, columns in names.items():
        header, rows = read_csv(tmp_path / f"{name}.csv")
        assert header == columns and rows
        assert name.split("_")[0] in result.output or "Fig." in result.output


def test_bench_queries_stops_the_scale_table_at_max_queries(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["bench", "queries", "--quick", "--out", str(tmp_path), "--max-queries", "22"])
    assert result.exit_code == 0, result.output
    _, rows = read_csv(tmp_path / "card_scale.csv")
    assert [row[0] for row in rows] == ["22"]
    # 0: the figure alone.
    alone = tmp_path / "alone"
    result = CliRunner().invoke(app, ["bench", "queries", "--quick", "--out", str(alone), "--max-queries", "0"])
    assert result.exit_code == 0, result.output
    assert (alone / "fig08a_queries.csv").exists() and not (alone / "card_scale.csv").exists()


def test_operators_command_takes_families_and_counts_and_rejects_unknown_families(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["bench", "operators", "--quick", "--family", "kleene", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    header, rows = read_csv(tmp_path / "operators.csv")
    assert header[:2] == ["family", "queries"] and {row[0] for row in rows} == {"kleene"}
    assert (tmp_path / "operators.png").read_bytes().startswith(PNG)
    result = CliRunner().invoke(
        app,
        ["bench", "operators", "--quick", "--family", "cnj3", "--queries", "30", "--queries", "10"]
        + ["--sp-sample", "15", "--out", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    header, rows = read_csv(tmp_path / "operators.csv")
    assert [(row[0], row[1]) for row in rows] == [("cnj3", "10"), ("cnj3", "30")]
    # SP at 30 queries ran on 15 of them (--sp-sample), at 10 on all.
    assert [row[header.index("separate_ran")] for row in rows] == ["10", "15"]
    header, rows = read_csv(tmp_path / "operators_targets.csv")
    assert rows and all(", 30 queries" in row[0] for row in rows)  # the middle of two counts
    result = CliRunner().invoke(app, ["bench", "operators", "--quick", "--family", "nonsense"])
    assert result.exit_code == 1
    assert "unknown family 'nonsense'" in result.output


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
    card_rows = [row for row in rows if row[0].startswith("credit-card workload events/s")]
    assert len(card_rows) == 2 and all(float(row[1]) > 0 for row in card_rows)
    alone = [
        row for row in rows if row[0].startswith("shared events/s") and row[0].endswith("measured alone")
    ]
    assert len(alone) == 2 and all(float(row[1]) > 0 for row in alone)
    assert all(row[3] in ("yes", "NO") for row in rows)


def test_the_lateness_bench_compares_the_paths_and_holding_gives_the_in_order_matches(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["bench", "lateness", "--quick", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    header, rows = read_csv(tmp_path / "lateness.csv")
    assert header[:3] == ["variant", "stream", "lateness_s"] and len(rows) == 7
    table = {(r[0], r[1]): r for r in rows}
    matches = {key: int(row[header.index("matches")]) for key, row in table.items()}
    late = {key: int(row[header.index("late")]) for key, row in table.items()}
    in_order = matches[("engine alone (before)", "in order")]
    late_stream = "late by <= 60 s"
    assert in_order > 0 and all(n == in_order for (_, stream), n in matches.items() if stream == "in order")
    # The late stream: taken as it comes, events are late (and counted); held for the
    # disorder it gives the in-order matches, none late.
    assert matches[("time keeper, L = 60 s", late_stream)] == in_order
    assert late[("time keeper, L = 60 s", late_stream)] == 0 < late[("time keeper, L = 0", late_stream)]
    assert matches[("engine alone (before)", late_stream)] == matches[("time keeper, L = 0", late_stream)]


def test_the_pipeline_bench_runs_every_path_on_the_same_events(tmp_path: Path) -> None:
    """Replay, the service with 0/1/10 subscribers and the Spark job: every row the
    same measured events and the same matches (each subscriber got every one of them,
    or the bench fails), a ratio to replay, and the server's figures."""
    result = CliRunner().invoke(app, ["bench", "pipeline", "--quick", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "machine.json",
        "pipeline_demo.csv",
        "pipeline_demo.png",
    ]
    header, rows = read_csv(tmp_path / "pipeline_demo.csv")
    assert header[:6] == ["path", "events", "matches", "seconds", "events_per_s", "ratio"]
    table = {row[0]: dict(zip(header, row, strict=True)) for row in rows}
    assert list(table) == [
        "replay (engine only)",
        "service, 0 subs",
        "service, 1 sub",
        "service, 10 subs",
        "Spark job, 1 sub",
    ]
    replay = table["replay (engine only)"]
    assert float(replay["ratio"]) == 1.0 and int(replay["matches"]) > 0
    for path, row in table.items():
        assert (row["events"], row["matches"]) == (replay["events"], replay["matches"]), path
        assert float(row["events_per_s"]) > 0
        # Each ratio is to the replays run right before and after its row (the machine's
        # speed moves between rows): the column says which rate it was divided by.
        expected = float(row["events_per_s"]) / float(row["replay_per_s"])
        assert float(row["ratio"]) == pytest.approx(expected, rel=0.01, abs=0.002), path
    for path in ("service, 1 sub", "service, 10 subs", "Spark job, 1 sub"):
        assert table[path]["met"] in ("yes", "NO")
        assert float(table[path]["peak_rss_mb"]) > 0
    for path in ("service, 1 sub", "service, 10 subs"):
        assert 0 < float(table[path]["p50_ms"]) <= float(table[path]["p99_ms"])
        # The subscribers' CPU is shown (a quick row may take them under a clock tick,
        # and the column is rounded to 10 ms: only its sign is sure).
        assert float(table[path]["subs_cpu_s"]) >= 0
    assert float(table["service, 0 subs"]["subs_cpu_s"]) == 0
    # The server's own split: its engine thread's CPU, part of the server's (both
    # rounded to 10 ms, the server's from clock ticks).
    for path in ("service, 0 subs", "service, 1 sub", "service, 10 subs"):
        assert 0 <= float(table[path]["engine_cpu_s"]) <= float(table[path]["cpu_s"]) + 0.05, path
    assert table["replay (engine only)"]["subs_cpu_s"] == "-"
    # Spark's per-batch phases and the job's own split of its delivery, in the notes.
    notes = (tmp_path / "pipeline_demo.csv").read_text()
    assert "triggerExecution" in notes and "job: toArrow (Spark tasks, collect)" in notes
    assert "replay ran 5 times" in notes  # before the first row and after each of the four


def test_the_pipeline_bench_refuses_an_unknown_workload(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["bench", "pipeline", "--quick", "--workload", "nope", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "'nope' is not one of demo, seq" in result.output
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_builds_command_compares_the_engines_and_scemon_replay(tmp_path: Path) -> None:
    import sys

    build = f"{sys.executable}@{Path(__file__).resolve().parents[3]}"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "builds",
            "--quick",
            "--out",
            str(tmp_path),
            "--build",
            f"a={build}",
            "--build",
            f"b={build}",
        ]
        + ["--replay-events", "500", "--replay-rounds", "1"],
    )
    assert result.exit_code == 0, result.output
    header, rows = read_csv(tmp_path / "builds.csv")
    assert header[:3] == ["build", "python", "kernel"] and "cpu_vs_first" in header and len(rows) == 6
    header, rows = read_csv(tmp_path / "builds_replay.csv")
    assert header == ["build", "events_per_s", "vs_first", "cpu_s", "cpu_vs_first", "matches"]
    assert [row[0] for row in rows] == ["a", "b"] and rows[0][5] == rows[1][5]


def test_operators_command_takes_policies_and_rejects_unknown_ones(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["bench", "operators", "--quick", "--family", "bare", "--queries", "10", "--policy", "exclusive"]
        + ["--policy", "chronicle", "--out", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    header, rows = read_csv(tmp_path / "operators_policies.csv")
    assert header[:2] == ["family", "policy"]
    assert [(row[0], row[1]) for row in rows] == [("bare", "exclusive"), ("bare", "chronicle")]
    result = CliRunner().invoke(app, ["bench", "operators", "--quick", "--policy", "nonsense"])
    assert result.exit_code == 1
    assert "unknown policy 'nonsense'" in result.output


def test_partitions_command_measures_every_key_count_shared_and_sp(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["bench", "partitions", "--quick", "--events", "600", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "machine.json",
        "partitions_keys.csv",
        "partitions_keys.png",
        "partitions_own_classes.csv",
        "partitions_own_classes.png",
    ]
    header, rows = read_csv(tmp_path / "partitions_keys.csv")
    assert header == [
        "keys",
        "shared_ev_s",
        "sp_ev_s",
        "shared_stored",
        "sp_stored",
        "shared_vs_1_key",
        "one_network_ev_s",
        "networks_bound_vs_1_key",
        "per_key_engines_ev_s",
        "per_key_engines_vs_1_key",
    ]
    table = [dict(zip(header, row, strict=True)) for row in rows]
    assert [int(r["keys"]) for r in table] == [1, 2, 4, 8]
    # One key's network alone is the single-key engine itself for one key; for more, an
    # engine of its own whose speed, divided by the keys, gives the bound column.
    assert table[0]["one_network_ev_s"] == table[0]["shared_ev_s"]
    assert float(table[0]["networks_bound_vs_1_key"]) == 1.0
    # One engine per key: for one key, the single-key engine itself.
    assert table[0]["per_key_engines_ev_s"] == table[0]["shared_ev_s"]
    assert all(int(r["per_key_engines_ev_s"]) > 0 for r in table)
    for r in table:
        bound = int(r["one_network_ev_s"]) / int(r["keys"]) / int(table[0]["shared_ev_s"])
        assert abs(float(r["networks_bound_vs_1_key"]) - bound) <= 0.006
    # Keys over classes of their own: the keyed engine stores each event once, in the
    # network of its class's key, as the one-key engine of the same queries does.
    header, rows = read_csv(tmp_path / "partitions_own_classes.csv")
    assert header == ["keys", "keyed_ev_s", "one_key_ev_s", "keyed_vs_one_key", "keyed_stored", "one_key_stored"]
    own = [dict(zip(header, row, strict=True)) for row in rows]
    assert [int(r["keys"]) for r in own] == [1, 2, 4, 8]
    assert all(int(r["keyed_stored"]) > 0 for r in own)
    assert own[0]["keyed_stored"] == own[0]["one_key_stored"]
    # Shared storage grows with the keys in use (each event once per key); SP stores a
    # copy per query whatever the keys.
    shared = [int(r["shared_stored"]) for r in table]
    assert shared == sorted(shared) and shared[-1] > shared[0]
    assert all(int(r["sp_stored"]) >= int(r["shared_stored"]) for r in table)
