"""How the ``scemon`` commands report a user's mistake: one line on stderr, exit 1."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer

from ecq.errors import ScemonError

__all__ = ["SPARK_MISSING", "fail", "user_errors"]

# The hint when the Spark job's extra is not installed.
SPARK_MISSING = "pip install 'scemon[spark]' (and a Java 17 runtime)"


def fail(message: str, code: int = 1) -> NoReturn:
    """``error: <first line of message>`` on stderr, then exit ``code`` (1)."""
    typer.echo(f"error: {message.splitlines()[0] if message else 'failed'}", err=True)
    raise typer.Exit(code)


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
