"""Partition values (docs/semantics.md, "Partitions"): what a keyed network sees of an
event, and what a keyed query's match shows as its ``src``.

A network partitioned by a key other than the source sees each event as a *view* whose
``src`` is the event's value of the key: the value itself for one attribute, a tuple
for several, ``None`` for NONE. Values compare by type and value (``1``, ``1.0``,
``true`` and ``"1"`` are four partitions): integers and strings are used as they are
(the common case, and they never equal a value of another type used so), other values
are wrapped in :class:`Typed`, which :func:`output_src` unwraps for the match.
"""

from __future__ import annotations

from typing import Any

from ecq.event import Event

__all__ = ["Typed", "key_value", "output_src", "view", "placeholder", "FIELDS", "UNSEEN", "NO_ATTRS"]

# Names read from the event's own fields when ``attrs`` lacks them (as conditions do).
FIELDS = frozenset({"start", "end", "src", "type", "prob"})

# The class of a placeholder for an event a keyed network cannot see (no network has
# it: class names are never empty), and its attributes.
UNSEEN = ""
NO_ATTRS: dict[str, Any] = {}


class Typed:
    """A partition value that Python would otherwise equate with one of another type
    (``1.0 == 1 == True``): equal only to the same type and value."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return type(other) is Typed and type(other.value) is type(self.value) and other.value == self.value

    def __hash__(self) -> int:
        return hash((type(self.value).__name__, self.value))

    def __repr__(self) -> str:
        return f"Typed({self.value!r})"


def _typed(value: Any) -> Any:
    kind = type(value)
    return value if kind is int or kind is str else Typed(value)


def _read(e: Event, attr: str) -> Any:
    attrs = e.attrs
    if attr in attrs:
        return attrs[attr]
    if attr in FIELDS:
        return getattr(e, attr)
    return _ABSENT


_ABSENT = object()


def key_value(e: Event, key: tuple[str, ...], keep_src: bool = False) -> tuple[Any, dict[str, Any]] | None:
    """``(src, attrs)`` of the view of ``e`` for ``key``, or None when ``e`` lacks one of
    the key's attributes (it is not seen). ``keep_src``: some query of the key reads
    ``src``, so the view's ``attrs`` carry the event's own source under that name."""
    if len(key) == 1:
        value = _read(e, key[0])
        if value is _ABSENT:
            return None
        src: Any = _typed(value)
    elif not key:
        src = None
    else:
        values = []
        for attr in key:
            value = _read(e, attr)
            if value is _ABSENT:
                return None
            values.append(_typed(value))
        src = tuple(values)
    attrs = e.attrs
    if keep_src and "src" not in attrs:
        attrs = {**attrs, "src": e.src}
    return src, attrs


def output_src(src: Any) -> Any:
    """A match's ``src`` as users see it: the key's value(s), unwrapped."""
    kind = type(src)
    if kind is Typed:
        return src.value
    if kind is tuple:
        return tuple(v.value if type(v) is Typed else v for v in src)
    return src


def view(e: Event, src: Any, type: str, attrs: dict[str, Any]) -> Event:
    """A fresh, unstamped event with ``e``'s times, probability and id, and ``src``,
    ``type`` and ``attrs`` (shared, never copied: the engine does not change an event's
    attributes). What :class:`Event` makes, without its conversions (``e``'s fields
    are converted already): a view per event per key is on the hot path."""
    v = _new(Event)
    v.src = src
    v.type = type
    v.start = e.start
    v.end = e.end
    v.attrs = attrs
    v.prob = e.prob
    v.id = e.id
    v.arrival = -1
    v.moment = -1
    v.parts = None
    v.flat = None
    v.prims = None
    v.prev = None
    v.pmb = None
    return v


def placeholder(e: Event) -> Event:
    """What a keyed network sees of an event it cannot see (another key's class, no key,
    or a key value another shard owns): ``e``'s times, probability and id, no source,
    no attributes, a class of no network. It only moves the clock."""
    return view(e, None, UNSEEN, NO_ATTRS)


_new = Event.__new__
