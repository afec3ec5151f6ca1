"""Partial matching blocks (SCEMon §4, §5.3).

A stored instance's :class:`PMB` says which queries' partial matches the instance
extends. Queries are bits of Python ints, so extending thousands of queries at once is a
few big-integer operations instead of a loop over queries.

- ``init``: bits of the sequence queries whose *first* component the instance can start
  (it passed that component's filter). This is **PMB reduction**: initial entries carry
  no pointers and their start time is the instance's own start, so one int stands in
  for them all. Without reduction (an ablation of the benchmark) they are stored as
  ``entries[0]`` instead.
- ``entries[i]``: for sequence position ``i``, a list of ``(t_start, bits)``: the queries
  for which a partial match ending with this instance at position ``i`` exists, grouped
  by the *latest* start time such a partial match can have (an upper bound: it is used
  to prune, and a match is always verified when it is assembled). Groups are disjoint.
"""

from __future__ import annotations

__all__ = ["PMB", "resolve_latest", "merge_latest"]


class PMB:
    """The partial matching block of one stored instance."""

    __slots__ = ("init", "entries")

    def __init__(self, init: int, entries: dict[int, list[tuple[float, int]]] | None) -> None:
        self.init = init
        self.entries = entries

    def size(self) -> int:
        """Number of PMatch groups stored (the reduced initial entry counts as one)."""
        n = 1 if self.init else 0
        if self.entries:
            n += sum(len(groups) for groups in self.entries.values())
        return n

    def latest(self, position: int, bit: int, start: float) -> float | None:
        """The latest start of a partial match of query ``bit`` ending here at
        ``position``, or None. O(groups)."""
        if position == 0 and self.init & bit:
            return start
        groups = self.entries.get(position) if self.entries else None
        if groups:
            for t, bits in groups:
                if bits & bit:
                    return t
        return None

    def extends(self, position: int, bit: int, bound: float, start: float) -> bool:
        """Whether a partial match of query ``bit`` ends here at ``position`` with a
        start time ``>= bound``. O(groups)."""
        t = self.latest(position, bit, start)
        return t is not None and t >= bound

    def _check(self) -> None:
        if self.entries:
            for position, groups in self.entries.items():
                assert position >= 0
                seen = 0
                for _t, bits in groups:
                    assert bits > 0
                    assert not bits & seen, "PMatch groups must be disjoint"
                    seen |= bits


def resolve_latest(groups: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """Merge candidate ``(t_start, bits)`` groups keeping, for each query bit, only the
    latest start time: the disjoint groups a PMB stores, latest first. O(g log g)."""
    if len(groups) <= 1:
        return groups
    groups.sort(key=lambda g: -g[0])
    out: list[tuple[float, int]] = []
    claimed = 0
    for t, bits in groups:
        fresh = bits & ~claimed
        if fresh:
            if out and out[-1][0] == t:
                out[-1] = (t, out[-1][1] | fresh)
            else:
                out.append((t, fresh))
            claimed |= fresh
    return out


def merge_latest(groups: list[tuple[float, int]], new: list[tuple[float, int]], cutoff: float) -> None:
    """Fold the disjoint latest-first groups ``new`` into ``groups`` in place, keeping
    each query bit only with its latest start; groups older than ``cutoff`` go. One
    two-pointer pass: O(len(groups) + len(new)) big-int operations."""
    out: list[tuple[float, int]] = []
    i = j = 0
    n_old, n_new = len(groups), len(new)
    claimed_new = 0  # bits of the new groups placed so far (all at later or equal starts)
    claimed_old = 0  # bits of the old groups placed so far
    while i < n_old or j < n_new:
        if j < n_new and (i >= n_old or new[j][0] >= groups[i][0]):
            t, bits = new[j]
            j += 1
            bits &= ~claimed_old
            claimed_new |= bits
        else:
            t, bits = groups[i]
            i += 1
            bits &= ~claimed_new
            claimed_old |= bits
        if t < cutoff:
            break
        if bits:
            if out and out[-1][0] == t:
                out[-1] = (t, out[-1][1] | bits)
            else:
                out.append((t, bits))
    groups[:] = out
