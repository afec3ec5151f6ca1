"""Event-centric composable queues (SCEMon §4): one :class:`ECQ` per event class.

An ECQ holds the class's :class:`~ecq.structures.siq.SIQ`, its :class:`CLT` (composition link
table: one :class:`CLink` per query position the class fills) and its :class:`RCLT`
(reverse composition link table: one :class:`RCLink` per ECQ the CLinks probe, so an
arriving instance probes each predecessor ECQ once for every query that needs it).
Everything derived from the CLT is kept as query bitsets, updated incrementally on
register/unregister.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, NamedTuple

from ecq.compiler.conditions import PredFn
from ecq.compiler.filters import (
    Constraint,
    FilterIndex,
    _bit_numbers,
    constraints_of,
    residual_predicate,
    split_filter,
)
from ecq.event import Event
from ecq.structures.siq import SIQ
from ecq.time.horizon import NEG_INF, Horizon

if TYPE_CHECKING:
    from ecq.language.ast import Expr
    from ecq.structures.qstate import QState

__all__ = ["BLOCKS", "CLT", "ECQ", "RCLT", "CLink", "RCLink", "SlotFilter"]

# The position of a CLink whose class is a negated component's: its instances block.
BLOCKS = -1


class CLink(NamedTuple):
    """Composition link: query ``q`` uses this class at ``position``: a position of its
    skeleton for the kernels' nodes (``QState.slots``; ``BLOCKS`` for a negated
    component), a component index for the others. A named tuple, not a frozen
    dataclass: a registration makes one per class a query uses, and a frozen
    dataclass's ``__init__`` (each field set through ``object.__setattr__``) cost
    several times a tuple's."""

    q: QState
    position: int


@dataclass
class RCLink:
    """Reverse link to a predecessor ECQ: ``masks[i]`` holds the sequence queries whose
    component ``i`` this class fills and whose component ``i - 1`` that ECQ fills."""

    target: str
    masks: dict[int, int] = field(default_factory=dict)

    def add(self, position: int, bit: int) -> None:
        self.masks[position] = self.masks.get(position, 0) | bit

    def remove(self, position: int, bit: int) -> None:
        left = self.masks.get(position, 0) & ~bit
        if left:
            self.masks[position] = left
        else:
            self.masks.pop(position, None)


class CLT(list[CLink]):
    """Composition link table: the class's CLinks (:class:`CLink`), one per query position it
    fills, in registration order. An ECQ whose CLT empties is removed."""

    __slots__ = ()

    def drop(self, q: QState) -> None:
        """Remove every CLink of ``q``. O(CLinks)."""
        self[:] = [c for c in self if c.q is not q]


class RCLT(dict[str, RCLink]):
    """Reverse composition link table: one :class:`RCLink` per predecessor class the
    sequence queries probe from this class (sub-pattern sharing: one probe of that ECQ
    serves every query the RCLink holds). An RCLink that no query needs goes."""

    __slots__ = ()

    def link(self, target: str, position: int, bit: int) -> None:
        """The query of ``bit`` probes ``target`` when this class fills ``position``."""
        rl = self.get(target)
        if rl is None:
            rl = self[target] = RCLink(target)
        rl.add(position, bit)

    def unlink(self, target: str, position: int, bit: int) -> None:
        """Undo :meth:`link`; the RCLink goes with its last query."""
        rl = self.get(target)
        if rl is not None:
            rl.remove(position, bit)
            if not rl.masks:
                del self[target]


# Per filter key (the same key, the same conjuncts), what the index makes of a filter:
# its atoms merged per attribute (never changed once made, so shared by every index
# that has the filter), its residual predicate and whether it has atoms. Splitting and
# merging were a tenth of registering 100,000 conditioned queries, whose 146,051
# filters (a class's position, a constant) are ~1,200 distinct conjuncts. Emptied when
# full (a filter missing from it is split again).
_SPLIT: dict[Hashable, tuple[dict[str, Constraint], PredFn | None, bool]] = {}
_SPLIT_MAX = 1 << 16


def _split(key: Hashable, conjuncts: tuple[Expr, ...]) -> tuple[dict[str, Constraint], PredFn | None, bool]:
    """The entry of ``_SPLIT`` for the filter ``key`` (the conjunction of
    ``conjuncts``), made and kept: the caller looks it up first."""
    atoms, rest = split_filter(conjuncts)
    split = (constraints_of(atoms), residual_predicate(rest) if atoms else None, bool(atoms))
    if len(_SPLIT) >= _SPLIT_MAX:
        _SPLIT.clear()
    _SPLIT[key] = split
    return split


class SlotFilter:
    """Which queries at one position accept an instance: ``always`` (no filter) plus one
    group per distinct filter (``groups``: filter key -> its id in ``index``), so a filter
    shared by many queries is one filter, held in a :class:`~ecq.compiler.filters.FilterIndex`
    (which holds its queries, by number): the filters an event passes are found in
    O(attributes · log F + result), not one predicate call per filter."""

    __slots__ = ("always", "groups", "index", "_next", "native", "waiting")

    def __init__(self) -> None:
        self.always = 0
        self.groups: dict[Hashable, int] = {}
        self.index = FilterIndex()
        self._next = 0
        # The compiled kernel's form of the index, made on first use (ecq.kernel._filters:
        # of this slot alone, or shared by every sequence position of the class); None
        # after any change.
        self.native: object = None
        # In a bulk registration: per filter (by id), what :meth:`flush` adds to the
        # index: its atoms and residual (None, None: the index has it) and the numbers
        # of the queries waiting to join it (see :meth:`wait`); None otherwise.
        self.waiting: dict[int, tuple[dict[str, Constraint] | None, PredFn | None, list[int]]] | None = None

    def add(self, bit: int, pred: PredFn | None, key: Hashable, conjuncts: tuple[Expr, ...] = ()) -> None:
        """Query ``bit`` (a set: one query's, or several's) accepts what ``pred``
        accepts: the conjunction of ``conjuncts`` (``Comp.filter_conjuncts``), which the
        index splits into atoms; ``key`` (``Comp.filter_id``, or another value that
        identifies the conjuncts: equal keys, equal conjuncts) says which filters are the
        same."""
        if pred is None:
            self.native = None
            self.always |= bit
            return
        self.add_numbers(_bit_numbers(bit), pred, key, conjuncts)

    def add_numbers(
        self, numbers: list[int], pred: PredFn, key: Hashable, conjuncts: tuple[Expr, ...] = ()
    ) -> None:
        """:meth:`add` of the queries ``numbers`` (query numbers, none of them here yet;
        the list may be kept) with a filter: O(the filter's atoms and queries), whatever
        the number of queries registered (no set as wide as the query numbers is made)."""
        self.native = None
        # One look-up of the key: a new group is put in as it is looked up.
        fid = self._next
        got = self.groups.setdefault(key, fid)
        if got != fid:
            self.index.join(got, numbers)
            return
        self._next += 1
        split = _SPLIT.get(key) or _split(key, conjuncts)
        constraints, residual, indexed = split
        if len(numbers) > 1:
            numbers.sort()  # a batch reusing freed query numbers: not ascending
        # Nothing indexable: the filter's own predicate is the residual.
        self.index.add_constraints(fid, numbers, constraints, residual if indexed else pred)

    def wait(self, number: int, pred: PredFn, key: Hashable, conjuncts: tuple[Expr, ...] = ()) -> None:
        """:meth:`add_numbers` of one query in a bulk registration, the query left
        waiting until :meth:`flush` adds the waiting ones of each filter at once. The
        filter is numbered now (in the order filters first come, as one by one), and its
        key hashed once, while the query's objects are fresh in the cache (hashed again
        from the cold batch at its end, they made installing 10,000 conditioned queries
        ~2 us a query slower, a tenth). Until then ``groups`` holds filters the index
        lacks."""
        waiting = self.waiting
        if waiting is None:
            waiting = self.waiting = {}
        fid = self._next
        got = self.groups.setdefault(key, fid)
        if got == fid:
            self._next = fid + 1
            split = _SPLIT.get(key) or _split(key, conjuncts)
            waiting[fid] = (split[0], split[1] if split[2] else pred, [number])
            return
        entry = waiting.get(got)
        if entry is None:
            waiting[got] = (None, None, [number])  # a filter the index has: joined
        else:
            entry[2].append(number)

    def flush(self) -> None:
        """The queries waiting since :meth:`wait` join their filters."""
        waiting, self.waiting = self.waiting, None
        if waiting is None:
            return
        self.native = None
        index = self.index
        new: list[tuple[int, list[int], dict[str, Constraint], PredFn | None]] = []
        for fid, (constraints, residual, numbers) in waiting.items():
            if constraints is None:
                index.join(fid, numbers)
                continue
            if len(numbers) > 1:
                numbers.sort()  # a batch reusing freed query numbers: not ascending
            new.append((fid, numbers, constraints, residual))
        index.add_many(new)

    def remove(self, bit: int, key: Hashable) -> None:
        """Query ``bit`` (one query's set) goes; ``key`` is its filter's."""
        self.native = None
        if self.always & bit:
            self.always &= ~bit
            return
        fid = self.groups.get(key)
        if fid is not None:
            self.index.leave(fid, _bit_numbers(bit))
            if not self.index.queries[fid]:
                del self.groups[key]
                self.index.remove(fid)

    def passing(self, event: Event) -> int:
        """Bits of the queries whose filter ``event`` passes. O(attributes · log F)
        big-integer operations, plus the residual predicates of the filters that
        still pass (ecq.compiler.filters)."""
        if not self.groups:
            return self.always
        return self.always | self.index.passing(event)

    def empty(self) -> bool:
        return not self.always and not self.groups


class ECQ:
    """The queue of one event class, shared by all queries and all sources."""

    __slots__ = (
        "cls",
        "siq",
        "clt",
        "rclt",
        "seq_filters",
        "seq_final",
        "seq_more",
        "static_pass",
        "general_uses",
        "general_final",
        "lone_gates",
        "disj",
        "cnj_final",
        "cnj_loose",
        "cnj_need",
        "cnj_count",
        "cnj_each",
        "cnj_filter",
        "drop",
    )

    def __init__(self, cls: str) -> None:
        self.cls = cls
        self.siq = SIQ()
        self.clt = CLT()
        self.rclt = RCLT()
        # Sequence positions this class fills: filters, and which queries end there
        # (``seq_final``) or go on (``seq_more``).
        self.seq_filters: dict[int, SlotFilter] = {}
        self.seq_final: dict[int, int] = {}
        self.seq_more: dict[int, int] = {}
        # ``seq_filters``' result when no position has a filter (the common case): the
        # test phase then skips evaluating them. None when some filter must run.
        self.static_pass: dict[int, int] | None = {}
        # Composite nodes (negation, Kleene, sub-patterns, conjunctions): how many use
        # the class (its instances are then stored), and the CLinks it can complete.
        self.general_uses = 0
        self.general_final: list[CLink] = []
        # When every CLink of ``general_final`` is a lone Kleene group with a minimum
        # (``FAIL{5}``): per set of classes, the least minimum; an arrival whose chains
        # fall short of every one completes nothing (ecq.network). False when some CLink
        # is of another kind; None until worked out again after a change.
        self.lone_gates: tuple[tuple[frozenset[str], int], ...] | Literal[False] | None = None
        # Disjunctions using this class, in registration order.
        self.disj: list[CLink] = []
        # Conjunctions of primitive classes an instance of this class may complete, as
        # query bitsets (ecq.matching.conjunction): all of them, those the presence count cannot
        # judge, per other class the ones that need it, and each one's number of needed
        # classes in bit slices.
        self.cnj_final = 0
        self.cnj_loose = 0
        self.cnj_need: dict[str, int] = {}
        self.cnj_count: list[int] = []
        # Per counted query (by bit number): the classes it needs and its window.
        self.cnj_each: dict[int, tuple[tuple[str, ...], float]] = {}
        # Their one-event filters on this class, indexed (None while there are none).
        self.cnj_filter: SlotFilter | None = None
        # The drop horizon: the windows of the storing queries that use the class (a
        # query counts once) and the horizon they have produced.
        self.drop = Horizon()

    def refresh(self) -> None:
        """Recompute what is derived from the CLT after a register/unregister."""
        if all(not slot.groups for slot in self.seq_filters.values()):
            self.static_pass = {k: slot.always for k, slot in self.seq_filters.items()}
        else:
            self.static_pass = None

    def horizon(self, clock: float) -> float:
        """Instances with ``start`` below this are dropped for good."""
        return self.drop.at(clock)

    def set_windows(self, clock: float, add: float | None = None, remove: float | None = None) -> None:
        """See :meth:`Horizon.set_windows`; the queue empties with the last storing query."""
        self.drop.set_windows(clock, add, remove)
        if self.drop.window == NEG_INF:
            self.siq = SIQ()

    def __repr__(self) -> str:
        return f"ECQ({self.cls}, clinks={len(self.clt)}, stored={len(self.siq)})"

    def _check(self) -> None:
        self.siq._check()
        for e in self.siq:
            assert e.type == self.cls
            if e.pmb is not None:
                e.pmb._check()
        for rl in self.rclt.values():
            assert all(bits for bits in rl.masks.values())
        for slot in [*self.seq_filters.values(), *([self.cnj_filter] if self.cnj_filter else [])]:
            slot.index._check()
            assert set(slot.groups.values()) == set(slot.index.queries)
