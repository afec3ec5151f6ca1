"""Matches as ``scemon replay`` writes them: one JSON object per line
(docs/semantics.md §9), to stdout or to a file that appears only when the whole run
succeeded.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from operator import attrgetter
from pathlib import Path
from typing import BinaryIO

import orjson

from ecq.kernel.make import lines_writer, match_writer
from ecq.match import Match

__all__ = ["match_line", "open_output", "write_matches"]


def match_line(match: Match) -> bytes:
    """One match as a JSON Lines record (docs/semantics.md §9); ``events`` holds event ids."""
    return orjson.dumps(match_writer()(match)) + b"\n"


def write_matches(out: BinaryIO, matches: list[Match], counts: Counter[str]) -> None:
    """Write ``matches`` as JSON Lines in one call and count them per query."""
    if not matches:
        return
    out.write(lines_writer()(matches, _dumps))
    counts.update(map(_query, matches))


_query = attrgetter("query")


def _dumps(value: object) -> str:
    return orjson.dumps(value).decode()


@contextmanager
def open_output(target: str | None) -> Iterator[BinaryIO]:
    """The stream matches go to: stdout for ``None`` or ``"-"``, else a temporary file
    beside ``target`` that replaces it only when the block ends without error — so a
    failed replay leaves no output file, and never a truncated one."""
    if target is None or target == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    path = Path(target)
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:  # name the file the user asked for, not the temporary one
        raise OSError(err.errno, err.strerror, str(path)) from None
    try:
        with os.fdopen(fd, "wb") as stream:
            yield stream
        os.chmod(temp, 0o666 & ~_umask())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    # mkstemp makes the file 0600; give the output the mode a plain open() would.
    mask = os.umask(0)
    os.umask(mask)
    return mask
