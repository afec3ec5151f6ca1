"""``scemon admin``: maintenance of a service's store, run while the service is stopped.

``scemon admin repair-clock --data DIR [--to T]``: take out of the op log the events
and time advances that poisoned the clock (further ahead than ``--max-ahead`` allows
now, or beyond ``--to``), and bring the clocks back (:mod:`service.server.repair`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from ecq.errors import ScemonError
from ecq.time.timekeeper import MAX_AHEAD
from service.cli.errors import user_errors

__all__ = ["admin_app"]

admin_app = typer.Typer(name="admin", help="Maintain a stopped service's store.", no_args_is_help=True)


@admin_app.command("repair-clock")
def repair_clock(
    data: Annotated[
        Path, typer.Option(help="Folder of the stopped service's store (its --data).", show_default=False)
    ],
    max_ahead: Annotated[
        float,
        typer.Option(
            help="Take out what lies further ahead than this (seconds) of the clock or the wall clock."
        ),
    ] = MAX_AHEAD,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would change; change nothing.")
    ] = False,
    to: Annotated[
        float | None,
        typer.Option(
            "--to",
            help="Roll the clock back to at most this time (seconds): take out every event ending "
            "after it and every time advance beyond it.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Repair a store whose clock a far-future event (or time advance) poisoned.

    Events and time advances more than --max-ahead seconds ahead of the clock (of the
    wall clock too when the stream is in epoch time) are taken out of the op log, as
    scemon serve now refuses them, and the clocks are recomputed; with --to T, every
    event ending after T and every time advance beyond T instead. The next start
    rebuilds the engine without them, so later events match again. Matches the poisoned
    clock suppressed are not made up (replay the source files for them). Stop the
    service first.
    """
    from api.models import TIME_MAX  # here: loading the CLI app must not import the API models
    from service.server.repair import repair_clock as repair
    from service.server.store import Store

    with user_errors():
        if not (data / "scemon.sqlite3").is_file():
            raise ScemonError(f"--data {data}: no scemon store there (scemon.sqlite3)")
        if math.isnan(max_ahead) or max_ahead <= 0:
            raise ScemonError("--max-ahead must be a number of seconds > 0")
        if to is not None and not -TIME_MAX <= to <= TIME_MAX:
            raise ScemonError(f"--to must be a time within -{TIME_MAX:g} to {TIME_MAX:g} seconds, got {to:g}")
        store = Store(data)
        try:
            done = repair(store, max_ahead, dry_run=dry_run, to=to)
        finally:
            store.close()
    verb = "would take" if dry_run else "took"
    for pos, eid, end in done.events:
        typer.echo(f"op {pos}: {verb} out event {eid!r} (end {end:g})")
    for pos, t in done.times:
        typer.echo(f"op {pos}: {verb} out the time advance to {t:g}")
    if not done.changed:
        rule = f"at or before {to:g}" if to is not None else "within --max-ahead"
        typer.echo(
            f"nothing to repair: every event and time advance is {rule}; clock {done.before.observed:g}, "
            f"released clock {done.before.released:g}, the log's events and time advances reach {done.latest:g}",
            err=True,
        )
        return
    typer.echo(
        f"{len(done.events)} events and {len(done.times)} time advances {'to take' if dry_run else 'taken'} out; "
        f"clock {done.before.observed:g} -> {done.after.observed:g}, "
        f"released clock {done.before.released:g} -> {done.after.released:g}"
        + (" (dry run: nothing changed)" if dry_run else ""),
        err=True,
    )
