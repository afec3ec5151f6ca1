"""``scemon serve``: run the REST/WebSocket server (:mod:`service.server`) in this process.

Each option reads its ``SCEMON_*`` variable when not given; the other settings come from
the environment alone (:mod:`service.server.config`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from service.cli.errors import fail, warn_if_pure

__all__ = ["STORE_UNUSABLE", "serve"]

# The exit status when the store cannot be served (corrupt, truncated, empty): a
# supervisor should not restart the server until someone repairs it.
STORE_UNUSABLE = 4


def serve(
    host: Annotated[str, typer.Option(envvar="SCEMON_HOST", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="SCEMON_PORT", help="Port.")] = 8080,
    data: Annotated[
        Path, typer.Option(envvar="SCEMON_DATA", help="Folder of the SQLite store.")
    ] = Path("./data"),
    lateness: Annotated[
        float,
        typer.Option(
            envvar="SCEMON_LATENESS",
            help="Allowed lateness, seconds: events are held until the clock passes their end by this "
            "much and reach the engine in time order; matches come out that much later (0: nothing held).",
        ),
    ] = 0.0,
    max_ahead: Annotated[
        float,
        typer.Option(
            envvar="SCEMON_MAX_AHEAD",
            help="Refuse events (and time advances) more than this many seconds ahead of the clock or "
            "the wall clock, whichever is later; inf: no bound.",
        ),
    ] = 86400.0,
    buffer_max: Annotated[
        int,
        typer.Option(
            envvar="SCEMON_BUFFER_MAX",
            help="Events the reorder buffer may hold; a batch beyond is answered 503 with Retry-After.",
        ),
    ] = 1_000_000,
    log_level: Annotated[str, typer.Option(envvar="SCEMON_LOG_LEVEL", help="uvicorn log level.")] = "info",
    init: Annotated[
        bool,
        typer.Option(
            "--init",
            envvar="SCEMON_INIT",
            help="Start an empty store in place of an empty (0-byte) store file.",
        ),
    ] = False,
) -> None:
    """Run the REST/WebSocket service on the store under --data.

    On start the engine is rebuilt from the store (queries, retained events, the events
    held for --lateness, seq), so a killed server restarted on the same --data loses
    nothing. Tokens come from
    SCEMON_TOKENS ("tok1:admin,tok2:producer,tok3:reader"); without tokens the server
    binds loopback only.

    The store is checked first (PRAGMA quick_check): a corrupt, truncated or empty
    store stops the command with exit status 4 and says how to repair it; an empty
    (0-byte) store file is started afresh only with --init.
    """
    # Imported here: pydantic-settings is a tenth of a second that every other command
    # (a replay, a stream) would pay at start.
    from pydantic import ValidationError

    from service.server.config import Settings, is_loopback

    # Every option has its default and reads its SCEMON_* variable here, so --help shows
    # both; Settings declares the same defaults (a test holds them equal) and reads the
    # variables no option covers (tokens, limits).
    overrides: dict[str, Any] = {
        "host": host,
        "port": port,
        "data": data,
        "lateness": lateness,
        "max_ahead": max_ahead,
        "buffer_max": buffer_max,
        "log_level": log_level,
        "init": init,
    }
    try:
        settings = Settings(**overrides)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        fail(f"setting {where}: {first['msg']}")
    if not settings.auth_enabled and not is_loopback(settings.host):
        fail(
            f"refusing to bind {settings.host} without tokens: set SCEMON_TOKENS "
            "(e.g. 'secret1:admin,secret2:producer') or bind 127.0.0.1"
        )
    from service.server.faults import UnusableStore
    from service.server.store import STORE_FILE, check

    try:
        settings.data.mkdir(parents=True, exist_ok=True)
        check(settings.data / STORE_FILE, settings.init)
    except UnusableStore as err:
        fail(str(err), STORE_UNUSABLE)
    except OSError as err:
        fail(f"{settings.data}: {err.strerror or err}", STORE_UNUSABLE)
    from service.server.main import run

    warn_if_pure()
    run(settings)
