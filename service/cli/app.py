"""The ``scemon`` Typer app: every command, listed in the order ``--help`` shows them.

Thin on purpose: each command lives in a module of its own beside this one, and the
work in the package it drives; this module only assembles. It imports none of them:
a command's module (and the packages it drives: the engine, the server, the Spark job,
the benchmarks) is imported only when that command runs or its help is shown, so that
``scemon replay`` does not pay for starting the benchmarks, the server or the HTTP
client (tests/service/cli/test_startup.py holds this).
"""

from __future__ import annotations

from importlib import import_module
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from service.cli.coercion import plain_coercion
from service.cli.collector import collector_quiet

__all__ = ["COMMANDS", "app"]

# name -> (module, attribute): a command function (typer's `command()`) or a Typer
# sub-app (`add_typer`), in the order `scemon --help` lists them (typer lists the
# single commands before the groups).
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("service.cli.serve", "serve"),
    "openapi": ("service.cli.openapi", "openapi"),
    "stream": ("service.cli.stream", "stream"),
    "demo": ("service.cli.demo", "demo"),
    "generate": ("service.cli.generate", "generate"),
    "parse": ("service.cli.parse", "parse"),
    "replay": ("service.cli.replay", "replay"),
    "bench": ("service.cli.bench", "bench_app"),
    "queries": ("service.cli.queries", "queries_app"),
    "cluster": ("service.cli.cluster", "cluster_app"),
    "admin": ("service.cli.admin", "admin_app"),
}

# The settings every command is built with, as if registered on the app itself.
SETTINGS: dict[str, Any] = {
    "no_args_is_help": True,
    "add_completion": False,
    "pretty_exceptions_enable": False,
    # The help strings are plain text: rendered as rich markup, a "[default ...]" or a
    # "[env ...]" in them was taken for a style tag and vanished. Plain click help shows
    # every string as written, with each option's "[env var: ...; default: ...]".
    "rich_markup_mode": None,
}


class LazyGroup(TyperGroup):
    """The top-level group: a command is built from its module (see :data:`COMMANDS`)
    the first time it is asked for, then kept."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        plain_coercion(self)

    def list_commands(self, ctx: Any) -> list[str]:
        # COMMANDS' order whichever are built already.
        return [*(name for name in super().list_commands(ctx) if name not in COMMANDS), *COMMANDS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in COMMANDS:
            command = build_command(cmd_name)
            self.commands[cmd_name] = command
        return command


def build_command(name: str) -> Any:
    """The click command (or group) ``name`` of :data:`COMMANDS`, imported now and built
    exactly as registering it on the app would (the same settings, the same nesting)."""
    module, attribute = COMMANDS[name]
    with collector_quiet():
        target = getattr(import_module(module), attribute)
    holder = typer.Typer(**SETTINGS)
    if isinstance(target, typer.Typer):
        holder.add_typer(target)
    else:
        holder.command(name)(target)
    command = typer.main.get_group(holder).commands[name]
    plain_coercion(command)
    return command


app = typer.Typer(
    name="scemon",
    help="scemon: complex event processing over one shared network of event-centric queues.",
    cls=LazyGroup,
    **SETTINGS,
)


def _print_version(value: bool) -> None:
    if value:
        from ecq import __version__

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
