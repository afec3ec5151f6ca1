"""``scemon bench restart`` (behaviour, not timings): each point kills a real server
holding the stored queries and a window of events, starts it again and checks it holds
what the killed one committed; the table has a row per size."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from service.bench import restart
from service.cli.app import app
from tests.service.bench.test_report import read_csv


def test_a_point_restarts_a_killed_server_on_its_store() -> None:
    point = restart.measure(200, 1000)
    assert point["matches"] > 0  # the window found matches, replayed on restart
    assert 0 < point["rebuild_s"] <= point["restart_s"]
    assert point["first_start_s"] > 0 and point["store_mb"] > 0


def test_the_command_writes_a_row_per_size(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["bench", "restart", "--sizes", "10,20", "--events", "200", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    header, rows = read_csv(tmp_path / "restart.csv")
    assert header[:2] == ["queries", "events"] and "restart_s" in header
    assert [row[0] for row in rows] == ["10", "20"]
