"""``scemon bench cleaning|queries|sources|breakdown|storage|classes|conjunction|
disjunction|ratio|all``: the SCEMon paper's figures (§7), shared engine vs the
separate-processing baseline, measured in this process side by side.

Each command runs one figure of :mod:`ecq.bench.figures`, prints its tables and writes
``<name>.csv`` and ``<name>.png`` per table under ``--out`` (``docs/bench``; with
``--quick``, small sizes that run in seconds, written to ``build/bench-quick``). A full
run into the default folder also refreshes the tables of ``docs/benchmarks.md`` (between
``<!-- bench:NAME -->`` markers), so the page always shows the latest numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ecq.bench import figures
from ecq.bench.runner import Progress
from ecq.bench.table import Table
from service.bench_report import refresh_doc, report
from service.progress import LazyProgress

__all__ = [
    "all_figures",
    "breakdown",
    "classes",
    "cleaning",
    "conjunction",
    "disjunction",
    "queries",
    "rate",
    "ratio",
    "sources",
    "storage",
]

Figure = Callable[[figures.Scale, Progress | None], list[Table]]

QuickOption = Annotated[
    bool, typer.Option("--quick", help="Small sizes (seconds), to check that everything works.")
]
OutOption = Annotated[
    Path | None,
    typer.Option(
        "--out", help="Folder for the CSV and PNG files [default: docs/bench, or build/bench-quick]."
    ),
]
EventsOption = Annotated[
    int | None,
    typer.Option("--events", min=100, help="Events measured per point, after a window of warm-up."),
]
CleanOption = Annotated[
    int | None, typer.Option("--clean-every", min=10, help="Cleaning period in events (not for `cleaning`).")
]


def _scale(quick: bool, events: int | None, clean_every: int | None) -> figures.Scale:
    scale = figures.QUICK if quick else figures.FULL
    if events is not None:
        scale = replace(scale, events=events, cnj_events=events, dsj_events=events, target_events=events)
    if clean_every is not None:
        scale = replace(scale, clean_every=clean_every)
    return scale


def _run(
    figure: Figure, quick: bool, out: Path | None, events: int | None, clean_every: int | None
) -> list[Table]:
    scale = _scale(quick, events, clean_every)
    name = figure.__name__
    with LazyProgress(min_items=0, min_seconds=1.0) as bar:
        bar.phase(f"bench {name}", total=1000)

        def progress(fraction: float, label: str) -> None:
            bar.update(int(fraction * 1000))

        tables = figure(scale, progress)
    _publish(tables, quick, out)
    return tables


DOCS = Path("docs/bench")
PAGE = Path("docs/benchmarks.md")


def _folder(quick: bool, out: Path | None) -> Path:
    return out if out is not None else Path("build/bench-quick") if quick else DOCS


def _publish(tables: list[Table], quick: bool, out: Path | None) -> None:
    report(tables, _folder(quick, out))
    if out is None and not quick:
        names = refresh_doc(PAGE, DOCS)
        if names:
            Console().print(f"updated {PAGE}: {', '.join(names)}", style="dim")


def cleaning(quick: QuickOption = False, out: OutOption = None, events: EventsOption = None) -> None:
    """Fig. 7: cleaning time and stored instances vs the cleaning period."""
    _run(figures.cleaning, quick, out, events, None)


def queries(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
) -> None:
    """Fig. 8a: unit time vs number of queries (100-5K), every size in one interleaved run."""
    _run(figures.queries, quick, out, events, clean_every)


def sources(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
) -> None:
    """Fig. 8b: unit time vs number of sources (up to 5K)."""
    _run(figures.sources, quick, out, events, clean_every)


def breakdown(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
) -> None:
    """Fig. 9: time per phase (search, probe, evaluate, insert, clean) for the SP
    baseline and each ablation level of the shared engine."""
    _run(figures.breakdown, quick, out, events, clean_every)


def storage(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
) -> None:
    """Fig. 10: stored instances vs queries and vs sources."""
    _run(figures.storage, quick, out, events, clean_every)


def classes(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
) -> None:
    """Fig. 11: unit time vs number of classes (Npc 10-200) and sequence steps (Nstep)."""
    _run(figures.classes, quick, out, events, clean_every)


def conjunction(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
) -> None:
    """Figs. 12-13: CNJ3 queries, unit time and stored instances vs queries and sources."""
    _run(figures.conjunction, quick, out, events, clean_every)


def disjunction(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
) -> None:
    """Fig. 14: DSJ3 and DSJ5 queries, unit time vs queries and sources."""
    _run(figures.disjunction, quick, out, events, clean_every)


def rate(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
) -> None:
    """The workload's event rate: matches per event, unit times and storage vs the mean
    gap between two events of one source (why the default gap is 20 minutes)."""
    _run(figures.rate, quick, out, events, clean_every)


def ratio(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
    replay_events: Annotated[
        int | None, typer.Option(min=100, help="Events for the timed `scemon replay` [200,000; quick 5,000].")
    ] = None,
    source_gap: Annotated[
        float | None,
        typer.Option(min=1.0, help="Mean seconds between two events of one source [the workload's default]."),
    ] = None,
) -> None:
    """Issue 4's targets: SP/shared ratio at 5K queries, shared events/s at 1K and 5K
    queries, unit-time growth 100 -> 5K queries, storage 1K vs 5K queries, and `scemon
    replay` end to end (a generated file, a separate process) at 1K queries. Measures
    100,000 events after warm-up unless --events says otherwise."""
    from service.bench_replay import time_replay

    scale = _scale(quick, events, clean_every)
    if source_gap is not None:
        scale = replace(scale, base=replace(scale.base, source_gap=source_gap))
    console = Console(stderr=True)
    with LazyProgress(min_items=0, min_seconds=1.0) as bar:
        bar.phase("bench ratio", total=1000)
        tables = figures.targets(scale, lambda fraction, _label: bar.update(int(fraction * 1000)))
    table = tables[0]
    n_queries = scale.target_queries[1]
    n_events = replay_events if replay_events is not None else (5000 if quick else 200_000)
    w = replace(scale.base, n_queries=n_queries)
    console.print(f"timing scemon replay: {n_queries} queries, {n_events} events ...", style="dim")
    timing = time_replay(w, n_events)
    rate = timing.events_per_s
    table.add(
        metric=f"scemon replay events/s, {n_queries} queries, end to end",
        value=round(rate, 2),
        target=">= 100000",
        met="yes" if rate >= 100_000 else "NO",
    )
    table.notes.append(
        f"replay: {timing.events} events, {timing.matches} matches, {timing.seconds:.2f} s wall "
        "(process start, reading, matching, writing)"
    )
    _publish(tables, quick, out)


def all_figures(quick: QuickOption = False, out: OutOption = None) -> None:
    """Every figure, then the targets (long without --quick)."""
    for command in (cleaning, queries, sources, breakdown, storage, classes, conjunction, disjunction, rate):
        command(quick=quick, out=out)
    ratio(quick=quick, out=out)
