"""Window masks: for each distinct window of the registered nodes, the nodes whose
window is at least that long, so "which queries admit this span" is a bisection and a
lookup instead of a loop over queries. Remade whenever a node comes or goes."""

from __future__ import annotations

from bisect import bisect_left

__all__ = ["Windows"]

NEG_INF = float("-inf")


class Windows:
    """The nodes of each window bound (``masks[j]``: the nodes whose window is at least
    ``bounds[j]``), from the bits of the nodes of each window. Immutable."""

    __slots__ = ("bounds", "masks", "least", "most")

    def __init__(self, by_window: dict[float, int] | None = None) -> None:
        by_window = by_window or {}
        self.bounds: tuple[float, ...] = tuple(sorted(by_window))
        cum = 0
        masks = [0] * len(self.bounds)
        for j in range(len(self.bounds) - 1, -1, -1):
            cum |= by_window[self.bounds[j]]
            masks[j] = cum
        self.masks: tuple[int, ...] = tuple(masks)
        # Spans up to the smallest window pass every node's window: no mask needed.
        self.least = self.bounds[0] if self.bounds else NEG_INF
        self.most = self.bounds[-1] if self.bounds else NEG_INF

    def mask(self, span: float) -> int:
        """Nodes whose window admits ``span`` (``span <= window``). O(log windows)."""
        j = bisect_left(self.bounds, span)
        return self.masks[j] if j < len(self.masks) else 0
