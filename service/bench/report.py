"""Showing benchmark tables: a rich table on the terminal, a CSV file and a PNG plot.

The harness (:mod:`service.bench`) is pure and returns :class:`~service.bench.table.Table`
values; this module is the I/O around them, so the numbers in ``docs/bench/*.csv`` and
the pictures beside them always come from the same rows.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable

from service.bench.table import Cell, Plot, Table

__all__ = [
    "DOCS",
    "PAGE",
    "folder",
    "markdown",
    "publish",
    "refresh_doc",
    "render",
    "report",
    "write_csv",
    "write_plot",
]

# Where a full run writes its files, and the page it regenerates from them.
DOCS = Path("docs/bench")
PAGE = Path("docs/benchmarks.md")


def render(table: Table) -> RichTable:
    """The table for the terminal, with its notes as the caption."""
    out = RichTable(title=table.title, caption="\n".join(table.notes), caption_justify="left")
    for j, name in enumerate(table.columns):
        numeric = all(isinstance(row[j], int | float) for row in table.rows)
        out.add_column(name, justify="right" if numeric else "left", overflow="fold")
    for row in table.rows:
        out.add_row(*(_cell(v) for v in row))
    return out


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1e5 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def write_csv(table: Table, folder: Path) -> Path:
    """``<folder>/<name>.csv``: a header row, then the rows; notes as ``#`` lines first."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{table.name}.csv"
    with path.open("w", newline="") as fh:
        for note in table.notes:
            fh.write(f"# {note}\n")
        writer = csv.writer(fh)
        writer.writerow(table.columns)
        writer.writerows(table.rows)
    return path


def write_plot(table: Table, folder: Path) -> Path | None:
    """``<folder>/<name>.png`` drawn from the table's :class:`~service.bench.table.Plot`;
    None when the table has no plot."""
    plot = table.plot
    if plot is None or not table.rows:
        return None
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{table.name}.png"
    wide = plot.kind == "stacked" or plot.group is not None
    fig, ax = plt.subplots(figsize=(7.6 if wide else 6.4, 4.2 if plot.group is None else 5.2))
    xs = table.column(plot.x)
    if plot.kind == "stacked":
        labels = [str(x) for x in xs]
        bottom = [0.0] * len(xs)
        for name in plot.series:
            ys = [float(v) for v in table.column(name)]
            ax.bar(labels, ys, bottom=bottom, label=name)
            bottom = [b + y for b, y in zip(bottom, ys, strict=True)]
        ax.tick_params(axis="x", labelrotation=20)
    elif plot.group is not None:
        xs = _draw_groups(ax, table, plot)
    else:
        for name in plot.series:
            # A cell that is not a number ("-") is a point not measured: left out of the line.
            points = [
                (x, y) for x, y in zip(xs, table.column(name), strict=True) if isinstance(y, int | float)
            ]
            ax.plot([x for x, _ in points], [y for _, y in points], marker="o", label=name)
    if plot.kind != "stacked":
        if plot.x_log:
            from matplotlib.ticker import NullFormatter, ScalarFormatter

            ax.set_xscale("log")
            ax.set_xticks(xs)  # the measured points, written out in full
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, which="both", alpha=0.3)
    if plot.y_log:
        ax.set_yscale("log")
    ax.set_title(table.title)
    ax.set_xlabel(plot.x_label or plot.x)
    ax.set_ylabel(plot.y_label)
    if plot.kind == "stacked" or plot.group is not None:
        ax.legend(fontsize="small", bbox_to_anchor=(1.02, 1), loc="upper left")
    else:
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


_STYLES = ("-", "--", ":", "-.")


def _draw_groups(ax: Any, table: Table, plot: Plot) -> list[Cell]:
    """One line per value of ``plot.group`` and series (colour by value, style by
    series); the x values drawn, ascending."""
    assert plot.group is not None
    rows = table.records()
    groups = list(dict.fromkeys(row[plot.group] for row in rows))
    import matplotlib.pyplot as plt

    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for g, value in enumerate(groups):
        mine = [row for row in rows if row[plot.group] == value]
        for s, name in enumerate(plot.series):
            ax.plot(
                [row[plot.x] for row in mine],
                [row[name] for row in mine],
                marker="o",
                linestyle=_STYLES[s % len(_STYLES)],
                color=cycle[g % len(cycle)],
                label=f"{value} {name}",
            )
    return sorted(set(row[plot.x] for row in rows), key=float)


def report(tables: Sequence[Table], folder: Path, console: Console | None = None) -> list[Path]:
    """Print each table and write its CSV and plot under ``folder``; the files written."""
    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=200)  # a log file keeps whole column names
    written: list[Path] = []
    for table in tables:
        console.print(render(table))
        written.append(write_csv(table, folder))
        png = write_plot(table, folder)
        if png is not None:
            written.append(png)
    for path in written:
        console.print(f"wrote {path}", style="dim")
    return written


def folder(quick: bool, out: Path | None) -> Path:
    """Where a run writes its CSV and PNG files: ``out``, else ``build/bench-quick`` for
    a quick run and ``docs/bench`` for a full one."""
    return out if out is not None else Path("build/bench-quick") if quick else DOCS


def publish(tables: Sequence[Table], quick: bool, out: Path | None) -> None:
    """Print the tables, write their files and record the machine they ran on
    (``machine.json`` beside them); a full run into ``docs/bench`` (the default folder,
    or a folder under it such as ``docs/bench/gap3600``) also regenerates
    ``docs/benchmarks.md`` from the files there."""
    from service.bench.page import record_machine, write_page

    where = folder(quick, out)
    report(tables, where)
    if not tables:
        return
    docs = DOCS.resolve()
    target = where.resolve()
    under_docs = target == docs or docs in target.parents
    # A table of a sub-folder is named on the page by its path under docs/bench.
    prefix = target.relative_to(docs).as_posix() + "/" if under_docs and target != docs else ""
    if under_docs:
        record_machine([prefix + table.name for table in tables], DOCS)
        if not quick and write_page(PAGE, DOCS):
            Console().print(f"regenerated {PAGE}", style="dim")
    else:
        record_machine([table.name for table in tables], where)


# ---------------------------------------------------------------- the docs page

_MARK = re.compile(r"(<!-- bench:(?P<name>[\w/-]+) -->\n)(?P<body>.*?)(<!-- /bench:(?P=name) -->)", re.S)


def markdown(path: Path) -> str:
    """A CSV written by :func:`write_csv` as a Markdown table, its notes in italics."""
    notes: list[str] = []
    lines: list[str] = []
    with path.open(newline="") as fh:
        for line in fh:
            if line.startswith("# "):
                notes.append(line[2:].strip())
            else:
                lines.append(line)
    rows = list(csv.reader(lines))
    if not rows:
        return ""
    header, body = rows[0], rows[1:]
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in body]
    if notes:
        out += ["", "*" + "; ".join(notes[1:] or notes) + "*"]
    return "\n".join(out) + "\n"


def _md_cell(value: str) -> str:
    try:
        number = float(value)
    except ValueError:
        return value
    if number.is_integer() and "." not in value:
        return f"{int(number):,}"
    return f"{number:,.2f}" if abs(number) < 1e5 else f"{number:,.0f}"


def refresh_doc(doc: Path, folder: Path) -> list[str]:
    """Replace every ``<!-- bench:NAME -->`` ... ``<!-- /bench:NAME -->`` block of
    ``doc`` with the table of ``folder/NAME.csv`` (blocks without a CSV are left alone);
    the names refreshed. Keeps the page and the numbers in step after a re-run."""
    if not doc.exists():
        return []
    text = doc.read_text()
    done: list[str] = []

    def table(match: re.Match[str]) -> str:
        name = match.group("name")
        path = folder / f"{name}.csv"
        if not path.exists():
            return match.group(0)
        done.append(name)
        return match.group(1) + markdown(path) + match.group(4)

    new = _MARK.sub(table, text)
    if new != text:
        doc.write_text(new)
    return done
