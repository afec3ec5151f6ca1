"""A benchmark result: a table with the plot that shows it.

A figure of the paper becomes one or more :class:`Table` values; ``scemon bench`` prints
each, writes it as CSV and draws its :class:`Plot` (the drawing is the CLI's I/O, the
description of the plot lives here so the numbers and their picture stay together).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Plot", "Table"]

Cell = int | float | str


@dataclass(frozen=True)
class Plot:
    """How to draw a table: ``series`` columns against column ``x``; ``kind`` ``line``
    (one line per series) or ``stacked`` (bars per row, series stacked: a breakdown).
    With ``group`` (a column), a line plot draws one line per series and value of that
    column, a colour per value and a line style per series."""

    x: str
    series: tuple[str, ...]
    y_label: str
    x_label: str = ""
    x_log: bool = False
    y_log: bool = False
    kind: str = "line"
    group: str | None = None


@dataclass
class Table:
    """``rows`` of values under ``columns``; ``name`` is the file stem (``fig08a_queries``),
    ``notes`` say what was run (settings, the paper's figure)."""

    name: str
    title: str
    columns: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    plot: Plot | None = None
    notes: list[str] = field(default_factory=list)

    def add(self, **values: Cell) -> None:
        """Append a row given by column name (every column must be given)."""
        missing = [c for c in self.columns if c not in values]
        extra = [k for k in values if k not in self.columns]
        if missing or extra:
            raise ValueError(f"row for {self.name}: missing {missing}, unknown {extra}")
        self.rows.append([values[c] for c in self.columns])

    def column(self, name: str) -> list[Any]:
        j = self.columns.index(name)
        return [row[j] for row in self.rows]

    def records(self) -> list[dict[str, Cell]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]
