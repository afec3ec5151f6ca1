"""Partial matching blocks (SCEMon §4, §5.3).

A stored instance's :class:`PMB` says which queries' partial matches the instance
extends. Queries are bits of Python ints, so extending thousands of queries at once is a
few big-integer operations instead of a loop over queries.

- ``init``: bits of the sequence queries whose *first* component the instance can start
  (it passed that component's filter). This is **PMB reduction**: initial entries carry
  no pointers and their start time is the instance's own start, so one int stands in
  for them all.
- ``entries[i]``: for sequence position ``i >= 1``, a list of ``(t_start, bits)``: the
  queries for which a partial match ending with this instance at position ``i`` exists,
  grouped by the *latest* start time such a partial match can have. Groups are disjoint.
- ``cpass[k]``: conjunction queries whose component ``k`` this instance can fill.
"""

from __future__ import annotations

__all__ = ["PMB", "resolve_latest"]


class PMB:
    """The partial matching block of one stored instance."""

    __slots__ = ("init", "entries", "cpass")

    def __init__(
        self, init: int, entries: dict[int, list[tuple[float, int]]] | None, cpass: dict[int, int] | None
    ):
        self.init = init
        self.entries = entries
        self.cpass = cpass

    def size(self) -> int:
        """Number of PMatch groups stored (the reduced initial entry counts as one)."""
        n = 1 if self.init else 0
        if self.entries:
            n += sum(len(groups) for groups in self.entries.values())
        if self.cpass:
            n += len(self.cpass)
        return n

    def extends(self, position: int, bit: int, bound: float, start: float) -> bool:
        """Whether a partial match of the query ``bit`` ends here at ``position`` with a
        start time ``>= bound``. O(groups)."""
        if position == 0:
            return bool(self.init & bit) and start >= bound
        groups = self.entries.get(position) if self.entries else None
        if not groups:
            return False
        for t, bits in groups:
            if bits & bit:
                return t >= bound
        return False

    def _check(self) -> None:
        if self.entries:
            for position, groups in self.entries.items():
                assert position >= 1
                seen = 0
                for _t, bits in groups:
                    assert bits > 0
                    assert not bits & seen, "PMatch groups must be disjoint"
                    seen |= bits


def resolve_latest(groups: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """Merge candidate ``(t_start, bits)`` groups keeping, for each query bit, only the
    latest start time: the disjoint groups a PMB stores. O(g log g)."""
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
