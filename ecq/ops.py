"""Time and numbering, the same for the shared engine and the separate-processing
baseline (docs/semantics.md, "Moments and the order of emitted matches").

Every call that changes an engine is an *op*: each processed event gets its arrival index
and moment ``2*op+1`` (``2*op`` is the op's phase 0, when the clock releases trailing
negations); the clock is the largest ``end`` seen or a later ``advance_time``; every
match gets the next ``seq``. Subclasses say what an event op and a clock release do.
"""

from __future__ import annotations

from collections.abc import Iterable

from ecq.event import Event
from ecq.match import Match
from ecq.matching.emission import Emission, matches_of

__all__ = ["OpClock"]

NEG_INF = float("-inf")


class OpClock:
    """The op counter, arrival indexes, clock, ``seq`` and periodic cleaning."""

    def __init__(self, clean_every: int) -> None:
        self.clock = NEG_INF
        self.arrivals = 0
        self.ops = 0
        self.next_seq = 0
        self.clean_every = clean_every
        self.since_clean = 0

    # What the engines differ in.

    def _on_event(self, e: Event, clock_before: float, clock: float) -> list[Emission] | None:
        """Phase 0 then phase 1 of one event op; the emissions, or None."""
        raise NotImplementedError

    def _fire(
        self, moment: int, clock_before: float, clock: float, arrival: int, out: list[Emission]
    ) -> None:
        """Phase 0: release the trailing-negation matches whose deadline ``clock`` passed."""
        raise NotImplementedError

    def clean(self) -> int:
        """Physical cleaning; returns the number of dropped instances."""
        raise NotImplementedError

    # What they share.

    def process(self, events: Iterable[Event]) -> list[Match]:
        """Process events in order; returns the matches they release, in emission order.
        Events are stamped with their arrival index and moment."""
        return self.step_events(events)

    def step_events(self, events: Iterable[Event]) -> list[Match]:
        """:meth:`process`, one event op at a time through :meth:`_on_event`."""
        out: list[Match] = []
        on_event = self._on_event
        for e in events:
            if e.arrival >= 0:
                e = Event(e.src, e.type, e.start, e.end, e.attrs, e.prob, e.id)
            self.ops += 1
            e.arrival = self.arrivals
            e.moment = 2 * self.ops + 1
            self.arrivals += 1
            before = self.clock
            if e.end > before:
                self.clock = e.end
            emitted = on_event(e, before, self.clock)
            if emitted:
                self.emit(emitted, e.arrival, out)
            self.since_clean += 1
            if self.since_clean >= self.clean_every:
                self.clean()
        return out

    def advance_time(self, t: float) -> list[Match]:
        """Move the clock to ``t`` (if later): matches waiting for the clock (trailing
        negation) whose deadline it passes are emitted."""
        self.ops += 1
        before = self.clock
        if t > before:
            self.clock = t
        emitted: list[Emission] = []
        self._fire(2 * self.ops, before, self.clock, self.arrivals, emitted)
        out: list[Match] = []
        if emitted:
            self.emit(emitted, self.arrivals, out)
        return out

    def emit(self, emitted: list[Emission], trigger: int, out: list[Match]) -> None:
        """The matches of one op's emissions, numbered from ``next_seq``, onto ``out``."""
        matches = matches_of(emitted, trigger, self.next_seq)
        self.next_seq += len(matches)
        out.extend(matches)
