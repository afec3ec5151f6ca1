"""``scemon serve``: run the REST/WebSocket server (:mod:`service.server`) in this process.

Each option reads its ``SCEMON_*`` variable when not given; the other settings come from
the environment alone (:mod:`service.server.config`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from service.cli.errors import fail, warn_if_pure

__all__ = ["FOLDER_IN_USE", "STORE_UNUSABLE", "serve"]

# The exit status when the store cannot be served (corrupt, truncated, empty): a
# supervisor should not restart the server until someone repairs it.
STORE_UNUSABLE = 4
# The exit status when another server holds the data folder.
FOLDER_IN_USE = 5


def serve(
    host: Annotated[str, typer.Option(envvar="SCEMON_HOST", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="SCEMON_PORT", help="Port.")] = 8080,
    data: Annotated[Path, typer.Option(envvar="SCEMON_DATA", help="Folder of the SQLite store.")] = Path(
        "./data"
    ),
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
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            help="A host name the server answers to besides localhost, 127.0.0.1 and [::1] (repeat for more); "
            "with tokens, setting one makes the list binding. Read from SCEMON_ALLOWED_HOSTS "
            "(comma-separated) when not given.",
        ),
    ] = None,
    producer_idle: Annotated[
        float,
        typer.Option(
            envvar="SCEMON_PRODUCER_IDLE",
            help="Seconds without a batch after which a producer stops holding the clock back (the clock "
            "is the slowest live producer's); inf: never.",
        ),
    ] = 60.0,
    max_connections: Annotated[
        int,
        typer.Option(
            envvar="SCEMON_MAX_CONNECTIONS",
            help="Open connections at once (HTTP and WebSocket); a request beyond gets 503.",
        ),
    ] = 4096,
    header_timeout: Annotated[
        float,
        typer.Option(
            envvar="SCEMON_HEADER_TIMEOUT",
            help="Seconds to send a request's headers; then the connection is closed.",
        ),
    ] = 10.0,
    body_timeout: Annotated[
        float,
        typer.Option(
            envvar="SCEMON_BODY_TIMEOUT",
            help="Seconds a request's body may stall without a byte; then the connection is closed.",
        ),
    ] = 30.0,
    max_matches_per_event: Annotated[
        int,
        typer.Option(
            envvar="SCEMON_MAX_MATCHES_PER_EVENT",
            help="Matches one event may complete for one query; more are dropped, counted and logged "
            "(0: no cap).",
        ),
    ] = 10_000,
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

    One server per --data: a second one on the same folder exits at once with status 5,
    naming the first (its pid and host).

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
        "producer_idle": producer_idle,
        "log_level": log_level,
        "init": init,
        "max_connections": max_connections,
        "header_timeout": header_timeout,
        "body_timeout": body_timeout,
        "max_matches_per_event": max_matches_per_event,
    }
    if allowed_host:  # else Settings reads SCEMON_ALLOWED_HOSTS (comma-separated)
        overrides["allowed_hosts"] = ",".join(allowed_host)
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
    from service.server.datalock import DataLock, FolderInUse
    from service.server.faults import UnusableStore
    from service.server.store import STORE_FILE, check_started

    try:
        settings.data.mkdir(parents=True, exist_ok=True)
        # Held until the process ends (the kernel drops it, even on SIGKILL).
        lock = DataLock(settings.data).acquire()
    except FolderInUse as err:
        fail(str(err), FOLDER_IN_USE)
    except OSError as err:
        fail(f"{settings.data}: {err.strerror or err}", STORE_UNUSABLE)
    try:
        checked = check_started(settings.data / STORE_FILE, settings.init)
        # The server is imported while a child process checks every row's checksum.
        from service.server.main import run

        checked()
    except UnusableStore as err:
        fail(str(err), STORE_UNUSABLE)
    except OSError as err:
        fail(f"{settings.data}: {err.strerror or err}", STORE_UNUSABLE)

    warn_if_pure()
    try:
        run(settings)
    finally:
        lock.release()
