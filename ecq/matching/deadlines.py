"""The matches waiting for the clock (trailing negation, docs/semantics.md §5): one
time-ordered heap for the whole network (the compiled kernel keeps the matches of the
queries whose negation it checks itself in a heap of its own, ``_negation.Waiting``,
and ``Network.fire`` takes the due ones of both).

A match of ``SEQ(A, B, !C) WITHIN T`` is selected when its last positive event arrives
and waits until the clock first exceeds ``start + T``; only then is it known that no
``c`` blocks it. Every op asks whether some deadline has passed, so the earliest one
must be at hand, and the due matches must come out without looking at the others:
a heap keyed by deadline gives both (O(log n) per match in and out, O(1) to read the
earliest), where a list per query had every op scan every waiting match.

A query that is unregistered drops its waiting matches: they stay in the heap, marked
dead through their node (``QState.live``), and are skipped when they come out.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ecq.matching.candidate import Cand
    from ecq.structures.qstate import QState

__all__ = ["Deadlines"]

INF = float("inf")


class Deadlines:
    """Waiting matches ``(deadline, node, candidate)`` in deadline order."""

    __slots__ = ("heap", "count")

    def __init__(self) -> None:
        # (deadline, tie-breaker, node, candidate): the counter keeps equal deadlines in
        # the order they came and spares comparing nodes.
        self.heap: list[tuple[float, int, QState, Cand]] = []
        self.count = 0

    def __len__(self) -> int:
        """Entries held, dead ones included. O(1)."""
        return len(self.heap)

    @property
    def earliest(self) -> float:
        """The earliest deadline held (infinity when none). O(1)."""
        heap = self.heap
        return heap[0][0] if heap else INF

    def add(self, deadline: float, qs: QState, cand: Cand) -> None:
        """A match of ``qs`` waits until the clock exceeds ``deadline``. O(log n)."""
        self.count += 1
        qs.waiting += 1
        heapq.heappush(self.heap, (deadline, self.count, qs, cand))

    def due(self, clock: float) -> list[tuple[QState, Cand]]:
        """The live matches whose deadline ``clock`` exceeds, taken out, in deadline
        order. O(k log n) for k entries taken out."""
        heap = self.heap
        out: list[tuple[QState, Cand]] = []
        pop = heapq.heappop
        while heap and clock > heap[0][0]:
            _, _, qs, cand = pop(heap)
            if qs.live:
                qs.waiting -= 1
                out.append((qs, cand))
        return out

    def drop_dead(self) -> None:
        """Take dead entries off the top, so that :attr:`earliest` is a live one's
        (the rest go as the clock reaches them). O(k log n)."""
        heap = self.heap
        while heap and not heap[0][2].live:
            heapq.heappop(heap)

    def _check(self) -> None:
        heap = self.heap
        for i in range(1, len(heap)):
            assert heap[(i - 1) // 2][:2] <= heap[i][:2], "the deadlines must form a heap"
