"""The shared instance queue (SIQ) of one event class (SCEMon §4).

Instances are kept once, in arrival order, whatever number of queries use them. A hash
index gives each source's most recent instance and every instance points back to the
previous instance of the same source (the per-source back chain), so a probe touches only
that source's instances.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from ecq.event import Event

__all__ = ["SIQ"]


class SIQ:
    """Arrival-ordered instances of one class, with a per-source index and back chain."""

    __slots__ = ("queue", "last")

    def __init__(self) -> None:
        self.queue: deque[Event] = deque()
        self.last: dict[str | int, Event] = {}

    def __len__(self) -> int:
        return len(self.queue)

    def insert(self, event: Event) -> None:
        """Append ``event`` and make it its source's most recent instance. O(1)."""
        last = self.last
        event.prev = last.get(event.src)
        last[event.src] = event
        self.queue.append(event)

    def chain(self, src: str | int, horizon: float) -> list[Event]:
        """The source's instances with ``start >= horizon``, most recent first. O(chain)."""
        out = []
        e = self.last.get(src)
        while e is not None:
            if e.start >= horizon:
                out.append(e)
            e = e.prev
        return out

    def clean(self, horizon: float) -> int:
        """Drop instances from the front while their ``start`` is below ``horizon``.

        Instances further back that are already below the horizon are invisible to
        probes and go when they reach the front; a dropped instance is unlinked from its
        chain so nothing older stays reachable. Returns how many were dropped.
        """
        queue = self.queue
        last = self.last
        dropped = 0
        while queue and queue[0].start < horizon:
            e = queue.popleft()
            e.prev = None
            e.pmb = None
            if last.get(e.src) is e:
                del last[e.src]
            dropped += 1
        return dropped

    def __iter__(self) -> Iterator[Event]:
        return iter(self.queue)

    def _check(self) -> None:
        moments = [e.moment for e in self.queue]
        assert moments == sorted(moments), "SIQ must be in arrival order"
        for src, e in self.last.items():
            assert e.src == src
            prev = e.prev
            while prev is not None:
                assert prev.src == src and prev.moment <= e.moment
                e, prev = prev, prev.prev
