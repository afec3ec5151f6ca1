"""What can go wrong with the store, said as what it is.

SQLite reports a full disk, a read-only file and an I/O error with distinct result codes
(``sqlite3.Error.sqlite_errorcode``); :class:`StoreFault` keeps that kind, so a client,
the log and ``/readyz`` all say "the disk is full" rather than whatever error happened to
surface last (a failed commit's rollback used to answer "cannot rollback - no
transaction is active").

- :class:`StoreFault` — an operation the store refused while serving. ``kind`` is one
  of :data:`FULL`, :data:`READ_ONLY`, :data:`IO`, :data:`CORRUPT`, :data:`BUSY`,
  :data:`OTHER`; all but ``corrupt`` may pass (space freed, permissions fixed, the disk
  back), so the server probes and resumes by itself.
- :class:`UnusableStore` — the store cannot be served at all (corrupt, truncated, empty,
  not a scemon store): found at start, the server stops with a message naming the file
  and the fix.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["BUSY", "CORRUPT", "FULL", "IO", "OTHER", "READ_ONLY", "StoreFault", "UnusableStore", "kind_of"]

FULL = "full"
READ_ONLY = "read-only"
IO = "I/O error"
CORRUPT = "corrupt"
BUSY = "busy"
OTHER = "error"

# Primary result codes (https://sqlite.org/rescode.html); extended codes carry them in
# their low byte.
_KINDS = {
    13: FULL,  # SQLITE_FULL
    8: READ_ONLY,  # SQLITE_READONLY
    10: IO,  # SQLITE_IOERR
    11: CORRUPT,  # SQLITE_CORRUPT
    26: CORRUPT,  # SQLITE_NOTADB
    5: BUSY,  # SQLITE_BUSY
    6: BUSY,  # SQLITE_LOCKED
    14: IO,  # SQLITE_CANTOPEN: the file or its folder went away
}

_WHAT = {
    FULL: ("its disk is full", "free space on that disk; writes resume by themselves"),
    READ_ONLY: ("it is read-only", "make the file and its folder writable; writes resume by themselves"),
    IO: ("an I/O error", "check the disk; writes resume when it works again"),
    CORRUPT: ("it is corrupt", "stop the server: at start it checks the file and says how to restore it"),
    BUSY: ("another process holds its lock", "stop the other process writing to it"),
    OTHER: ("an error", "see the server log"),
}


def kind_of(err: sqlite3.Error) -> str:
    """The kind of fault an SQLite error reports."""
    code = getattr(err, "sqlite_errorcode", None)
    if isinstance(code, int):
        return _KINDS.get(code & 0xFF, OTHER)
    return OTHER


class StoreFault(Exception):
    """The store refused an operation. Says what, in which file, and what to do."""

    def __init__(self, kind: str, path: Path, detail: str, code: str | None = None) -> None:
        self.kind = kind
        self.path = path
        self.detail = detail
        self.code = code
        what, fix = _WHAT.get(kind, _WHAT[OTHER])
        named = f"{detail}, {code}" if code else detail
        super().__init__(f"the store {path} cannot write: {what} ({named}); {fix}")

    @classmethod
    def of(cls, err: sqlite3.Error, path: Path) -> StoreFault:
        return cls(kind_of(err), path, str(err), getattr(err, "sqlite_errorname", None))

    @property
    def passes(self) -> bool:
        """Whether the fault may pass while the server runs (all but corruption)."""
        return self.kind != CORRUPT


class UnusableStore(Exception):
    """The store cannot be served; the message names the file and the fix."""


class DamagedRows(Exception):
    """Rows of the store fail their checksum (their bytes changed on disk): what and
    where. ``seqs``: for a match block, the seqs it holds, ``(first, next)``."""

    def __init__(self, path: Path, where: str, seqs: tuple[int, int] | None = None) -> None:
        self.path = path
        self.where = where
        self.seqs = seqs
        super().__init__(f"the store {path} is damaged: {where} fails its checksum")
