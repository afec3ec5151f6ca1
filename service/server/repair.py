"""Repair a store whose clock a far-future event poisoned (``scemon admin repair-clock``).

Before the far-future bound existed, one event with a timestamp in milliseconds (or a
``POST /v1/time`` of 1e308) moved the one clock so far that every later event was late,
and the store kept that clock across restarts. The repair walks the op log as the bound
(``--max-ahead``) would have: events further ahead than it of the later of the clock
and the wall clock are taken out of their batches, such time advances out of the log;
then the clocks are recomputed by replaying the repaired log and written to ``meta``.
The next start rebuilds the engine from the repaired log, so later events match again.

Matches the poisoned clock suppressed are not made up afterwards (subscribers resume by
``seq`` and must not see history rewritten); replay the source files with ``scemon
replay`` for them. Run it on a stopped server's store: a running server would write its
own clocks back.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from ecq.engine import Engine
from ecq.errors import AheadError
from ecq.time.timekeeper import MAX_AHEAD, TimeKeeper
from service.server.store import BATCH, LATENESS, TIME, Clocks, Store, events_body, events_of

__all__ = ["ClockRepair", "repair_clock"]


@dataclass
class ClockRepair:
    """What a repair found (and, unless it was a dry run, did)."""

    events: list[tuple[int, Any, float]] = field(default_factory=list)  # (op position, id, end)
    times: list[tuple[int, float]] = field(default_factory=list)  # (op position, time)
    before: Clocks = Clocks(-math.inf, -math.inf)
    after: Clocks = Clocks(-math.inf, -math.inf)

    @property
    def changed(self) -> bool:
        return bool(self.events or self.times) or self.before != self.after


def repair_clock(
    store: Store, max_ahead: float = MAX_AHEAD, now: float | None = None, dry_run: bool = False
) -> ClockRepair:
    """Take far-future events and time advances out of ``store``'s op log and recompute
    its clocks; ``now`` is the wall clock (default: the real one). One transaction."""
    now = time.time() if now is None else now
    meta = store.meta()
    repair = ClockRepair(before=Clocks(meta.clock, meta.observed))
    # A bare engine is enough: the clocks do not depend on the queries.
    keeper = TimeKeeper(Engine(), 0.0, max_ahead)
    rewritten: list[tuple[bytes, float, int]] = []  # (events, largest end, pos)
    dropped: list[int] = []
    for op in store.ops():
        if op.kind == BATCH:
            assert op.body is not None
            events = events_of(op.body)
            try:
                keeper.check_ahead(events, now)
            except AheadError as err:
                bad = set(err.indexes)
                repair.events += [(op.pos, events[i].id, events[i].end) for i in err.indexes]
                events = [e for i, e in enumerate(events) if i not in bad]
                largest = max((e.end for e in events), default=-math.inf)
                rewritten.append((events_body(events), largest, op.pos))
            keeper.process(events)
        elif op.kind == TIME:
            assert op.time is not None
            try:
                keeper.check_time(op.time, now)
            except AheadError:
                repair.times.append((op.pos, op.time))
                dropped.append(op.pos)
                continue
            keeper.advance_time(op.time)
        elif op.kind == LATENESS:
            assert op.time is not None
            keeper.set_lateness(op.time)
    # A clock the log no longer shows (its op was trimmed) is kept when it is believable.
    bound = max(keeper.observed, now) + max_ahead
    repair.after = Clocks(
        meta.clock if keeper.released < meta.clock <= bound else keeper.released,
        meta.observed if keeper.observed < meta.observed <= bound else keeper.observed,
    )
    if not dry_run and repair.changed:
        store.rewrite_ops(rewritten, dropped, repair.after)
    return repair
