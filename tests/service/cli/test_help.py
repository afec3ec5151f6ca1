"""``--help`` of every command and subcommand of ``scemon``: each option's help text in
full, its default and its environment variable, as the user reads them."""

from __future__ import annotations

from collections.abc import Iterator
from enum import Enum
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from service.cli.app import app
from service.server.config import Settings


def commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command of the tree under ``command``, groups included, with its path (asked
    of each group as click does: the app builds a command when first asked for it)."""
    yield path, command
    if hasattr(command, "list_commands"):
        ctx = typer.Context(command)
        for name in sorted(command.list_commands(ctx)):
            yield from commands(command.get_command(ctx, name), (*path, name))


COMMANDS = dict(commands(typer.main.get_command(app)))


def squeezed(text: str) -> str:
    """``text`` without any whitespace: the help is wrapped to the terminal, and a line
    may break at a hyphen."""
    return "".join(text.split())


def rendered_help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    return result.output


def shown_default(param: Any) -> str:
    """The default as click writes it: an enum's value, a --x/--no-x flag's side."""
    if param.is_flag and param.secondary_opts:
        return (param.opts[0] if param.default else param.secondary_opts[0]).lstrip("-")
    value = param.default
    return str(value.value) if isinstance(value, Enum) else str(value)


def test_the_tree_holds_every_command() -> None:
    """The walk is not vacuous: it reaches the groups' subcommands."""
    names = {" ".join(path) for path in COMMANDS}
    for expected in ("serve", "stream", "demo", "replay", "bench pipeline", "queries register",
                     "admin repair-clock"):
        assert expected in names
    assert len(COMMANDS) > 25


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=lambda path: " ".join(path) or "scemon")
def test_help_shows_every_option_with_its_default_and_environment_variable(path: tuple[str, ...]) -> None:
    text = squeezed(rendered_help(path))
    command = COMMANDS[path]
    if command.help:
        first_line = command.help.strip().split("\n\n")[0]
        assert squeezed(first_line) in text, f"{path}: the command's help is not shown in full"
    for param in command.params:
        if param.param_type_name != "option" or param.name == "help":
            continue
        name = param.opts[0]
        assert name in text, f"{path}: {name} missing"
        if param.help:
            # All of it: no bracketed part taken for markup, nothing cut.
            assert squeezed(param.help) in text, f"{path} {name}: its help is not shown as written"
        if param.envvar:
            assert f"envvar:{param.envvar}" in text, f"{path} {name}: its environment variable is not shown"
        flag_off = param.is_flag and not param.secondary_opts and param.default is False
        if param.default is not None and not flag_off and param.show_default is not False:
            assert f"default:{squeezed(shown_default(param))}" in text, (
                f"{path} {name}: its default {param.default!r} is not shown"
            )


def test_serve_shows_the_servers_own_defaults() -> None:
    """``scemon serve``'s options read the same SCEMON_* variables as the server's settings
    and show the same defaults: the two cannot drift apart."""
    serve = COMMANDS[("serve",)]
    fields = Settings.model_fields
    options = [
        param
        for param in serve.params
        if param.param_type_name == "option" and param.name not in ("help", "allowed_host")
    ]
    assert len(options) == 13
    for param in options:
        assert param.envvar == f"SCEMON_{param.name.upper()}"
        assert param.default == fields[param.name].default, param.name
    text = squeezed(rendered_help(("serve",)))
    assert "envvar:SCEMON_HOST;default:127.0.0.1" in text
    assert "envvar:SCEMON_MAX_AHEAD;default:86400.0" in text


def test_serve_reads_its_options_from_the_environment() -> None:
    """A bad SCEMON_PORT is named as such, before anything starts."""
    result = CliRunner().invoke(app, ["serve"], env={"SCEMON_PORT": "eighty"})
    assert result.exit_code == 2
    assert "SCEMON_PORT" in result.output
