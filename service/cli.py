"""The ``scemon`` command.

Thin on purpose: the work is in :mod:`service.replay`; this module turns options into
calls and turns every user mistake (a bad query, a bad event, a missing file) into one
line on stderr and exit status 1 — a traceback is for bugs, not for typos.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from service import replay as files
from service.bench_cli import bench_app
from service.cli_errors import user_errors
from service.generate_cli import generate
from service.progress import LazyProgress
from service.serve_cli import openapi, serve
from service.stream_cli import demo, queries_app, stream

__all__ = ["app"]

app = typer.Typer(
    name="scemon",
    help="scemon: complex event processing over one shared network of event-centric queues.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class EventFormat(StrEnum):
    jsonl = "jsonl"
    csv = "csv"


class EngineKind(StrEnum):
    shared = "shared"
    separate = "separate"


QueriesOption = Annotated[
    Path,
    typer.Option(
        "--queries",
        "-q",
        help="Queries file: query text where each query begins with QUERY <name>, or a JSON list of "
        '{"name", "text"} or {"name", "pattern", ...} (AST JSON) objects. A first "[" means JSON.',
        show_default=False,
    ),
]

app.command()(serve)
app.command()(openapi)
app.add_typer(bench_app)
app.command()(stream)
app.command()(demo)
app.add_typer(queries_app)
app.command()(generate)


@app.callback()
def main() -> None:
    """Register pattern queries and run events through them.

    Today: `parse` checks a queries file, `replay` runs an events file through it.
    """


@app.command()
def parse(queries: QueriesOption) -> None:
    """Check a queries file and print each query in canonical form.

    Exits 1 with the file, line and column of the first query that does not parse or
    that the engine rejects.
    """
    with user_errors():
        specs = files.read_queries(queries)
        parsed = files.canonical_queries(specs, queries)
        files.build_engine(specs, queries)  # what the engine rejects beyond the grammar
    from ecq.language import format_query

    blocks = []
    for query in parsed:
        text = format_query(query).strip()
        if not text.upper().startswith("QUERY"):
            text = f"QUERY {query.name}\n{text}"
        blocks.append(text)
    typer.echo("\n\n".join(blocks))


@app.command()
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
) -> None:
    """Run an events file through the queries and write the matches.

    Every query and every event is checked before the first event is processed; on the
    first bad one the command exits 1 naming its file, line and field, having written
    nothing. Matches are written one per line in emission order, as {query, src, start,
    end, events, attrs, prob, seq}. `events` holds the events' ids; an event without an
    id is named by its 0-based line number in a JSON Lines file, or its 0-based data row
    number in a CSV file (header and blank rows not counted). At the end of the input
    time advances to infinity, so matches waiting for a window to close are written too.
    A one-line summary goes to stderr.
    """
    with user_errors(), LazyProgress() as progress, files.batch_collector():
        specs = files.read_queries(queries)
        engine = files.build_engine(specs, queries, engine_kind.value)
        progress.phase("reading events")
        batch = files.read_events(events, fmt.value if fmt else None, progress.update)
        files.freeze_so_far()
        progress.phase("matching", total=len(batch))
        with files.open_output(out) as stream:
            counts = files.run(engine, batch, stream, progress=progress.update)
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
    typer.echo(f"{len(batch)} events, {total} {noun} ({per_query})", err=True)


if __name__ == "__main__":
    sys.exit(app())
