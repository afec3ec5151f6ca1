"""A complete match of one query (SEMANTICS.md §9)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ecq.event import AttrValue, Event

__all__ = ["Match", "EventRef"]

# An entry of ``Match.events``: an event, the list of a Kleene group's events, or the
# list of a nested sub-pattern's entries.
EventRef = Any


class Match:
    """One match: the query's name, the common source, the time span, the events in
    component order, the RETURN attributes, the probability and the engine's ``seq``."""

    __slots__ = ("query", "src", "start", "end", "events", "attrs", "prob", "seq", "trigger")

    def __init__(
        self,
        query: str,
        src: str | int,
        start: float,
        end: float,
        events: list[EventRef],
        attrs: dict[str, AttrValue] | None = None,
        prob: float = 1.0,
        seq: int = -1,
        trigger: int = -1,
    ) -> None:
        self.query = query
        self.src = src
        self.start = start
        self.end = end
        self.events = events
        self.attrs = attrs if attrs is not None else {}
        self.prob = prob
        self.seq = seq
        # Arrival index of the event (or clock step) that completed the match.
        self.trigger = trigger

    def __repr__(self) -> str:
        return f"Match({self.query!r}, src={self.src!r}, seq={self.seq}, events={self.events!r})"

    def event_ids(self, name: Callable[[Event], Any] | None = None) -> list[Any]:
        """``events`` with each event replaced by ``name(event)`` (default: its ``id``, or
        its arrival index when it has none), keeping the nesting of groups."""
        if name is None:
            # The common case first: primitive events only, named by id (or arrival).
            ids = []
            for e in self.events:
                if type(e) is not Event or e.parts is not None:
                    break
                ids.append(e.id if e.id is not None else e.arrival)
            else:
                return ids
        namer = name or (lambda e: e.id if e.id is not None else e.arrival)

        def conv(item: EventRef) -> Any:
            if isinstance(item, Event):
                # A derived instance (sub-pattern or @name) shows its own entries.
                return namer(item) if item.parts is None else [conv(x) for x in item.parts]
            return [conv(x) for x in item]

        return [conv(x) for x in self.events]

    def arrivals(self) -> list[Any]:
        """``events`` as arrival indexes (nested the same way); what tests compare."""
        return self.event_ids(lambda e: e.arrival)

    def to_dict(self, name: Callable[[Event], Any] | None = None) -> dict[str, Any]:
        """The wire form of §9."""
        return {
            "query": self.query,
            "src": self.src,
            "start": self.start,
            "end": self.end,
            "events": self.event_ids(name),
            "attrs": dict(self.attrs),
            "prob": self.prob,
            "seq": self.seq,
        }
