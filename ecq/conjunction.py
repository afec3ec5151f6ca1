"""Conjunctions with query bitsets: which of thousands of conjunctions an arriving
instance may complete, from one look at its source's *presence*, before any of them is
assembled.

A conjunction ``AND(E1, ..., En) WITHIN T`` is complete when the last of its events
arrives (docs/semantics.md §4), so an instance ``x`` of class ``X`` can complete query
``q`` only if, for every other positive component of ``q``, the source holds an instance
``y`` of its class with ``y.start >= x.end - T`` (the match spans ``max(end) -
min(start) <= T``). The kernel keeps, per source, the latest start of a stored instance
of each class that conjunctions use (the *presence*, one number per class); for the
arriving ``x`` the queries whose every other class is present within their window are
found with query bitsets, whatever their number:

- ``ECQ[X]`` keeps, for the conjunctions ``x`` may complete, per class ``Y`` the
  queries that need an instance of ``Y`` besides ``x`` (``cnj_need``) and how many
  classes each needs, as a binary number in bit slices (``cnj_count``: slice ``j``
  holds the queries whose count has bit ``j``);
- each class ``Y`` present at the source adds ``cnj_need[Y] & windows.mask(x.end -
  t_Y)`` to a bit-sliced counter; the queries whose count equals their need are the
  candidates: O(classes present × slices) big-integer operations.

A conjunction with an ``ANY`` component, or components whose class sets overlap, is not
counted (``cnj_loose``): it is always a candidate when ``x``'s class is one of its.
The test is an upper bound (it ignores filters, the registration moment and how many
instances a class holds); the assembly (``ecq.composite``) decides, as it does for
sequences after their summaries. One probe of the source's chain of each class serves
every candidate (``ChainProbe``), the paper's sub-pattern sharing for conjunctions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ecq.ecq import ECQ
    from ecq.qstate import QState
    from ecq.windows import Windows

__all__ = ["Presence", "by_presence", "link", "unlink", "candidates", "note", "prune"]

# Per source: the latest start of a stored instance of each class conjunctions use.
Presence = dict[str, float]


def by_presence(qs: QState) -> bool:
    """Whether this node's candidates come from the presence count: a conjunction of
    primitive classes (a sub-pattern or ``@name`` component is found as before, one
    node at a time, from ``ECQ.general_final``)."""
    cq = qs.cq
    return cq.kind == "and" and all(
        c.sub is None and not any(x.startswith("@") for x in c.classes) for c in cq.comps
    )


def _needs(qs: QState, cls: str) -> tuple[frozenset[str], bool]:
    """The classes ``qs`` needs besides an arriving instance of ``cls``, and whether
    the count can say so (single-class components only)."""
    cq = qs.cq
    comps = [cq.comps[i] for i in cq.positives]
    if any(len(c.classes) != 1 for c in comps):
        return frozenset(), False
    left = Counter(next(iter(c.classes)) for c in comps)
    left[cls] -= 1
    return frozenset(k for k, v in left.items() if v > 0), True


def link(ecq: ECQ, qs: QState) -> None:
    """``qs`` may be completed by instances of ``ecq``'s class. O(classes of qs)."""
    bit = qs.bit
    if ecq.cnj_final & bit:
        return  # a second component of the same class
    ecq.cnj_final |= bit
    need, countable = _needs(qs, ecq.cls)
    if not countable:
        ecq.cnj_loose |= bit
        return
    for cls in need:
        ecq.cnj_need[cls] = ecq.cnj_need.get(cls, 0) | bit
    r, j = len(need), 0
    while r:
        if r & 1:
            while len(ecq.cnj_count) <= j:
                ecq.cnj_count.append(0)
            ecq.cnj_count[j] |= bit
        r >>= 1
        j += 1


def unlink(ecq: ECQ, qs: QState) -> None:
    """Undo :func:`link`. O(classes of ecq's conjunctions)."""
    keep = ~qs.bit
    ecq.cnj_final &= keep
    ecq.cnj_loose &= keep
    for cls in list(ecq.cnj_need):
        left = ecq.cnj_need[cls] & keep
        if left:
            ecq.cnj_need[cls] = left
        else:
            del ecq.cnj_need[cls]
    ecq.cnj_count[:] = [s & keep for s in ecq.cnj_count]
    while ecq.cnj_count and not ecq.cnj_count[-1]:
        ecq.cnj_count.pop()


def candidates(ecq: ECQ, present: Presence | None, end: float, windows: Windows) -> int:
    """The conjunctions an instance of ``ecq``'s class ending at ``end`` may complete,
    given its source's presence. O(classes present × slices)."""
    final = ecq.cnj_final
    loose = ecq.cnj_loose
    slices = ecq.cnj_count
    if not slices:
        # Every countable candidate needs nothing besides the arriving instance.
        return final
    if not present:
        return final & ~_some(slices) | loose
    need = ecq.cnj_need
    least = windows.least
    counts = [0] * len(slices)
    for cls, t in present.items():
        s = need.get(cls)
        if s is None:
            continue
        if end - t > least:
            s &= windows.mask(end - t)
        # counts += s, bit-sliced (a ripple carry through the slices).
        j = 0
        while s and j < len(counts):
            carry = counts[j] & s
            counts[j] ^= s
            s = carry
            j += 1
    same = final & ~loose
    for have, want in zip(counts, slices, strict=True):
        same &= ~(have ^ want)
    return same | loose


def _some(slices: list[int]) -> int:
    out = 0
    for s in slices:
        out |= s
    return out


def note(presence: dict[object, Presence], src: object, cls: str, start: float) -> None:
    """A stored instance of ``cls`` at ``src`` that conjunctions use. O(1)."""
    present = presence.get(src)
    if present is None:
        presence[src] = {cls: start}
    else:
        t = present.get(cls)
        if t is None or start > t:
            present[cls] = start


def prune(presence: dict[object, Presence], horizon: Callable[[str], float]) -> None:
    """Drop the classes whose latest instance at a source is below the class's drop
    horizon (every instance of it there is gone). O(sources x classes present)."""
    empty = []
    for src, present in presence.items():
        for cls in [c for c, t in present.items() if t < horizon(c)]:
            del present[cls]
        if not present:
            empty.append(src)
    for src in empty:
        del presence[src]
