"""Every option of every command converts its value as typer's own (pydantic) conversion
does: the same value, or the same error message (service/cli/coercion.py)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
import typer

pytest.importorskip("typer._coercion", reason="a typer without pydantic coercion: nothing to compare")

from typer._click.exceptions import BadParameter  # noqa: E402
from typer._coercion import build_runtime_param  # noqa: E402

from service.cli.app import app  # noqa: E402
from service.cli.coercion import PlainParam, plain_coercion  # noqa: E402

NUMBERS = [
    "0",
    "1",
    "-1",
    "+3",
    "-0",
    "00012",
    "1_000",
    " 5 ",
    "1.0",
    "1.5",
    "12.",
    ".5",
    "1e3",
    "1E3",
    "1e400",
    "inf",
    "-inf",
    "Infinity",
    "nan",
    "NaN",
    "0x10",
    "",
    "abc",
    "١٢",
    "99",
    "100",
    "65535",
    "65536",
    7,
    2.5,
    7.0,
    0,
    True,
]


def options() -> Iterator[tuple[str, Any, Any]]:
    """(path, option, its command) for every typer option of every command, --help included."""
    root = typer.main.get_command(app)

    def walk(command: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
        ctx = typer.Context(command)
        for param in [*command.params, command.get_help_option(ctx)]:
            if param is not None and hasattr(param, "type_descriptor"):
                yield f"{path} {param.name}", param, command
        if hasattr(command, "list_commands"):
            for name in command.list_commands(ctx):
                yield from walk(command.get_command(ctx, name), f"{path} {name}")

    yield from walk(root, "scemon")


OPTIONS = list(options())


def inputs(annotation: Any, tmp: Path) -> list[Any]:
    if annotation in (int, float):
        return NUMBERS
    if annotation is str:
        return ["x", "", "ünïcode", " spaced "]
    if annotation is bool:
        return [True, False, "true", "no", "1", "maybe"]
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        members = list(annotation)
        return [*members, *(m.value for m in members), *(str(m.value).upper() for m in members), "bogus"]
    (tmp / "a-file").write_text("")
    return [str(tmp), str(tmp / "a-file"), str(tmp / "missing"), "-", tmp, "relative/x"]


def outcome(runtime: Any, value: Any, param: Any, ctx: Any) -> tuple[str, Any]:
    try:
        result = runtime.coerce(value, param=param, ctx=ctx)
    except BadParameter as err:
        return "error", err.format_message()
    if isinstance(result, float) and math.isnan(result):
        return "float", "nan"  # nan != nan
    return type(result).__name__, result


def test_the_plain_options_are_most_options() -> None:
    """Not vacuous: the comparison below covers every kind the commands use."""
    plain = [param for _, param, _ in OPTIONS if isinstance(param._runtime_param, PlainParam)]
    kinds = {param.type_descriptor.annotation for param in plain}
    assert {str, int, float, bool, Path} <= kinds
    assert any(isinstance(kind, type) and issubclass(kind, Enum) for kind in kinds)
    assert len(plain) > 100
    # What is not plain (lists of values) is left to typer.
    assert all(
        "list" in str(param.type_descriptor.annotation)
        for _, param, _ in OPTIONS
        if not isinstance(param._runtime_param, PlainParam)
    )


@pytest.mark.parametrize(("path", "param", "command"), OPTIONS, ids=[path for path, _, _ in OPTIONS])
def test_an_option_converts_as_typer_does(path: str, param: Any, command: Any, tmp_path: Path) -> None:
    plain_coercion(command)  # idempotent: what the app installed stays
    if not isinstance(param._runtime_param, PlainParam):
        pytest.skip("left to typer")
    ctx = typer.Context(command)
    typers = build_runtime_param(param.type_descriptor)
    for value in [None, param.default, *inputs(param.type_descriptor.annotation, tmp_path)]:
        assert outcome(param._runtime_param, value, param, ctx) == outcome(typers, value, param, ctx), (
            f"{path}: {value!r}"
        )
