"""The drop horizon of one event class (docs/semantics.md, "Which events a query can
see"): instances whose ``start`` is below it are dropped for good.

``W(X)`` is the largest window of the storing queries that use class ``X``; the horizon
is the largest value ``clock - W(X)`` has had at any check since the class's queue was
created. Between two changes of ``W(X)`` that maximum is the current ``clock - W(X)``,
so only the value reached before each change (``frozen``) needs remembering. O(1).
"""

from __future__ import annotations

from collections import Counter

__all__ = ["Horizon", "NEG_INF"]

NEG_INF = float("-inf")


class Horizon:
    """The windows of a class's storing queries and the horizon they have produced."""

    __slots__ = ("windows", "window", "frozen")

    def __init__(self) -> None:
        self.windows: Counter[float] = Counter()
        self.window = NEG_INF
        self.frozen = NEG_INF

    def at(self, clock: float) -> float:
        """The horizon now: instances with ``start`` below it are dropped."""
        moving = clock - self.window
        return moving if moving > self.frozen else self.frozen

    def set_windows(self, clock: float, add: float | None = None, remove: float | None = None) -> None:
        """A storing query with window ``add`` started, or ``remove`` stopped, using the
        class; freezes the horizon reached so far before ``window`` moves. When no
        storing query is left, every instance is dropped and a later query starts
        afresh (it sees only later events anyway)."""
        window = self.window
        if add is not None and remove is None and window != NEG_INF and add <= window:
            if self.frozen >= clock - window:
                # Neither the horizon nor the largest window moves (the common case when
                # a batch of queries registers at one clock): only the count.
                self.windows[add] += 1
                return
        if self.window != NEG_INF:
            self.frozen = self.at(clock)
        window = self.window
        if add is not None:
            self.windows[add] += 1
            if add > window or window == NEG_INF:
                window = add
        if remove is not None:
            self.windows[remove] -= 1
            if self.windows[remove] <= 0:
                del self.windows[remove]
                if remove == window:
                    # The largest window went: the next one (a scan, only then; adding
                    # one is O(1), a thousandth of a bulk registration's time otherwise).
                    window = max(self.windows) if self.windows else NEG_INF
        self.window = window
        if self.window == NEG_INF:
            self.frozen = NEG_INF

    def add_windows(self, clock: float, adds: list[float]) -> None:
        """:meth:`set_windows` with ``add`` each of ``adds`` in turn, at one ``clock``
        (a bulk registration's), in O(len(adds)) C steps rather than a call each. After
        the first, each add only freezes ``clock - window`` (a no-op past the first:
        ``window`` only grows) and raises ``window`` to it."""
        if not adds:
            return
        self.set_windows(clock, add=adds[0])
        if len(adds) == 1:
            return
        moving = clock - self.window
        if moving > self.frozen:
            self.frozen = moving
        rest = adds[1:]
        self.windows.update(rest)
        top = max(rest)
        if top > self.window:
            self.window = top
