"""One server per data folder: an exclusive lock on ``<data>/scemon.lock``.

Why: two servers on one store both answered 200 while each overwrote what the other
logged (matches lost, or one went unwritable on a UNIQUE constraint). ``fcntl.flock``
is held by the open file itself, so the kernel releases it when the process ends in any
way — a SIGKILL leaves no stale lock to clean up. The holder writes its pid, host and
start time into the file, so the second server can say who holds the folder.

A lock taken over NFS may not be exclusive between machines (flock there is local or
emulated); keep a store on a local disk.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path

__all__ = ["LOCK_FILE", "DataLock", "FolderInUse"]

LOCK_FILE = "scemon.lock"


class FolderInUse(Exception):
    """Another process holds the data folder; the message names it."""


class DataLock:
    """``DataLock(folder).acquire()`` takes the folder or raises :class:`FolderInUse`;
    the lock lasts until :meth:`release` or the end of the process."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> DataLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip()
            os.close(fd)
            raise FolderInUse(
                f"the data folder {self.path.parent} is in use by another scemon server "
                f"({holder or 'its holder did not say who it is'}); stop it, or give this one another --data"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on host {socket.gethostname()}, since {started}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the file drops the lock
            self._fd = None
