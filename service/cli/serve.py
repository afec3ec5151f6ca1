"""``scemon serve``: run the REST/WebSocket server (:mod:`service.server`) in this process.

Options override the ``SCEMON_*`` environment (:mod:`service.server.config`).
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
    host: Annotated[
        str | None, typer.Option(help="Address to bind [env SCEMON_HOST; default 127.0.0.1].")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port [env SCEMON_PORT; default 8080].")] = None,
    data: Annotated[
        Path | None, typer.Option(help="Folder of the SQLite store [env SCEMON_DATA; default ./data].")
    ] = None,
    lateness: Annotated[
        float | None,
        typer.Option(
            help="Allowed lateness, seconds: events are held until the clock passes their end by this "
            "much and reach the engine in time order; matches come out that much later "
            "[env SCEMON_LATENESS; default 0: nothing held].",
        ),
    ] = None,
    max_ahead: Annotated[
        float | None,
        typer.Option(
            help="Refuse events (and time advances) more than this many seconds ahead of the clock or "
            "the wall clock, whichever is later; inf: no bound [env SCEMON_MAX_AHEAD; default 86400].",
        ),
    ] = None,
    buffer_max: Annotated[
        int | None,
        typer.Option(
            help="Events the reorder buffer may hold; a batch beyond is answered 503 with Retry-After "
            "[env SCEMON_BUFFER_MAX; default 1000000].",
        ),
    ] = None,
    producer_idle: Annotated[
        float | None,
        typer.Option(
            help="Seconds without a batch after which a producer stops holding the clock back (the clock "
            "is the slowest live producer's); inf: never [env SCEMON_PRODUCER_IDLE; default 60].",
        ),
    ] = None,
    log_level: Annotated[str | None, typer.Option(help="uvicorn log level [env SCEMON_LOG_LEVEL].")] = None,
    init: Annotated[
        bool,
        typer.Option(
            "--init", help="Start an empty store in place of an empty (0-byte) store file [env SCEMON_INIT]."
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

    overrides: dict[str, Any] = {
        key: value
        for key, value in {
            "host": host,
            "port": port,
            "data": data,
            "lateness": lateness,
            "max_ahead": max_ahead,
            "buffer_max": buffer_max,
            "producer_idle": producer_idle,
            "log_level": log_level,
        }.items()
        if value is not None
    }
    if init:
        overrides["init"] = True
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
