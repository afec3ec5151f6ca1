"""Option values converted without building pydantic validators.

typer (0.29) converts every option's value through a pydantic ``TypeAdapter`` built the
first time the option is used: importing pydantic and building the adapters of one
command's options cost ``scemon replay`` 0.2-0.4 s of its start-up (measured, 9
options), more than reading and matching 20,000 events. The options of our commands are
plain: ``str``, ``int`` and ``float`` (with ``min``/``max``), ``Path``, enums and flags. For those
:func:`plain_coercion` installs a conversion that gives the same values and the same
error messages (tests/service/cli/test_coercion.py compares the two on every option of
every command); any other annotation (lists, flags, files, a ``parser=``, ``clamp``) is
left to typer. It leans on typer's internals (the parameter's ``type_descriptor`` and
``_runtime_param``): on a typer without them it does nothing, and typer's own
conversion runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

__all__ = ["plain_coercion"]

try:
    from typer._click.exceptions import BadParameter
    from typer._coercion import RuntimeParam, build_runtime_param, resolve_type_descriptor
    from typer._param_types import coerce_cli_choice, coerce_cli_path
except ImportError:  # another typer: its own conversion runs
    RuntimeParam = None  # type: ignore[assignment,misc]

# What pydantic's lax mode takes as an int from text: ASCII digits, `_` between them, a
# sign, and a fraction of zeros only ("1.0"); surrounding blanks are stripped.
_INT = re.compile(r"[+-]?[0-9](?:_?[0-9])*(?:\.0+)?")
_NOT_INT = "Input should be a valid integer, unable to parse string as an integer"
_NOT_NUMBER = "Input should be a valid number, unable to parse string as a number"


def _number(value: Any, kind: type) -> Any:
    """``value`` (the option's text, or its default) as an int or a float, or
    ``ValueError`` with pydantic's message."""
    if isinstance(value, (int, float)):
        if kind is int and isinstance(value, float):
            if not value.is_integer():
                raise ValueError("Input should be a valid integer, got a number with a fractional part")
            return int(value)
        return kind(value)
    text = str(value).strip()
    if kind is int:
        if not _INT.fullmatch(text):
            raise ValueError(_NOT_INT)
        return int(text.split(".", 1)[0])
    if not text.isascii():
        raise ValueError(_NOT_NUMBER)
    try:
        return float(text)
    except ValueError:
        raise ValueError(_NOT_NUMBER) from None


def _bound(limit: float) -> str:
    """A min or max as pydantic writes it in its message: 0.0 as 0."""
    return str(int(limit)) if isinstance(limit, float) and limit.is_integer() else str(limit)


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class PlainParam(RuntimeParam):
        """An option of a plain type: its value converted here, as typer's adapter would."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            annotation, info = self.annotation, self.parameter_info
            if annotation is bool:
                if isinstance(value, bool):
                    return value
                # Text for a flag (from an environment variable): typer's own rules.
                typer_own = build_runtime_param(resolve_type_descriptor(annotation, info))
                return typer_own._coerce_value(value, param=param, ctx=ctx)
            try:
                if annotation is str:
                    return value if isinstance(value, str) else str(value)
                if annotation is int or annotation is float:
                    number = _number(value, annotation)
                    if info.min is not None and not number >= info.min:
                        raise ValueError(f"Input should be greater than or equal to {_bound(info.min)}")
                    if info.max is not None and not number <= info.max:
                        raise ValueError(f"Input should be less than or equal to {_bound(info.max)}")
                    return number
                if isinstance(annotation, type) and issubclass(annotation, Enum):
                    try:
                        return coerce_cli_choice(
                            value, choices=list(annotation), case_sensitive=info.case_sensitive, ctx=ctx
                        )
                    except ValueError as err:
                        raise ValueError(f"Value error, {err}") from None
            except ValueError as err:
                raise BadParameter(str(err), ctx=ctx, param=param) from None
            # A Path: typer's own checks (exists, file or dir, ...), handed a Path.
            path_type: Any = info.path_type or annotation
            if isinstance(value, str):
                value = path_type(value)
            return coerce_cli_path(value, info, path_type=path_type, param=param, ctx=ctx)


def _plain(descriptor: Any) -> bool:
    """Whether :class:`PlainParam` converts this option as typer would."""
    annotation, info = descriptor.annotation, descriptor.parameter_info
    if descriptor.file_annotation is not None or info.parser is not None or info.clamp:
        return False
    if annotation in (str, int, float, bool):
        return True
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return True
    return (
        isinstance(annotation, type)
        and issubclass(annotation, Path)
        and (info.path_type is None or isinstance(info.path_type, type) and issubclass(info.path_type, Path))
    )


def plain_coercion(command: Any) -> None:
    """Install :class:`PlainParam` on every plain option of ``command`` and of its
    subcommands (a group's), before any is used."""
    if RuntimeParam is None:
        return
    params = list(getattr(command, "params", ()))
    # --help is made on first use (click's get_help_option) and then kept; made here, in
    # a context with the command's own settings (its help option names), as a run makes it.
    help_option = command.get_help_option(command.context_class(command, **command.context_settings))
    if help_option is not None:
        params.append(help_option)
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or getattr(param, "_runtime_param", False) is not None:
            continue
        if _plain(descriptor):
            param._runtime_param = PlainParam(
                parameter_info=descriptor.parameter_info, annotation=descriptor.annotation
            )
    for sub in getattr(command, "commands", {}).values():
        plain_coercion(sub)
