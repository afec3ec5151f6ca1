"""``scemon bench ...``: benchmark commands that print tables (not timed tests).

``bench_app`` is a typer sub-app; each benchmark adds its own subcommand here and keeps
its work in a module of its own.
"""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["bench_app"]

bench_app = typer.Typer(name="bench", help="Benchmarks: each prints a table.", no_args_is_help=True)


@bench_app.command("service")
def service(
    events: Annotated[int, typer.Option(help="Events posted per configuration.", min=100)] = 20_000,
    batch: Annotated[int, typer.Option(help="Events per batch.", min=1)] = 1_000,
    queries: Annotated[int, typer.Option(help="Sequence queries registered.", min=1)] = 100,
    subscribers: Annotated[str, typer.Option(help="Comma-separated subscriber counts.")] = "0,1,10",
) -> None:
    """Ingest events/s of a real server on 127.0.0.1, for JSON and Arrow batches, with 0,
    1 and 10 WebSocket subscribers. Starts the server in a subprocess on a temporary
    store and stops it at the end."""
    from service.bench_service import run

    counts = [int(part) for part in subscribers.split(",") if part.strip()]
    run(events=events, batch=batch, n_queries=queries, subscriber_counts=counts)


# The SCEMon paper's figures (Figs. 7-14) and issue 4's targets: service/bench_paper.py.
def _add_paper_commands() -> None:
    from service import bench_paper as paper

    for name, command in (
        ("cleaning", paper.cleaning),
        ("queries", paper.queries),
        ("sources", paper.sources),
        ("breakdown", paper.breakdown),
        ("storage", paper.storage),
        ("classes", paper.classes),
        ("conjunction", paper.conjunction),
        ("disjunction", paper.disjunction),
        ("rate", paper.rate),
        ("ratio", paper.ratio),
        ("all", paper.all_figures),
    ):
        bench_app.command(name)(command)


_add_paper_commands()
