"""The cyclic garbage collector tuned for a command that holds many long-lived objects
and makes many short-lived ones without cycles: ``scemon replay`` (every event it read
and the engine's state), ``scemon stream`` and ``scemon demo`` (the Spark driver's
modules — pyspark, py4j, pyarrow — and, in the demo, a WebSocket listener decoding every
match).

With the default thresholds the collector walked those objects again and again while
the command's own objects came and went: measured, a quarter of a replay's time, and a
third of the demo's driver CPU over its stream (0.75-1.13 s against 0.53-0.82 with the
collector tuned, 120,000 events). Inside :func:`tuned_collector` it runs 50-140 times
less often, and :func:`freeze_so_far` exempts what is alive already. Reference counting
still frees everything as usual; cycles are still collected."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_quiet", "freeze_so_far", "tuned_collector"]

# Allocations before a young collection, and young (then middle) collections before the
# next generation's: 50-140 times less often than Python's defaults ((700, 10, 10) to
# 3.12, (2000, 10, 10) from 3.13).
THRESHOLDS = (100_000, 50, 100)


@contextmanager
def tuned_collector() -> Iterator[None]:
    """The collector at :data:`THRESHOLDS` for the block; the thresholds it had, and no
    frozen objects, after it (an exception included), with what is alive then in the
    oldest generation."""
    old = gc.get_threshold()
    gc.set_threshold(*THRESHOLDS)
    try:
        yield
    finally:
        # Everything alive goes to the oldest generation, walked by no collection until
        # the next full one: restoring the default thresholds with the block's tens of
        # thousands of young objects still counted would make the next allocation walk
        # them all (measured: 15 ms at the end of a replay of 1,000 queries).
        gc.freeze()
        gc.set_threshold(*old)
        gc.unfreeze()


def freeze_so_far() -> None:
    """Leave the objects alive now out of later collections (``gc.freeze``; undone when
    :func:`tuned_collector` ends). Call it once what stays is built (events read, the
    engine, the Spark session): nothing is collected first, so cyclic garbage made
    since the last collection waits for the block's end."""
    gc.freeze()


@contextmanager
def collector_quiet() -> Iterator[None]:
    """No collection in the block; after it (an exception included) what is alive is in
    the oldest generation, and the collector is on again if it was.

    For imports: a module's functions, classes and tables live as long as the process,
    and the collections the default thresholds set off while a command's modules load
    (for ``scemon replay``, typer's and the engine's: some 35 young and 3 middle ones)
    walked little but those."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if was:
            gc.enable()
