"""``scemon bench startup`` (behaviour, not timings): real ``scemon replay`` runs of a
generated file, whole and split into its steps; the split adds up to its run, and the
driver fails loudly if the command's steps change."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ecq.evaluation import workload as wl
from service.bench import startup
from service.bench.replay import write_replay_files
from service.cli.app import app
from tests.service.bench.test_report import read_csv


def test_a_split_run_times_every_step_of_the_real_command(tmp_path: Path) -> None:
    queries, events = write_replay_files(wl.Workload(n_queries=30, source_gap=60.0), 3000, tmp_path)
    out = tmp_path / "matches.jsonl"
    split = startup.time_split(queries, events, out)
    names = [name for name, _ in startup.PHASES]
    assert list(split.phases) == names
    assert all(wall >= 0 and cpu >= 0 for wall, cpu, _ in split.phases.values())
    # consecutive stamps: the steps add up to the run the parent timed
    assert sum(wall for wall, _, _ in split.phases.values()) == pytest.approx(split.wall, abs=1e-6)
    assert split.phases["import replay"][1] > 0 and split.phases["compile + install"][1] > 0
    written = out.read_bytes()
    assert written.count(b"\n") > 0  # the command ran for real and wrote its matches
    whole = startup.time_whole(queries, events, out)
    assert whole.wall > 0 and whole.cpu > 0 and out.read_bytes() == written


def test_the_driver_refuses_a_command_whose_steps_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    queries, events = write_replay_files(wl.Workload(n_queries=5), 100, tmp_path)
    monkeypatch.setattr(
        startup, "DRIVER", startup.DRIVER.replace('replay.run = wrapped("match + write", replay.run)\n', "")
    )
    with pytest.raises(RuntimeError, match="steps"):
        startup.time_split(queries, events, tmp_path / "matches.jsonl")


def test_the_command_writes_a_row_per_step_and_the_whole(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["bench", "startup", "--quick", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    header, rows = read_csv(tmp_path / "startup.csv")
    assert header[:3] == ["phase", "covers", "wall_ms"] and "met" in header
    assert [row[0] for row in rows] == [
        *(name for name, _ in startup.PHASES),
        "all (split run)",
        "scemon replay",
    ]
    assert rows[-1][header.index("target")] == "<= 500"
