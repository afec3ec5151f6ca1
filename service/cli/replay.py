"""``scemon replay``: run an events file through a queries file and write the matches.

The files are read by :mod:`service.files`; this module holds the run itself: the events
fed in chunks through a :class:`~ecq.time.timekeeper.TimeKeeper` (allowed lateness, late
events, far-future events, as the service does), the matches written as they come, and
the garbage collector tuned for one big batch.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, BinaryIO

import typer

from ecq.errors import AheadError, EventError
from ecq.event import Event
from ecq.time.timekeeper import MAX_AHEAD, TimeKeeper
from service.cli.collector import freeze_so_far, tuned_collector
from service.cli.errors import user_errors, warn_if_pure
from service.cli.options import QueriesOption
from service.cli.progress import LazyProgress
from service.files.events import Progress, collector_paused, read_events
from service.files.matches import open_output, write_matches
from service.files.queries import build_engine, read_queries

if TYPE_CHECKING:
    from service.files.queries import AnyEngine

__all__ = ["CHUNK_SIZE", "Replayed", "replay", "run"]

# Events handed to Engine.process per call: big enough to amortise the call, small
# enough that matches reach the output steadily.
CHUNK_SIZE = 4096
# Late events named on stderr (the count is always there).
LATE_SHOWN = 3


@dataclass
class Replayed:
    """What a run did: matches per query, late events (all counted, the first kept)."""

    counts: Counter[str] = field(default_factory=Counter)
    late: int = 0
    first_late: list[tuple[Event, float]] = field(default_factory=list)


class EventFormat(StrEnum):
    jsonl = "jsonl"
    csv = "csv"


class EngineKind(StrEnum):
    shared = "shared"
    separate = "separate"


def replay(
    queries: QueriesOption,
    events: Annotated[
        Path,
        typer.Option(
            "--events",
            "-e",
            help="Events file, in arrival order: JSON Lines (one event object per line) or CSV "
            "(header with src,type,start and optional id,end,prob; other columns are attributes).",
            show_default=False,
        ),
    ],
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            "-o",
            help="Where to write the matches as JSON Lines; '-' or none for stdout. A file is "
            "written only if the whole replay succeeds.",
            show_default=False,
        ),
    ] = None,
    fmt: Annotated[
        EventFormat | None,
        typer.Option("--format", "-f", help="Events file format; default: csv for *.csv, else jsonl."),
    ] = None,
    engine_kind: Annotated[
        EngineKind,
        typer.Option(
            "--engine",
            help="shared: one shared ECQ network (SCEMon); separate: one plan per query, the "
            "separate-processing baseline the paper compares against. Same matches.",
        ),
    ] = EngineKind.shared,
    lateness: Annotated[
        float,
        typer.Option(
            min=0,
            help="Allowed lateness, seconds: events are held until the file's clock passes their end "
            "by this much and are then taken in time order, as scemon serve --lateness does.",
        ),
    ] = 0.0,
    max_ahead: Annotated[
        float,
        typer.Option(
            help="Refuse the file if an event lies more than this many seconds ahead of the clock "
            "(or of the wall clock, whichever is later); inf: no bound.",
        ),
    ] = MAX_AHEAD,
) -> None:
    """Run an events file through the queries and write the matches.

    Every query and every event is checked before the first event is processed; on the
    first bad one the command exits 1 naming its file, line and field, having written
    nothing. Matches are written one per line in emission order, as {query, src, start,
    end, events, attrs, prob, seq}. `events` holds the events' ids; an event without an
    id is named by its 0-based line number in a JSON Lines file, or its 0-based data row
    number in a CSV file (header and blank rows not counted). At the end of the input
    time advances to infinity (flushing the events held for --lateness), so matches
    waiting for a window to close are written too. A summary goes to stderr, with the
    number of late events (an end below the clock when the event was taken: matches
    with events already let go are lost) and the first few.
    """
    with user_errors(), LazyProgress() as progress, tuned_collector():
        if not math.isfinite(lateness):
            raise EventError("--lateness must be a finite number of seconds")
        # The parsed queries and the engine stay for the whole run: frozen as soon as each
        # is made, so that no collection walks them (at 1,000 queries, the young
        # collection they set off at the end of registration walked ~100,000 objects,
        # 35-60 ms). Cyclic garbage the parser and the compiler leave that no collection
        # has reached by then is frozen with them and kept until the run ends (about
        # 27 objects a query at most; peak memory measured unchanged at 1,000 and
        # 10,000 queries).
        specs = read_queries(queries)
        freeze_so_far()
        keeper = TimeKeeper(build_engine(specs, queries, engine_kind.value), lateness, max_ahead)
        freeze_so_far()
        progress.phase("reading events")
        # The events stay for the whole run and make no cycles: read with the collector
        # off and frozen at once, so that no collection ever walks them.
        with collector_paused():
            batch = read_events(events, fmt.value if fmt else None, progress.update)
            freeze_so_far()
        try:
            keeper.check_ahead(batch, time.time())
        except AheadError as err:
            raise EventError(
                f"{err.message}; --max-ahead inf takes it", f"{events} {err.where}", err.field
            ) from None
        # Once the input is known good (a mistake is the one line on stderr).
        if engine_kind is EngineKind.shared:
            warn_if_pure()
        progress.phase("matching", total=len(batch))
        with open_output(out) as stream:
            done = run(keeper, batch, stream, progress=progress.update)
    counts = done.counts
    # Name every query for small sets; for thousands, the busiest ten say enough.
    shown = [(name, counts[name]) for name, _ in specs]
    if len(shown) > 12:
        busiest = sorted(shown, key=lambda item: -item[1])[:10]
        shown_text = ", ".join(f"{name} {n}" for name, n in busiest)
        per_query = f"busiest: {shown_text}, ... {len(shown)} queries"
    else:
        per_query = ", ".join(f"{name} {n}" for name, n in shown)
    total = sum(counts.values())
    noun = "match" if total == 1 else "matches"
    named = ", ".join(f"{event.id!r} by {by:g} s" for event, by in done.first_late)
    late = f"{done.late} late" + (f" (first: {named})" if done.late else "")
    typer.echo(f"{len(batch)} events, {total} {noun} ({per_query}), {late}", err=True)


def run(
    engine: AnyEngine | TimeKeeper[AnyEngine],
    events: Sequence[Event],
    out: BinaryIO,
    chunk_size: int = CHUNK_SIZE,
    progress: Progress | None = None,
) -> Replayed:
    """Feed ``events`` in order, in chunks, through a time keeper (``engine`` is one, or
    an engine to wrap without lateness), write each match as it is emitted, then advance
    time to infinity so that held events and matches waiting on a window (trailing
    negation) are emitted too. Returns the matches per query and the late events."""
    keeper = engine if isinstance(engine, TimeKeeper) else TimeKeeper(engine, max_ahead=math.inf)
    done = Replayed()
    counts = done.counts
    for begin in range(0, len(events), chunk_size):
        matches, late = keeper.process(events[begin : begin + chunk_size])
        write_matches(out, matches, counts)
        if late:
            done.late += len(late)
            done.first_late += list(islice(late, LATE_SHOWN - len(done.first_late)))
        if progress is not None:
            progress(min(begin + chunk_size, len(events)))
    write_matches(out, keeper.advance_time(math.inf), counts)
    return done
