"""The cyclic garbage collector paused around work that only allocates: compiling and
installing queries makes many small objects that all stay alive, and each young
collection meanwhile walks them again for nothing (half the time of compiling 10,000
conditioned queries)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the collector off; it runs as usual after (restored only if
    it was on: a caller that turned it off keeps it off)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
