"""How the ``scemon`` commands report a user's mistake (one line on stderr, exit 1), and
warn of what a user would want to know before waiting (the slow kernel)."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer

from ecq.errors import ScemonError
from ecq.kernel.select import status

__all__ = ["SPARK_MISSING", "fail", "user_errors", "warn_if_pure"]

# The hint when the Spark job's extra is not installed.
SPARK_MISSING = "pip install 'scemon[spark]' (and a Java 17 runtime)"


def fail(message: str, code: int = 1) -> NoReturn:
    """``error: <first line of message>`` on stderr, then exit ``code`` (1)."""
    typer.echo(f"error: {message.splitlines()[0] if message else 'failed'}", err=True)
    raise typer.Exit(code)


def warn_if_pure() -> None:
    """One line on stderr when the engine runs its pure-Python kernel (several times
    slower than the compiled one), saying why; nothing otherwise."""
    warning = status().warning()
    if warning is not None:
        typer.echo(warning, err=True)


@contextmanager
def user_errors(missing: str | None = None) -> Iterator[None]:
    """Turn the errors a user can cause (bad input, a file or service that is not there)
    into :func:`fail`. ``missing``: the hint for a module that is not installed (an
    optional extra); without it that error is a bug and propagates."""
    try:
        yield
    except ScemonError as err:
        fail(str(err))
    except OSError as err:
        if err.errno == errno.EPIPE:
            raise  # the reader went away (`| head`): typer exits quietly
        reason = err.strerror or str(err)
        fail(f"{err.filename}: {reason}" if err.filename is not None else reason)
    except ModuleNotFoundError as err:
        if missing is None:
            raise
        fail(f"{err.name} is not installed: {missing}")
