"""The cyclic garbage collector paused around work that only allocates: compiling and
installing queries makes many small objects that all stay alive, and each young
collection meanwhile walks them again for nothing (half the time of compiling 10,000
conditioned queries).

What the block made is moved to the collector's oldest generation before it is back on
(``gc.freeze`` then ``gc.unfreeze``, which splices the generations' lists: no object is
visited). Left young, the first collection after the block walked every one of them
(a query's 50 to 150 objects: 15-40 µs a query of registering 10,000), and a middle
one walked them again, only to find them alive. In the oldest generation they are
walked by the full collections alone, as they would be once promoted. A reference
cycle among them that is garbage (none is made on purpose) is found by the next full
collection rather than the next young one. Nothing is moved while some objects are
frozen (``gc.freeze``, kept so by a caller: moving would unfreeze them); whoever freezes
objects for long says so through :func:`freeze`, so that no block counts them.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused", "freeze", "full_collections_held", "unfreeze"]

# Whether objects were frozen through :func:`freeze` and not thawed through
# :func:`unfreeze` since. ``gc.get_freeze_count()`` counts the frozen objects one by one
# (0.11 s for the 2.7 million of an engine of 100,000 demo queries), and every paused
# block asks at its end whether some are frozen: each registration into a service that
# large, and twice in its start.
_frozen = False


def freeze() -> None:
    """``gc.freeze()``, remembered: a paused block then knows that objects are frozen
    without counting them. (Objects frozen by ``gc.freeze`` itself are counted.)"""
    global _frozen
    gc.freeze()
    _frozen = True


def unfreeze() -> None:
    """``gc.unfreeze()``, remembered (see :func:`freeze`)."""
    global _frozen
    gc.unfreeze()
    _frozen = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the collector off; it runs as usual after (restored only if
    it was on: a caller that turned it off keeps it off), what the block made in its
    oldest generation (the module's docstring)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if not _frozen and gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


# The oldest generation's threshold while full collections are held: never reached.
_HELD = 1 << 30


@contextmanager
def full_collections_held() -> Iterator[None]:
    """Run the block with the collector's young collections only (the first two
    generations): for work that makes short-lived objects among many long-lived ones
    that are not frozen, such as replaying a window of events into an engine whose
    kernel tables and stored instances are young. Each full collection walks every one
    of those again (a third of replaying 5,000 events into 100,000 demo queries); a
    cycle of garbage that survives two young collections waits for the first full one
    after the block. The thresholds are the process's: restored after."""
    first, second, third = gc.get_threshold()
    gc.set_threshold(first, second, _HELD)
    try:
        yield
    finally:
        gc.set_threshold(first, second, third)
