"""The README's command list against the real CLI: every command and option it lists
exists, and every command and option of the CLI is listed; its sample replay is what
the command prints."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from service.cli.app import app

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def subcommands(command: Any) -> dict[str, Any]:
    """A group's commands by name, asked of it as click does (the app builds a command
    when first asked for it); {} for a command."""
    if not hasattr(command, "list_commands"):
        return {}
    ctx = typer.Context(command)
    return {name: command.get_command(ctx, name) for name in command.list_commands(ctx)}


def leaves(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    subs = subcommands(command)
    if subs:
        for name, sub in subs.items():
            yield from leaves(sub, (*path, name))
    else:
        yield path, command


ROOT_COMMAND = typer.main.get_command(app)
COMMANDS = dict(leaves(ROOT_COMMAND))


def options_of(command: Any) -> set[str]:
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)} | {"--help"}


def command_list() -> list[str]:
    """The entries of the README's command list: a line starting with ``scemon`` and the
    indented lines that continue it."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Command line") :]
    block = section[section.index("```\n") + 4 :]
    block = block[: block.index("```")]
    entries: list[str] = []
    for line in block.splitlines():
        if line.startswith("scemon"):
            entries.append(line)
        elif line.startswith(" ") and line.strip():
            entries[-1] += " " + line.strip()
        elif line.strip():
            raise AssertionError(f"neither a command nor its continuation: {line!r}")
    return entries


def commands_of(entry: str) -> list[tuple[str, ...]]:
    """The commands an entry names: ``scemon bench a|b ...`` is two."""
    words = entry.split()[1:]
    group: Any = ROOT_COMMAND
    paths: list[tuple[str, ...]] = [()]
    for word in words:
        subs = subcommands(group)
        if not subs or word.startswith(("-", "[")):
            break
        names = word.split("|")
        for name in names:
            assert name in subs, f"README lists `scemon {' '.join(paths[0])} {name}`, which the CLI does not have"
        paths = [(*path, name) for path in paths for name in names]
        group = subs[names[0]]
    return paths


def test_the_list_is_read() -> None:
    entries = command_list()
    assert len(entries) > 15
    assert sum(len(commands_of(entry)) for entry in entries) >= len(COMMANDS)


def test_every_listed_command_and_option_exists() -> None:
    for entry in command_list():
        paths = commands_of(entry)
        for path in paths:
            # `scemon --version`: the program's own options.
            command = ROOT_COMMAND if path == () else COMMANDS.get(path)
            assert command is not None, f"`scemon {' '.join(path)}` is a group, not a command"
            unknown = set(OPTION.findall(entry)) - options_of(command)
            assert not unknown, f"README lists {sorted(unknown)} for `scemon {' '.join(path)}`"


def test_every_command_and_option_of_the_cli_is_listed() -> None:
    listed: dict[tuple[str, ...], set[str]] = {}
    for entry in command_list():
        for path in commands_of(entry):
            listed.setdefault(path, set()).update(OPTION.findall(entry))
    missing_commands = sorted(" ".join(path) for path in COMMANDS if path not in listed)
    assert not missing_commands, f"the README's command list lacks {missing_commands}"
    assert "--version" in listed.get((), set()), "the README's command list lacks `scemon --version`"
    for path, command in COMMANDS.items():
        # Each option by its long name (--queries, not -q).
        wanted = {
            next(opt for opt in param.opts if opt.startswith("--"))
            for param in command.params
            if param.name != "help" and param.param_type_name == "option"
        }
        missing = sorted(wanted - listed[path])
        assert not missing, f"the README lists `scemon {' '.join(path)}` without {missing}"


def test_the_sample_replay_is_what_the_command_prints() -> None:
    text = README.read_text(encoding="utf-8")
    start = text.index("```\n$ scemon replay") + 4
    block = text[start : text.index("```", start)].splitlines()
    args = shlex.split(block[0].removeprefix("$ "))[1:]
    result = subprocess.run(
        [sys.executable, "-m", "service.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    printed = result.stdout.splitlines()
    shown = [line for line in block[1:] if line.startswith("{")]
    assert len(shown) >= 3
    # The first lines shown are the first printed; every line shown is printed, in order.
    assert printed[:2] == shown[:2]
    positions = [printed.index(line) for line in shown]
    assert positions == sorted(positions)
    assert block[-1] == result.stderr.strip().splitlines()[-1]
