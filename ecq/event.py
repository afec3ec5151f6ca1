"""Event instances: the ``<src, type, start, end, attrs, prob>`` tuple of docs/semantics.md §1.

An :class:`Event` is validated once, when it enters (``Event.from_dict``), so the hot
path never re-checks it. The engine stamps ``arrival`` (its processing position).

Its fields live in its base class: the compiled kernel's event struct when the kernel
is built (``ecq.kernel._events.EventBase``: the kernel reads them in C, Python reads
them as fast as slots), else a pure class with the same slots (``SlotFields``). Either
way ``Event`` is this class, with these methods.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ecq.errors import EventError
from ecq.kernel.select import event_base

__all__ = ["Event", "AttrValue", "FIELDS"]

AttrValue = int | float | str | bool

_FIELDS = frozenset({"src", "type", "start", "end", "attrs", "prob", "id"})

# Every field of an event, in the order the compiled kernel's struct has them.
FIELDS = (
    "src",
    "type",
    "start",
    "end",
    "prob",
    "arrival",
    "moment",
    "prev",
    "pmb",
    "attrs",
    "id",
    "parts",
    "flat",
    "prims",
)


class SlotFields:
    """The fields of an event as slots: ``Event``'s base when the kernel is not compiled."""

    __slots__ = FIELDS


if TYPE_CHECKING:
    _Fields = SlotFields
else:
    _Fields = event_base() or SlotFields


class Event(_Fields):
    """One primitive (or derived) event instance.

    ``arrival`` is -1 until the engine processes the event; then it is the event's
    0-based arrival index, which orders events that the engine saw.
    """

    __slots__ = ()

    if TYPE_CHECKING:
        src: str | int
        type: str
        start: float
        end: float
        attrs: dict[str, AttrValue]
        prob: float
        id: str | int | None
        arrival: int
        moment: int
        parts: Any
        flat: list[Event] | None
        prims: frozenset[int] | None
        prev: Event | None
        pmb: Any

    def __init__(
        self,
        src: str | int,
        type: str,
        start: float,
        end: float | None = None,
        attrs: Mapping[str, AttrValue] | None = None,
        prob: float = 1.0,
        id: str | int | None = None,
    ) -> None:
        self.src = src
        self.type = type
        self.start = float(start)
        self.end = float(start) if end is None else float(end)
        self.attrs = dict(attrs) if attrs else {}
        self.prob = float(prob)
        self.id = id
        self.arrival = -1
        # The engine's moment of arrival: 2*op+1 for an event, 2*op for what the clock
        # makes at the start of an op (docs/semantics.md). Sequences need strictly
        # increasing moments.
        self.moment = -1
        # Derived events (a sub-pattern's or a query's match): ``parts`` is the match's
        # ``events`` entries, ``flat`` its primitive events (what an equivalence test
        # reads; None for an ``@name`` instance, read as itself) and ``prims`` their
        # arrival indexes. All None for a primitive event.
        self.parts = None
        self.flat = None
        self.prims = None
        # Set by the kernel that stores the event: the previous stored instance of the
        # same class and source (the SIQ's per-source back chain), and its PMB.
        self.prev = None
        self.pmb = None

    def __repr__(self) -> str:
        name = self.id if self.id is not None else f"#{self.arrival}"
        return f"Event({name}, {self.type}, src={self.src!r}, [{self.start:g},{self.end:g}])"

    def __reduce__(self) -> tuple[Any, ...]:
        # What the event is, without the engine's links (its chain and PMB): a pickled
        # or copied event is an event, not a piece of a network.
        state = {name: getattr(self, name) for name in ("arrival", "moment", "parts", "flat", "prims")}
        return (Event, (self.src, self.type, self.start, self.end, self.attrs, self.prob, self.id), state)

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        """The event in the form ``from_dict`` reads (docs/semantics.md §1)."""
        out: dict[str, Any] = {"src": self.src, "type": self.type, "start": self.start, "end": self.end}
        if self.attrs:
            out["attrs"] = dict(self.attrs)
        if self.prob != 1.0:
            out["prob"] = self.prob
        if self.id is not None:
            out["id"] = self.id
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str | None = None) -> Event:
        """Validate one event given as a mapping; ``where`` names it in errors
        (``"line 7"``, ``"event 3"``). Raises :class:`EventError` naming the field."""
        if not isinstance(data, Mapping):
            raise EventError(f"an event must be an object, got {_kind(data)}", where)
        unknown = [k for k in data if k not in _FIELDS]
        if unknown:
            raise EventError(f"unknown field (expected {', '.join(sorted(_FIELDS))})", where, str(unknown[0]))
        if "src" not in data or data["src"] is None:
            raise EventError("missing", where, "src")
        src = data["src"]
        if isinstance(src, bool) or not isinstance(src, (str, int)):
            raise EventError(f"must be a string or an integer, got {_kind(src)}", where, "src")
        if "type" not in data or data["type"] is None:
            raise EventError("missing", where, "type")
        etype = data["type"]
        if not isinstance(etype, str) or not etype:
            raise EventError(f"must be a non-empty string, got {_kind(etype)}", where, "type")
        if "start" not in data or data["start"] is None:
            raise EventError("missing", where, "start")
        start = _time(data["start"], where, "start")
        end = start if data.get("end") is None else _time(data["end"], where, "end")
        if end < start:
            raise EventError(f"end {end:g} is before start {start:g}", where, "end")
        attrs = data.get("attrs")
        if attrs is None:
            attrs = {}
        elif not isinstance(attrs, Mapping):
            raise EventError(f"must be a flat object, got {_kind(attrs)}", where, "attrs")
        else:
            for key, value in attrs.items():
                if not isinstance(key, str):
                    raise EventError("attribute names must be strings", where, "attrs")
                if isinstance(value, float) and not math.isfinite(value):
                    raise EventError(f"attribute {key!r} is not a finite number", where, "attrs")
                if not isinstance(value, (str, int, float, bool)):
                    raise EventError(
                        f"attribute {key!r} must be a number, string or boolean, got {_kind(value)}",
                        where,
                        "attrs",
                    )
        prob = data.get("prob", 1.0)
        if prob is None:
            prob = 1.0
        if isinstance(prob, bool) or not isinstance(prob, (int, float)) or not (0.0 < prob <= 1.0):
            raise EventError(f"must be a number in (0, 1], got {prob!r}", where, "prob")
        eid = data.get("id")
        if eid is not None and (isinstance(eid, bool) or not isinstance(eid, (str, int))):
            raise EventError(f"must be a string or an integer, got {_kind(eid)}", where, "id")
        return cls(src, etype, start, end, attrs, float(prob), eid)


def _time(value: Any, where: str | None, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EventError(f"must be a number of seconds, got {_kind(value)} {value!r}", where, field)
    number = float(value)
    if not math.isfinite(number):
        raise EventError(f"must be a finite number, got {value!r}", where, field)
    return number


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__
