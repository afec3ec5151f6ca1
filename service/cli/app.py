"""The ``scemon`` Typer app: every command, registered in the order ``--help`` lists them.

Thin on purpose: each command lives in a module of its own beside this one, and the
work in the package it drives; this module only assembles.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ecq import __version__
from service.cli.admin import admin_app
from service.cli.bench import bench_app
from service.cli.cluster import cluster_app
from service.cli.demo import demo
from service.cli.generate import generate
from service.cli.openapi import openapi
from service.cli.parse import parse
from service.cli.queries import queries_app
from service.cli.replay import replay
from service.cli.serve import serve
from service.cli.stream import stream

__all__ = ["app"]

app = typer.Typer(
    name="scemon",
    help="scemon: complex event processing over one shared network of event-centric queues.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # The help strings are plain text: rendered as rich markup, a "[default ...]" or a
    # "[env ...]" in them was taken for a style tag and vanished. Plain click help shows
    # every string as written, with each option's "[env var: ...; default: ...]".
    rich_markup_mode=None,
)

app.command()(serve)
app.command()(openapi)
app.add_typer(bench_app)
app.command()(stream)
app.command()(demo)
app.add_typer(queries_app)
app.add_typer(cluster_app)
app.command()(generate)
app.command()(parse)
app.command()(replay)
app.add_typer(admin_app)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"scemon {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print scemon's version and exit."
        ),
    ] = False,
) -> None:
    """Register pattern queries and run events through them.

    `parse` checks a queries file, `replay` runs an events file through it; `serve`
    runs the service, `stream` the Spark job that feeds it, `demo` both end to end.
    """
