"""A complete match of one query (docs/semantics.md §9).

``Match`` is the compiled kernel's class (``ecq.kernel._events.Match``) when it is
built (and ``SCEMON_PURE`` is not set), else the pure-Python class below (``PyMatch``).
Both have the same constructor, attributes and methods; the methods are the functions
here. The compiled one keeps its times, probability and numbers as C values and comes
from a free list, which saves the engine a few allocations per match
(docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ecq.event import AttrValue, Event
from ecq.kernel.select import compiled_match

__all__ = [
    "Match",
    "PyMatch",
    "EventRef",
    "event_ids",
    "arrivals",
    "to_dict",
    "write_block",
    "describe",
    "fields",
]

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
        return describe(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), fields(self))

    def event_ids(self, name: Callable[[Event], Any] | None = None) -> list[Any]:
        """``events`` with each event replaced by ``name(event)`` (default: its ``id``, or
        its arrival index when it has none), keeping the nesting of groups."""
        return event_ids(self, name)

    def arrivals(self) -> list[Any]:
        """``events`` as arrival indexes (nested the same way); what tests compare."""
        return arrivals(self)

    def to_dict(self, name: Callable[[Event], Any] | None = None) -> dict[str, Any]:
        """The wire form of §9."""
        return to_dict(self, name)


PyMatch = Match  # the pure-Python class, whichever ``Match`` is


def _arrival(e: Event) -> Any:
    return e.arrival


def arrivals(m: Match) -> list[Any]:
    """``m.arrivals()``."""
    return event_ids(m, _arrival)


def describe(m: Match) -> str:
    """``repr`` of a match."""
    return f"Match({m.query!r}, src={m.src!r}, seq={m.seq}, events={m.events!r})"


def fields(m: Match) -> tuple[Any, ...]:
    """The constructor's arguments that rebuild ``m`` (pickling, copying)."""
    return (m.query, m.src, m.start, m.end, m.events, m.attrs, m.prob, m.seq, m.trigger)


def event_ids(m: Match, name: Callable[[Event], Any] | None = None) -> list[Any]:
    """``m.event_ids(name)``."""
    if name is None:
        # The common case first: primitive events only, named by id (or arrival).
        ids = []
        for e in m.events:
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

    return [conv(x) for x in m.events]


def to_dict(m: Match, name: Callable[[Event], Any] | None = None) -> dict[str, Any]:
    """``m.to_dict(name)``: the wire form of §9."""
    return {
        "query": m.query,
        "src": m.src,
        "start": m.start,
        "end": m.end,
        "events": event_ids(m, name),
        "attrs": dict(m.attrs),
        "prob": m.prob,
        "seq": m.seq,
    }


def write_block(matches: list[Match], first: int, dumps: Callable[[Any], str]) -> tuple[str, list[int]]:
    """The wire text of ``matches`` numbered ``first, first + 1, ...``: one JSON array of
    each match's ``to_dict()`` (its ``seq`` set) as ``dumps`` writes it, and where each
    match starts in it and one start more (the text's length; 1 for no match). The
    compiled kernel's ``BlockText`` writes the same text without a dict per match."""
    texts = []
    for seq, m in enumerate(matches, first):
        wire = m.to_dict()
        wire["seq"] = seq
        texts.append(dumps(wire))
    starts = [1]
    for text in texts:
        starts.append(starts[-1] + len(text) + 1)
    return "[" + ",".join(texts) + "]", starts


def write_lines(matches: list[Match], dumps: Callable[[Any], str]) -> bytes:
    """``matches`` as JSON Lines in UTF-8, as ``scemon replay`` writes them: each one's
    wire form (``to_dict()``, its own ``seq``) as ``dumps`` writes it, and a newline.
    The compiled kernel's ``BlockText`` (``lines``) writes the same bytes without a
    dict per match."""
    return "".join([dumps(m.to_dict()) + "\n" for m in matches]).encode()


if not TYPE_CHECKING:
    Match = compiled_match() or PyMatch
