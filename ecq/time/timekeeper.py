"""Event time around an engine: allowed lateness, late events and far-future events
(docs/semantics.md, "Late and out-of-order events").

The engine itself takes events in the order it is given them and keeps one clock, the
largest ``end`` it has seen. A :class:`TimeKeeper` stands in front of it and adds three
rules, the same for ``scemon replay`` and the service:

- **allowed lateness** ``L``: events go through a :class:`~ecq.time.reorder.Reorder` buffer
  and reach the engine in ``(end, start)`` order once the observed clock has passed
  ``end + L``. The engine's own clock is then the *released clock*; trailing negations
  and time advances follow it.
- **late events**: an event whose ``end`` is below the released clock when it reaches
  the engine is processed all the same (as the engine always did) and reported with how
  late it was, so the matches it may have missed are never lost without a word.
- **far-future events**: an event (or time advance) more than ``max_ahead`` seconds
  beyond the clock is refused before anything changes (:class:`~ecq.errors.AheadError`),
  so one bad timestamp cannot make every later event late. Until the stream has a
  clock, the caller's wall clock (``now``) stands in for it.

Pure and synchronous like the engine: no clock of its own (the caller passes ``now``),
no threads, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from operator import attrgetter
from typing import Generic, Protocol, TypeVar

from ecq.errors import AheadError
from ecq.event import Event
from ecq.match import Match
from ecq.time.reorder import Reorder

_END = attrgetter("end")

__all__ = ["MAX_AHEAD", "Clocked", "Late", "TimeKeeper", "check_max_ahead"]

# One day: far beyond any real clock skew or batching delay, and a bound on how far one
# bad event can move the clock (a millisecond timestamp read as seconds is ~50,000 years
# ahead). docs/semantics.md explains the choice.
MAX_AHEAD = 86_400.0

NEG_INF = float("-inf")


class Clocked(Protocol):
    """What a time keeper needs of an engine (``ecq.Engine`` and the baseline)."""

    clock: float

    def process(self, events: Iterable[Event]) -> list[Match]: ...

    def advance_time(self, t: float) -> list[Match]: ...


E = TypeVar("E", bound=Clocked)


class Late:
    """The events of one call that reached the engine with ``end`` below the released
    clock, and by how many seconds each: ``for event, by in late``.

    Two parallel lists rather than an object per event: a stream out of order by a
    little makes most events late by a little, and a record each (with the garbage
    collector walking them) would cost a third of the engine's time.
    """

    __slots__ = ("events", "by")

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.by: list[float] = []

    def __len__(self) -> int:
        return len(self.events)

    def extend(self, other: Late) -> None:
        """Append ``other``'s late events (a batch applied in slices)."""
        self.events += other.events
        self.by += other.by

    def __iter__(self) -> Iterator[tuple[Event, float]]:
        return zip(self.events, self.by, strict=True)

    def __repr__(self) -> str:
        return f"Late({[(e.id, by) for e, by in self]})"


def check_max_ahead(max_ahead: float) -> float:
    """``max_ahead`` as a float; ValueError unless ``> 0`` (``inf`` turns the bound off)."""
    value = float(max_ahead)
    if math.isnan(value) or value <= 0:
        raise ValueError(f"max-ahead must be a number of seconds > 0 (inf for no bound), got {max_ahead!r}")
    return value


class TimeKeeper(Generic[E]):
    """An engine with a reorder buffer, late-event reports and a bound on the future."""

    def __init__(self, engine: E, lateness: float = 0.0, max_ahead: float = MAX_AHEAD) -> None:
        self.engine = engine
        self.reorder = Reorder(lateness)
        self.max_ahead = check_max_ahead(max_ahead)

    # ------------------------------------------------------------------ reading

    @property
    def lateness(self) -> float:
        return self.reorder.lateness

    @property
    def observed(self) -> float:
        """The clock of the stream: the largest ``end`` taken or time advanced to."""
        return max(self.reorder.observed, self.engine.clock)

    @property
    def released(self) -> float:
        """The released clock: the engine's, at most ``observed - lateness``."""
        return self.engine.clock

    @property
    def held(self) -> int:
        return len(self.reorder)

    def held_after(self, events: Sequence[Event]) -> int:
        """Events held after taking ``events``, for a cap on the buffer."""
        return self.reorder.held_after(events)

    # ------------------------------------------------------------------ checking

    def check_ahead(
        self, events: Sequence[Event], now: float | None = None, latest: float | None = None
    ) -> None:
        """Raise :class:`AheadError` naming the events whose ``end`` lies more than
        ``max_ahead`` beyond the clock; change nothing. The clock is the later of the
        stream's clock and ``now`` (the wall clock; without both, the batch's earliest
        event); within the batch each event taken moves it, in time order, so a batch
        may span any time in steps of at most ``max_ahead``. ``latest``: the batch's
        latest ``end`` when the caller knows it (a batch in ``(end, start)`` order: its
        last event's), which spares the pass over the events in the common case (3% of
        the server's CPU on bare sequences). O(n), O(1) with ``latest``, O(n log n) when
        some event is beyond the first bound."""
        max_ahead = self.max_ahead
        if max_ahead == math.inf or not events:
            return
        ref = self.observed
        from_wall = False
        if now is not None and now > ref:
            ref, from_wall = now, True
        # The latest end in one pass in C (no generator step per event): the common case.
        if ref != NEG_INF and (max(map(_END, events)) if latest is None else latest) <= ref + max_ahead:
            return
        order = sorted(range(len(events)), key=lambda i: (events[i].end, events[i].start))
        if ref == NEG_INF:
            ref = events[order[0]].end
        bad: list[int] = []
        for k, i in enumerate(order):
            end = events[i].end
            if end > ref + max_ahead:
                bad = sorted(order[k:])  # every later one is further ahead still
                break
            if end > ref:
                ref, from_wall = end, False
        if not bad:
            return
        first = events[bad[0]]
        name = f"event {bad[0]}" + (f" (id {first.id!r})" if first.id is not None else "")
        more = f"; {len(bad) - 1} more events of the batch are too" if len(bad) > 1 else ""
        raise AheadError(
            f"end {first.end:g} is {first.end - ref:g} s ahead of the {'wall clock' if from_wall else 'clock'} "
            f"({ref:g}); at most {max_ahead:g} s ahead is taken (times are seconds){more}",
            where=name,
            field="end",
            index=bad[0],
            indexes=tuple(bad),
        )

    def check_time(self, t: float, now: float | None = None) -> None:
        """Raise :class:`AheadError` if advancing to ``t`` would move the clock more than
        ``max_ahead`` beyond the later of the stream's clock and ``now``."""
        ref = max(self.observed, now if now is not None else NEG_INF)
        if ref != NEG_INF and t > ref + self.max_ahead:
            clock = "wall clock" if now is not None and now >= self.observed else "clock"
            raise AheadError(
                f"time {t:g} is {t - ref:g} s ahead of the {clock} ({ref:g}); "
                f"at most {self.max_ahead:g} s ahead is taken",
                field="time",
            )

    # ------------------------------------------------------------------ changing

    def process(self, events: Sequence[Event]) -> tuple[list[Match], Late]:
        """Take events in arrival order: the matches released now, and the events that
        reached the engine late (with ``L = 0`` every event goes straight through)."""
        return self._apply(self.reorder.push(events))

    def advance_time(self, t: float) -> list[Match]:
        """The clock reaches ``t``: release what that passes, then move the released
        clock to ``max(observed, t) - lateness`` (``t`` itself without lateness).
        ``advance_time(inf)`` flushes the buffer and every pending match."""
        matches, _ = self._apply(self.reorder.observe(t))
        target = t if not self.lateness else self.reorder.observed - self.lateness
        matches += self.engine.advance_time(target)
        return matches

    def set_lateness(self, lateness: float) -> list[Match]:
        """Change the allowed lateness; a smaller one releases what it no longer holds."""
        matches, _ = self._apply(self.reorder.set_lateness(lateness))
        return matches

    def catch_up(self, observed: float, released: float) -> list[Match]:
        """Bring both clocks up to values a trimmed log no longer shows (a service's
        rebuild): what that releases is processed, and the released clock advanced."""
        matches, _ = self._apply(self.reorder.observe(observed))
        if released > self.engine.clock:
            matches += self.engine.advance_time(released)
        return matches

    def _apply(self, released: list[Event]) -> tuple[list[Match], Late]:
        late = Late()
        if not released:
            return [], late
        # Local names: this loop runs once per event.
        events, by = late.events, late.by
        clock = self.engine.clock
        for e in released:
            end = e.end
            if end < clock:
                events.append(e)
                by.append(clock - end)
            elif end > clock:
                clock = end
        return self.engine.process(released), late

    def _check(self) -> None:
        self.reorder._check()
        assert self.observed >= self.released
