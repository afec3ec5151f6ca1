"""Giving memory back to the system once the subscribers that needed it have left.

Why: a thousand subscribers replaying a long match log from ``seq`` 0 each hold frames
of the log while they read; when they leave, the C library keeps the freed pages for
reuse, so the server's resident size stayed near its peak (hundreds of megabytes) with
nobody connected. glibc's ``malloc_trim(0)`` hands back free pages from anywhere in the
heap. It is called when the last subscriber leaves, at most every MIN_INTERVAL seconds,
on a worker thread (ctypes releases the interpreter lock during the call); elsewhere
than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import time
from collections.abc import Callable

__all__ = ["MIN_INTERVAL", "trimmer"]

log = logging.getLogger("scemon.memory")

# Seconds between two trims: each walks the heap.
MIN_INTERVAL = 1.0


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


class _Trimmer:
    def __init__(self) -> None:
        self._trim = _malloc_trim()
        self._last = -float("inf")

    def due(self) -> bool:
        return self._trim is not None and time.monotonic() - self._last >= MIN_INTERVAL

    def __call__(self) -> None:
        """Give free heap pages back (any thread)."""
        if self._trim is None:
            return
        self._last = time.monotonic()
        self._trim(0)


trimmer = _Trimmer()
