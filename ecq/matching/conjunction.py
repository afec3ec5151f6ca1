"""Conjunctions with query bitsets: which of thousands of conjunctions an arriving
instance may complete, from one look at its source's *presence*, before any of them is
assembled.

A conjunction ``AND(E1, ..., En) WITHIN T`` is complete when the last of its events
arrives (docs/semantics.md §4), so an instance ``x`` of class ``X`` can complete query
``q`` only if ``x`` passes the filter of a component of ``q`` of class ``X`` and, for
every other positive component of ``q``, the source holds an instance ``y`` of its class
that passes that component's filter with ``y.start >= x.end - T`` (the match spans
``max(end) - min(start) <= T``). Both tests are query bitsets, whatever the number of
queries:

- ``ECQ[X].cnj_filter`` is a :class:`~ecq.structures.ecq.SlotFilter` over the conjunctions'
  one-event filters on ``X`` (the filter index: one look per event for every query's
  bounds); its passing set for an instance is the instance's *own* bits. An arriving
  ``x`` outside them is never assembled (a profile of the demo workload found 42% of
  the assemblies ending at once on the arriving payment's own bound);
- the kernel keeps, per source and class that conjunctions use, the latest start of a
  stored instance that passed some filter and the union of those instances' own bits
  (the *presence*: two numbers); for the arriving ``x``, ``ECQ[X]`` keeps per class
  ``Y`` the queries that need an instance of ``Y`` besides ``x`` (``cnj_need``) and how
  many classes each needs, as a binary number in bit slices (``cnj_count``: slice ``j``
  holds the queries whose count has bit ``j``);
- each class ``Y`` present at the source adds ``cnj_need[Y] & bits & windows.mask(x.end
  - t)`` (``t`` its latest start, ``bits`` its union) to a bit-sliced counter; the
  queries whose count equals their need are the candidates: O(classes present ×
  slices) big-integer operations. With fewer queries left than classes present, they
  are checked one at a time instead.

A conjunction with an ``ANY`` component, or components whose class sets overlap, is not
counted (``cnj_loose``): it is a candidate when ``x`` passes its own filter. A query
with several components that ``x``'s class can fill is given no filter on that class
(every instance passes: the bound stays an upper bound). The test is an upper bound (it
ignores the registration moment, how many instances a class holds, whether the instance
passing a query's filter is the one in its window, and the conditions across events);
the assembly (``ecq.matching.composite``) decides, as it does for sequences after their
summaries. One probe of the source's chain of each class serves every
candidate (``ChainProbe``), the paper's sub-pattern sharing for conjunctions.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from ecq.compiler.query import KIND_AND, rename_refs
from ecq.structures.ecq import SlotFilter

if TYPE_CHECKING:
    from ecq.compiler.conditions import PredFn
    from ecq.compiler.query import Comp, CompiledQuery
    from ecq.event import Event
    from ecq.structures.ecq import ECQ
    from ecq.structures.qstate import QState
    from ecq.time.windows import Windows

__all__ = [
    "Presence",
    "Presences",
    "Shape",
    "by_presence",
    "kernel_shape",
    "link",
    "needs",
    "own_filter",
    "Uses",
    "uses_of",
    "unlink",
    "own_bits",
    "candidates",
]

# The most components of a conjunction the compiled kernel assembles (a bit each in a
# C word: ecq/kernel/_conjunction.pxd's MAX_COMPS).
KERNEL_COMPS = 64

# Per source and class conjunctions use: the latest start of a stored instance that
# passes some conjunction's filter on the class, and the union of those instances' own bits.
Presence = dict[str, tuple[float, int]]


def by_presence(qs: QState) -> bool:
    """Whether this node's candidates come from the presence count: a conjunction of
    primitive classes without Kleene closure (a sub-pattern, ``@name`` or Kleene
    component is found as before, one node at a time, from ``ECQ.general_final``)."""
    cq = qs.cq
    return cq.kind == "and" and all(c.kleene is None and not c.derived for c in cq.comps)


class Uses(NamedTuple):
    """How a node's positive components use each class, found once per node (a bulk
    registration reads it for every class of the node): per class, how many components
    take it (None: some component takes several classes, and the count cannot judge the
    node), and the one component that takes it (None: several do)."""

    counts: dict[str, int] | None
    own: dict[str, Comp | None]


def uses_of(qs: QState) -> Uses:
    """:class:`Uses` of ``qs``. O(its components' classes)."""
    cq = qs.cq
    comps = cq.comps
    # Plain dicts, not a Counter of a generator (4.3 us a call against 2.7, when a bulk
    # registration of 100,000 card queries counted once per class of each conjunction:
    # 82,581 times).
    counts: dict[str, int] | None = {}
    own: dict[str, Comp | None] = {}
    for i in cq.positives:
        comp = comps[i]
        classes = comp.classes
        if len(classes) != 1:
            counts = None
        for c in classes:
            if counts is not None:
                counts[c] = counts.get(c, 0) + 1
            own[c] = None if c in own else comp
    return Uses(counts, own)


def needs(qs: QState, cls: str, uses: Uses | None = None) -> tuple[frozenset[str], bool]:
    """The classes ``qs`` needs besides an arriving instance of ``cls``, and whether
    the count can say so (single-class components only). Read by :func:`link`, and by
    a bulk registration, which links as it does with its bits added at the end (and
    gives ``uses_of(qs)``, made once for the node's classes)."""
    counts = (uses or uses_of(qs)).counts
    if counts is None:
        return frozenset(), False
    return frozenset([k for k, v in counts.items() if v - (k == cls) > 0]), True


def own_filter(qs: QState, cls: str, uses: Uses | None = None) -> Comp | None:
    """The component whose filter an instance of ``cls`` must pass to fill ``qs``: the
    one positive component that class can fill, if it has a filter; None (every
    instance passes) when it has none or several components can take the class
    (``uses``: ``uses_of(qs)``, when made already)."""
    comp = (uses or uses_of(qs)).own.get(cls)
    return comp if comp is not None and comp.filter is not None else None


def link(ecq: ECQ, qs: QState) -> None:
    """``qs`` may be completed by instances of ``ecq``'s class. O(classes of qs), plus
    adding its filter to the class's index."""
    bit = qs.bit
    if ecq.cnj_final & bit:
        return  # a second component of the same class
    ecq.cnj_final |= bit
    own = own_filter(qs, ecq.cls)
    if ecq.cnj_filter is None:
        ecq.cnj_filter = SlotFilter()
    if own is None:
        ecq.cnj_filter.add(bit, None, ())
    else:
        ecq.cnj_filter.add(bit, own.filter, own.filter_id, own.filter_conjuncts)
    need, countable = needs(qs, ecq.cls)
    if not countable:
        ecq.cnj_loose |= bit
        return
    for cls in need:
        ecq.cnj_need[cls] = ecq.cnj_need.get(cls, 0) | bit
    ecq.cnj_each[qs.bitno] = (tuple(sorted(need)), qs.cq.window or 0.0)
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
    if ecq.cnj_filter is not None:
        own = own_filter(qs, ecq.cls)
        ecq.cnj_filter.remove(qs.bit, own.filter_id if own is not None else ())
        if ecq.cnj_filter.empty():
            ecq.cnj_filter = None
    ecq.cnj_each.pop(qs.bitno, None)
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


def own_bits(ecq: ECQ, e: Event) -> int:
    """The conjunctions whose filter on ``ecq``'s class the instance ``e`` passes (the
    filter index, ecq.compiler.filters; the network asks its kernel, ``Kernel.slot_passing``,
    which the compiled one answers in C). O(attributes · log F + result)."""
    f = ecq.cnj_filter
    return f.passing(e) if f is not None else 0


def candidates(ecq: ECQ, present: Presence | None, end: float, windows: Windows, own: int = -1) -> int:
    """The conjunctions an instance of ``ecq``'s class ending at ``end``, passing the
    filters of ``own`` (:func:`own_bits`), may complete, given its source's presence.
    O(classes present × slices)."""
    final = ecq.cnj_final & own
    if not final:
        return 0
    loose = ecq.cnj_loose & own
    slices = ecq.cnj_count
    if not slices:
        # Every countable candidate needs nothing besides the arriving instance.
        return final
    if not present:
        return final & ~_some(slices) | loose
    if final.bit_count() <= len(present):
        return _by_query(ecq, present, end, final, loose)
    return _by_count(ecq, present, end, windows, final, loose)


def _by_query(ecq: ECQ, present: Presence, end: float, final: int, loose: int) -> int:
    """:func:`candidates` one query at a time: cheaper than the count when the
    arriving instance's own filters leave fewer queries than classes present (the
    demo workload: a handful of queries against a card holder's dozen classes).
    O(queries × their classes)."""
    out = loose
    rest = final & ~loose
    each = ecq.cnj_each
    while rest:
        low = rest & -rest
        rest ^= low
        need, window = each[low.bit_length() - 1]
        for cls in need:
            got = present.get(cls)
            if got is None or not got[1] & low or end - got[0] > window:
                break  # no instance of cls serves the query
        else:
            out |= low
    return out


def _by_count(ecq: ECQ, present: Presence, end: float, windows: Windows, final: int, loose: int) -> int:
    """:func:`candidates` for every query at once, with the bit-sliced count.
    O(classes present × slices) big-integer operations."""
    slices = ecq.cnj_count
    need = ecq.cnj_need
    least = windows.least
    counts = [0] * len(slices)
    for cls, (t, bits) in present.items():
        s = need.get(cls)
        if s is None:
            continue
        # The queries an instance of the class here may serve: its filter, its window.
        s &= final & bits  # most classes present serve none of the few queries left
        if s and end - t > least:
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


class Presences:
    """The presence of every source (``sources``: ``{src: Presence}``), and per class
    the sources of its noted instances in arrival order with their starts (``notes``),
    so that cleaning is O(dropped) rather than a sweep of every source and class: a
    class's notes leave from the front while their start is below its drop horizon
    (as ``SIQ.clean`` drops instances), and a source's entry for the class goes with
    the last of its notes (``count``). The compiled kernel keeps the same, with the
    instances themselves (ecq.kernel._conjunction)."""

    __slots__ = ("sources", "notes", "count")

    def __init__(self) -> None:
        self.sources: dict[object, Presence] = {}
        self.notes: dict[str, deque[tuple[object, float]]] = {}
        self.count: dict[tuple[object, str], int] = {}

    def get(self, src: object) -> Presence | None:
        return self.sources.get(src)

    def note(self, src: object, cls: str, start: float, own: int) -> None:
        """A stored instance of ``cls`` at ``src`` passing the conjunctions' filters of
        ``own``; one that passes none can complete nothing and is not noted. O(1)."""
        if not own:
            return
        present = self.sources.get(src)
        if present is None:
            present = self.sources[src] = {}
        got = present.get(cls)
        if got is None:
            present[cls] = (start, own)
        else:
            present[cls] = (start if start > got[0] else got[0], got[1] | own)
        notes = self.notes.get(cls)
        if notes is None:
            notes = self.notes[cls] = deque()
        notes.append((src, start))
        key = (src, cls)
        self.count[key] = self.count.get(key, 0) + 1

    def prune(self, horizon: Callable[[str], float]) -> None:
        """Forget, per class, the notes from the front while their start is below
        ``horizon(cls)``, and a source's entry for the class with its last note (every
        instance of it there is gone), and the sources left with none.
        O(classes + dropped)."""
        sources = self.sources
        count = self.count
        for cls in list(self.notes):
            notes = self.notes[cls]
            low = horizon(cls)
            while notes and notes[0][1] < low:
                src, _ = notes.popleft()
                key = (src, cls)
                left = count[key] - 1
                if left:
                    count[key] = left
                    continue
                del count[key]
                present = sources[src]
                del present[cls]
                if not present:
                    del sources[src]
            if not notes:
                del self.notes[cls]

    def _check(self) -> None:
        held: Counter[tuple[object, str]] = Counter()
        for cls, notes in self.notes.items():
            assert notes, f"an empty queue of notes for {cls}"
            held.update((src, cls) for src, _ in notes)
        assert held == self.count, "each source and class counts its notes"
        assert {(src, cls) for src, present in self.sources.items() for cls in present} == set(held)
        assert all(self.sources.values()), "a source without classes is dropped"


@dataclass(frozen=True)
class Shape:
    """A conjunction of primitive classes as the compiled kernel assembles it
    (ecq/kernel/_conjunction.pyx), made once per query by :func:`kernel_shape`.

    - ``groups``: the positive components by class set (a *role group*), each as
      ``(classes, component indexes)`` in component order. Class sets of different
      groups are disjoint (overlapping sets are not taken), so each event has one group,
      and the events of a set that fill a group's components do so in arrival order
      (docs/semantics.md, "Conjunction roles"): the assignment of a set of events is
      unique, and ``composite._first_assignment`` finds that one or none.
    - ``filters``: per group, its components' filters by rank when an instance's own
      bits cannot tell which of them it passes (two or more components: their class's
      filter index holds none of them, ``own_filter``); None when they can.
    - ``negated``: ``(component index, classes, blocker conditions)`` of each negated
      component, in component order (the order of the factors ``1 - prob``).
    - ``checks``: ``(predicate, key, component indexes)`` of each condition across
      events: the key names the components by *role* (group and rank) instead of
      position, so two queries' checks with one key compute the same thing on the same
      events, and the indexes are the ones it reads in role order (what the kernel's
      shared evaluation is keyed by, with the key).
    """

    groups: tuple[tuple[tuple[str, ...], tuple[int, ...]], ...]
    filters: tuple[tuple[PredFn | None, ...] | None, ...]
    negated: tuple[tuple[int, tuple[str, ...], tuple[PredFn, ...]], ...]
    checks: tuple[tuple[PredFn, Any, tuple[int, ...]], ...]


def kernel_shape(cq: CompiledQuery) -> Shape | None:
    """How the compiled kernel assembles conjunction ``cq``, or None when it cannot:
    a sub-pattern, ``@name`` or Kleene component, overlapping class sets (the assignment
    needs a search), more than :data:`KERNEL_COMPS` components. O(components + conditions)
    the first time; kept on the query (never mutated), as the kernel's tables are made
    again whenever the queries change, and a snapshot writes it (a start after reading
    100,000 demo queries spent a third of a second making the conjunctions' shapes)."""
    found = cq.__dict__.get("_kernel_shape", _NOT_YET)
    if found is _NOT_YET:
        found = cq.__dict__["_kernel_shape"] = _kernel_shape(cq)
    return found  # type: ignore[no-any-return]


# What ``_kernel_shape`` holds before it is made (None: a conjunction the kernel cannot assemble).
_NOT_YET = object()


def _kernel_shape(cq: CompiledQuery) -> Shape | None:
    if cq.kind != KIND_AND or cq.overlapping or cq.length > KERNEL_COMPS:
        return None
    if any(c.kleene is not None or c.derived for c in cq.comps):
        return None
    members: dict[frozenset[str], list[int]] = {}
    for i in cq.positives:
        members.setdefault(cq.comps[i].classes, []).append(i)
    groups = tuple((tuple(sorted(classes)), tuple(idx)) for classes, idx in members.items())
    filters = tuple(
        tuple(cq.comps[i].filter for i in idx)
        if len(idx) > 1 and any(cq.comps[i].filter for i in idx)
        else None
        for _, idx in groups
    )
    negated = tuple(
        (c.index, tuple(sorted(c.classes)), cq.blocker_conds.get(c.index, ())) for c in cq.comps if c.negated
    )
    role = {i: f"#{'|'.join(classes)}/{rank}" for classes, idx in groups for rank, i in enumerate(idx)}
    checks: list[tuple[PredFn, Any, tuple[int, ...]]] = []
    keys = cq.check_keys if len(cq.check_keys) == len(cq.checks) else (None,) * len(cq.checks)
    for (_, pred), key in zip(cq.checks, keys, strict=True):
        if key is None:
            checks.append((pred, None, ()))
            continue
        ((expr,), literals), reads = key
        named = rename_refs(expr, lambda ref: role[int(ref[1:])])
        order = tuple(sorted(reads, key=role.__getitem__))
        checks.append((pred, ((named,), literals, tuple(role[i] for i in order)), order))
    return Shape(groups, filters, negated, tuple(checks))
