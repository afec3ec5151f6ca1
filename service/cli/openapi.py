"""``scemon openapi``: the REST contract as YAML (``openapi.yaml`` at the top is its output)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from service.cli.errors import fail

__all__ = ["openapi"]


def openapi(
    out: Annotated[str, typer.Option("--out", "-o", help="File to write, or '-' for stdout.")] = "-",
    check: Annotated[
        bool, typer.Option("--check", help="Write nothing; exit 1 if --out differs from the app's document.")
    ] = False,
) -> None:
    """Print (or write) the OpenAPI document of the REST API, as YAML."""
    from service.server.config import Settings
    from service.server.main import create_app
    from service.server.openapi import openapi_yaml

    text = openapi_yaml(create_app(Settings()))
    if check:
        if out == "-":
            fail("--check needs --out FILE")
        current = Path(out).read_text(encoding="utf-8") if Path(out).exists() else ""
        if current != text:
            fail(f"{out} is out of date: run `scemon openapi --out {out}`")
        return
    if out == "-":
        sys.stdout.write(text)
    else:
        Path(out).write_text(text, encoding="utf-8")
