"""The ``scemon`` command as a process runs it: the console script and ``python -m
service.cli`` call :func:`cli`.

Two things only a process that ends with the command may do to the garbage collector
(the app itself also runs in process, in tests and in ``deploy/stream_job.py``):
the CLI's modules load with the collector quiet, and what the command leaves alive is
frozen before the interpreter exits.
"""

from __future__ import annotations

import gc

from service.cli.collector import collector_quiet

__all__ = ["cli"]


def cli() -> None:
    """``scemon`` on ``sys.argv``, exiting with the command's status.

    Importing typer and the app sets off no collection (20 young and 2 middle ones did,
    walking little but the modules being loaded). Whatever the command leaves alive
    dies with the process, so it is frozen first (``gc.freeze``): the collections the
    interpreter runs as it exits then skip it instead of walking every object the run
    built (after a replay of 1,000 queries and 20,000 events: the engine's objects, the
    modules, ~90,000 in all), which cost about a third of that replay's CPU time.
    Nothing else is skipped: ``atexit`` handlers and the flushing of open files run as
    usual; only cycles that are garbage at the very end are not collected before the
    process goes.
    """
    with collector_quiet():
        from service.cli.app import app
    try:
        app()
    finally:
        gc.freeze()
