"""Repair a store whose clock a far-future event poisoned (``scemon admin repair-clock``).

One event with a timestamp in milliseconds, an epoch time in a stream of small times, a
``POST /v1/time`` of 1e308, or a batch climbing by steps, taken before the bound that
now refuses it, moved the clock so far that every later event was late, and the store
kept that clock across restarts. The repair walks the op log as the bound
(``--max-ahead``, measured as ``scemon serve`` measures it now) would have: events
further ahead than it are taken out of their batches, such time advances out of the
log. With ``to``, every event ending after ``to`` and every time advance beyond it
goes instead: the clock is rolled back to at most ``to``. Then the clocks are
recomputed by replaying the repaired log and written to ``meta`` (each batch's logged
clock lowered to match, the producers' watermarks forgotten). The next start rebuilds
the engine from the repaired log, so later events match again.

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
from ecq.event import Event
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
    # The latest event time the repaired log holds (its clock before trimmed history).
    latest: float = -math.inf

    @property
    def changed(self) -> bool:
        return bool(self.events or self.times) or self.before != self.after


def repair_clock(
    store: Store,
    max_ahead: float = MAX_AHEAD,
    now: float | None = None,
    dry_run: bool = False,
    to: float | None = None,
) -> ClockRepair:
    """Take far-future events and time advances (or, with ``to``, all of those beyond
    ``to``) out of ``store``'s op log and recompute its clocks; ``now`` is the wall
    clock (default: the real one). One transaction."""
    now = time.time() if now is None else now
    meta = store.meta()
    repair = ClockRepair(before=Clocks(meta.clock, meta.observed))
    # A bare engine is enough: the clocks do not depend on the queries.
    keeper = TimeKeeper(Engine(), 0.0, max_ahead)
    rewritten: list[tuple[bytes, float, int]] = []  # (events, largest end, pos)
    dropped: list[int] = []
    lowered: list[tuple[float, int]] = []  # (clock, pos) of batches whose logged clock goes down
    for op in store.ops():
        if op.kind == BATCH:
            assert op.body is not None
            events = events_of(op.body)
            bad = _beyond(keeper, events, now, to)
            if bad:
                repair.events += [(op.pos, events[i].id, events[i].end) for i in bad]
                taken = set(bad)
                events = [e for i, e in enumerate(events) if i not in taken]
                largest = max((e.end for e in events), default=-math.inf)
                rewritten.append((events_body(events), largest, op.pos))
            keeper.process(events)
            # The slowest producer's clock is never above the largest end's.
            if op.clock is not None and op.clock > keeper.observed:
                lowered.append((keeper.observed, op.pos))
        elif op.kind == TIME:
            assert op.time is not None
            if _time_beyond(keeper, op.time, now, to):
                repair.times.append((op.pos, op.time))
                dropped.append(op.pos)
                continue
            keeper.advance_time(op.time)
        elif op.kind == LATENESS:
            assert op.time is not None
            keeper.set_lateness(op.time)
    repair.latest = keeper.observed
    # A clock the log no longer shows (its op was trimmed) is kept when it is believable.
    bound = keeper.reference(now)[0] + max_ahead if to is None else to
    repair.after = Clocks(
        meta.clock if keeper.released < meta.clock <= bound else keeper.released,
        meta.observed if keeper.observed < meta.observed <= bound else keeper.observed,
    )
    if not dry_run and repair.changed:
        store.rewrite_ops(rewritten, dropped, repair.after, lowered)
    return repair


def _beyond(keeper: TimeKeeper[Engine], events: list[Event], now: float, to: float | None) -> list[int]:
    """The indexes of a logged batch's events to take out."""
    if to is not None:
        return [i for i, e in enumerate(events) if e.end > to]
    try:
        keeper.check_ahead(events, now)
    except AheadError as err:
        return list(err.indexes)
    return []


def _time_beyond(keeper: TimeKeeper[Engine], t: float, now: float, to: float | None) -> bool:
    if to is not None:
        return t > to
    try:
        keeper.check_time(t, now)
    except AheadError:
        return True
    return False
