"""Showing tables (service/bench/report.py): CSV and PNG files, and the tables of the
benchmarks page refreshed between their markers."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from service.bench.report import refresh_doc, write_csv, write_plot
from service.bench.table import Plot, Table

PNG = b"\x89PNG\r\n\x1a\n"


def read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    rows = list(csv.reader(lines))
    return rows[0], rows[1:]


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


def test_grouped_plots_draw_a_line_per_group_and_series(tmp_path: Path) -> None:
    table = Table("g", "g", ["k", "x", "a", "b"], plot=Plot("x", ("a", "b"), "y", x_log=True, group="k"))
    for k in ("one", "two"):
        for x in (10, 100):
            table.add(k=k, x=x, a=1.0, b=2.0)
    png = write_plot(table, tmp_path)
    assert png is not None and png.read_bytes().startswith(PNG)
