"""``scemon bench ...`` in process: quick runs write the CSV and PNG files of their
figures, and ``ratio`` the targets with a real ``scemon replay``."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from service.cli.app import app
from tests.service.bench.test_figures import EXPECTED
from tests.service.bench.test_report import read_csv


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
