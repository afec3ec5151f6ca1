"""Options more than one command takes, declared once so they read the same everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["QueriesOption", "ServiceOption", "TokenOption"]

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
ServiceOption = Annotated[
    list[str],
    typer.Option(
        "--service",
        "-s",
        help="Base URL of a scemon service (http://host:port). Repeat for shards: each source goes to "
        "shard crc32(src) mod the number of --service options, in the order given (and each value of "
        "another partition key in use to its owner; each shard then needs SCEMON_SHARD=K/N).",
        show_default=False,
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option("--token", envvar="SCEMON_TOKEN", help="Bearer token for the services.", show_default=False),
]
