"""The shared ECQ network: every registered query compiled into one set of ECQs.

Per arriving instance ``e`` of class ``X`` (SCEMon §5.1):

- **test phase**: look up ``ECQ[X]`` (one dict lookup; a class no query uses costs
  nothing more); evaluate the distinct filters of the positions ``X`` fills; extend the
  partial matches of every plain sequence query that ``e`` can extend (with a few
  big-integer operations per group of queries, the window a precomputed bitset per
  bound) and assemble the matches of the queries whose last position ``e`` reaches
  (:mod:`ecq.matching.assembly`). Composite patterns (negation, Kleene closure, sub-patterns,
  conjunctions) are matched by :mod:`ecq.matching.composite`, through the same probe of the
  per-source chains; disjunctions take ``e`` by itself.
- **insert phase**: if ``e`` can still take part in a match, store it once in
  ``ECQ[X]``'s SIQ with its PMB, whatever number of queries it serves.
- **cleaning**: instances below their class's drop horizon go (docs/semantics.md).

The plain-sequence part of both phases, cleaning and the event loop are the *kernel*'s
(:mod:`ecq.kernel`): the network chooses one when it is made (compiled when built) and
calls it through one interface. Sub-patterns are nodes of their own whose matches
become instances of a derived class (SCEMon's virtual primitive event classes) and go
through the network like events; every query's matches likewise become instances of
``@<name>`` when some query reads them. Each op is a *moment* (docs/semantics.md): the
clock first releases pending trailing negations (phase 0), then the event is
processed (phase 1).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, Literal

from ecq.compiler.conditions import MISSING
from ecq.compiler.filters import bits_of
from ecq.compiler.query import KIND_OR, KIND_SEQ, CompiledQuery
from ecq.errors import SemanticError
from ecq.event import Event
from ecq.kernel.make import make_kernel
from ecq.language.source import semantic_error_at
from ecq.matching.candidate import Cand
from ecq.matching.composite import (
    Context,
    bound_ok,
    complete,
    derived_instance,
    entry_prims,
    inst_key,
    match_cand,
    trailing_factor,
)
from ecq.matching.conjunction import Uses, by_presence, link, needs, own_filter, unlink, uses_of
from ecq.matching.deadlines import Deadlines
from ecq.matching.emission import Emission
from ecq.matching.policy import PolicyState, SourceLog
from ecq.matching.skeleton import fast_cand
from ecq.structures.ecq import BLOCKS, ECQ, CLink, RCLink, SlotFilter
from ecq.structures.qstate import QState
from ecq.time.windows import Windows

# A tuple subclass's instance made without its class's own ``__new__`` (a named tuple's
# is a Python function: a bulk registration makes a CLink per class of every query).
_new_tuple = tuple.__new__

if TYPE_CHECKING:
    from ecq.kernel.interface import Kernel, Tested

__all__ = ["Network", "ChainProbe", "LEVELS", "reachable", "check_depends"]

# Ablation levels of the benchmark, each adding one technique to the one before:
#   instances   instance sharing only (paper §5.1): one probe per CLink, one PMatch per query
#   subpatterns + sub-pattern sharing (§5.2): one probe per R-CLink, shared by its queries
#   pmb         + PMB reduction (§5.3): initial PMatch entries implied by the instance
#   bitsets     + query bitsets: an R-CLink extends all its queries with big-int operations
#   summary     + per-source summaries of the latest partial-match start per query: one
#                 pass over a source's few groups instead of one probe per predecessor
LEVELS = ("instances", "subpatterns", "pmb", "bitsets", "summary")


def reachable(names: frozenset[str], depends: Callable[[str], frozenset[str] | None]) -> set[str]:
    """Query names reachable through ``@name`` references from ``names``
    (``depends(name)`` is None for a name no query has)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(depends(n) or ())
    return seen


def check_depends(cq: CompiledQuery, depends: Callable[[str], frozenset[str] | None]) -> None:
    """Reject an ``@name`` that names no registered query, and a query that would read
    its own matches, directly or through others (``depends`` as for :func:`reachable`)."""
    for dep in sorted(cq.depends):
        if dep != cq.name and depends(dep) is None:
            # Located at the @name in the text, when the query came as text.
            span = next((s for s in cq.ast.spans.values() if s[2] == f"@{dep}"), None)
            raise semantic_error_at(f"@{dep} names no registered query", span, None)
    if cq.name in reachable(cq.depends, depends):
        raise SemanticError(f"query {cq.name!r} would read its own matches through @name: a cycle")


class ChainProbe:
    """The probe of one source's visible instances of a class, latest first, for the
    instance being processed: each class's chain is walked once and shared by every
    query that needs it (one probe per ECQ per instance: SCEMon §5.2)."""

    __slots__ = ("ecqs", "src", "hclock", "timers", "got")

    def __init__(
        self, ecqs: dict[str, ECQ], src: Any, hclock: float, timers: dict[str, float] | None
    ) -> None:
        self.ecqs = ecqs
        self.src = src
        self.hclock = hclock
        self.timers = timers
        self.got: dict[str, list[Event]] = {}

    def __call__(self, cls: str) -> list[Event]:
        got = self.got.get(cls)
        if got is None:
            got = self.got[cls] = self.again(cls)
        return got

    def again(self, cls: str) -> list[Event]:
        """The chain walked anew, not from the cache (level "instances" probes once per
        CLink, as the paper's instance sharing alone does)."""
        timers = self.timers
        began = time.perf_counter() if timers is not None else 0.0
        target = self.ecqs.get(cls)
        got = target.siq.chain(self.src, target.horizon(self.hclock)) if target is not None else []
        if timers is not None:
            timers["probe"] += time.perf_counter() - began
        return got


class Network:
    """All ECQs, the registered nodes and their bit assignment."""

    def __init__(self, level: str = "summary", profile: bool = False, compiled: bool | None = None) -> None:
        if level not in LEVELS:
            raise ValueError(f"level must be one of {', '.join(LEVELS)}")
        self.level = level
        # Per-phase seconds when profiling (the benchmark's breakdown), else None.
        self.timers: dict[str, float] | None = (
            dict.fromkeys(("search", "probe", "evaluate", "insert", "clean"), 0.0) if profile else None
        )
        # The nodes of each window (bits), kept as nodes come and go, and the window
        # masks made from them.
        self._window_bits: dict[float, int] = {}
        self.windows = Windows()
        # Trailing-negation matches waiting for the clock, earliest deadline first.
        self.deadlines = Deadlines()
        self.ecqs: dict[str, ECQ] = {}
        # Whether conjunctions are found with query bitsets from their presence
        # (ecq.matching.conjunction; the kernel keeps it), at the levels that have query bitsets.
        self.counts_conjunctions = level in ("bitsets", "summary")
        # Instances (events and derived instances) that have arrived so far: two queries
        # registered with no instance between them see the same instances, so they may
        # share sub-pattern nodes.
        self.seen = 0
        self.queries: dict[str, QState] = {}
        self.subs: dict[str, QState] = {}
        self.by_bit: dict[int, QState] = {}
        self._next_bit = 0
        # Bits of removed nodes: (moment of removal, bit number). A bit is reused only
        # once every instance that may still carry it has been dropped.
        self._free: list[tuple[int, int]] = []
        self._order = 0
        # Selection and consumption policies (ecq.matching.policy), by node bit number;
        # the log of every event by source while some query's strategy reads it.
        self.policies: dict[int, PolicyState] = {}
        self.source_log: SourceLog | None = None
        # During a bulk registration (begin_bulk .. end_bulk): the classes whose derived
        # tables wait to be remade once at the end, and the query bits waiting to join
        # their masks; None otherwise.
        self._bulk: set[str] | None = None
        self._bulk_bits: _BulkBits | None = None
        # The hot path (ecq.kernel): compiled when built and not turned off, chosen once.
        self.kernel: Kernel = make_kernel(self, level, compiled)

    # ------------------------------------------------------------- registration

    def register(self, cq: CompiledQuery, moment: int, clock: float) -> QState:
        """Add a query (and the sub-patterns it needs); it sees instances of later
        moments. Raises :class:`SemanticError` for an unknown or cyclic ``@name``."""
        if cq.depends:  # nothing to check otherwise
            check_depends(cq, self._depends)
        for sub in cq.subs:
            shared = self.subs.get(sub.name)
            if shared is not None:
                shared.users += 1
            else:
                self.subs[sub.name] = self._add_node(sub, moment, clock)
        qs = self._add_node(cq, moment, clock)
        self.queries[cq.name] = qs
        return qs

    def begin_bulk(self) -> None:
        """Registrations until :meth:`end_bulk` leave what is derived from the whole set
        of nodes (each touched class's tables, the window masks, the kernel's constants)
        to be remade once, at the end. No event may be processed in between."""
        if self._bulk is None:
            self._bulk = set()
            self._bulk_bits = _BulkBits(self.ecqs)

    def end_bulk(self) -> None:
        """Remake what :meth:`begin_bulk` deferred."""
        touched, self._bulk = self._bulk, None
        bits, self._bulk_bits = self._bulk_bits, None
        if touched is None:
            return
        if bits is not None:
            bits.flush()
        for cls in sorted(touched):
            ecq = self.ecqs.get(cls)
            if ecq is not None:
                ecq.refresh()
        self._rebuild_windows()

    def unregister(self, name: str, moment: int, clock: float) -> QState:
        """Remove a query; sub-patterns and ECQs no one uses any more go too."""
        # Queries reading @name stay: the class simply receives no more instances (a
        # query registered later under the same name feeds it again).
        qs = self.queries.pop(name)
        self._remove_node(qs, moment, clock)
        for sub in qs.cq.subs:
            shared = self.subs[sub.name]
            shared.users -= 1
            if shared.users == 0:
                del self.subs[sub.name]
                self._remove_node(shared, moment, clock)
        return qs

    def _depends(self, name: str) -> frozenset[str] | None:
        qs = self.queries.get(name)
        return qs.cq.depends if qs is not None else None

    def _add_node(self, cq: CompiledQuery, moment: int, clock: float) -> QState:
        qs = QState(cq, self._alloc_bit(), self._order, moment)
        self._order += 1
        ecqs = self.ecqs
        classes = qs.classes
        for cls in classes:
            if cls not in ecqs:
                ecqs[cls] = ECQ(cls)
        bulk = self._bulk_bits
        if qs.fast:
            if bulk is not None:
                self._link_skeleton_bulk(qs, bulk)
            else:
                self._link_skeleton(qs)
        else:
            last_positive = cq.positives[-1]
            counted = self.counts_conjunctions and by_presence(qs)
            # In a bulk registration, how the node uses its classes, found once for them all.
            uses = uses_of(qs) if counted and bulk is not None else None
            linked: set[str] = set()
            disjunction = cq.kind == KIND_OR
            for k, comp in enumerate(cq.comps):
                for cls in comp.classes:
                    ecq = ecqs[cls]
                    ecq.clt.append(_new_tuple(CLink, (qs, k)))
                    if disjunction:
                        ecq.disj.append(CLink(qs, k))
                    else:
                        ecq.general_uses += 1
                        if comp.negated:
                            continue
                        if counted:
                            if bulk is None:
                                link(ecq, qs)
                            elif cls not in linked:  # a class met again: linked already
                                linked.add(cls)
                                assert uses is not None
                                bulk.link(ecq, qs, uses)
                        elif cq.kind != KIND_SEQ or k == last_positive:
                            ecq.general_final.append(CLink(qs, k))
                            ecq.lone_gates = None
        window = cq.window
        if window is not None and cq.stores:
            if bulk is not None:
                bulk.add_windows(classes, window, clock)
            else:
                for cls in classes:
                    ecqs[cls].set_windows(clock, add=window)
        if self._bulk is None:
            for cls in classes:
                ecqs[cls].refresh()
        else:
            self._bulk.update(classes)
        self.by_bit[qs.bitno] = qs
        if cq.policy is not None:
            self.policies[qs.bitno] = qs.policy = PolicyState(cq, clock)
            if cq.policy.logs and self.source_log is None:
                self.source_log = SourceLog()
        if window is not None:
            if bulk is not None:
                waiting = bulk.by_window.get(window)
                if waiting is None:
                    waiting = bulk.by_window[window] = bulk.pending(self._window_bits, window)
                waiting.append(qs.bitno)
            else:
                # (The bit made here only: as wide as the number of nodes.)
                self._window_bits[window] = self._window_bits.get(window, 0) | qs.bit
        if self._bulk is None:
            self._rebuild_windows()
        return qs

    def _link_skeleton(self, qs: QState) -> None:
        """A node of the kernels: its skeleton's positions in the CLTs, filters and
        R-CLTs as a plain sequence's; a negated component's classes (its blockers) and a
        Kleene component's (its group) keep their instances (``general_uses``)."""
        cq = qs.cq
        bit = qs.bit
        slots = qs.slots
        last = qs.steps - 1
        for p, i in enumerate(slots):
            comp = cq.comps[i]
            for cls in comp.classes:
                ecq = self.ecqs[cls]
                ecq.clt.append(CLink(qs, p))
                slot = ecq.seq_filters.get(p)
                if slot is None:
                    slot = ecq.seq_filters[p] = SlotFilter()
                target = ecq.seq_final if p == last else ecq.seq_more
                slot.add(bit, comp.filter, comp.filter_id, comp.filter_conjuncts)
                target[p] = target.get(p, 0) | bit
                if p >= 1:
                    for pred_cls in cq.comps[slots[p - 1]].classes:
                        ecq.rclt.link(pred_cls, p, bit)
                if comp.kleene is not None:
                    ecq.general_uses += 1
        for comp in cq.comps:
            if comp.negated:
                for cls in comp.classes:
                    self.ecqs[cls].clt.append(CLink(qs, BLOCKS))
                    self.ecqs[cls].general_uses += 1

    def _link_skeleton_bulk(self, qs: QState, bulk: _BulkBits) -> None:
        """:meth:`_link_skeleton` in a bulk registration: the same links, the bits left
        to :meth:`_BulkBits.flush` (each mask made once: an OR per query copies a mask
        as long as the number of queries). Inlined: it runs per position of every
        query of a batch."""
        cq = qs.cq
        comps = cq.comps
        slots = qs.slots
        last = qs.steps - 1
        bitno = qs.bitno
        # Per position (and whether it is the query's last), per class: the ECQ, its
        # slot and the lists of bit numbers waiting for its masks, found once a batch
        # (keyed by position, then class: no key tuple made and hashed per class).
        rows_final, rows_more = bulk.final, bulk.more
        # Whether a position may be a Kleene component's (none of a plain sequence's).
        kleene = bool(qs.kleene)
        pred_classes: frozenset[str] | None = None
        for p, i in enumerate(slots):
            comp = comps[i]
            filt = comp.filter
            is_last = p == last
            rows = rows_final if is_last else rows_more
            row = rows.get(p)
            if row is None:
                row = rows[p] = {}
            for cls in comp.classes:
                place = row.get(cls)
                if place is None:
                    place = row[cls] = bulk.place(self.ecqs[cls], p, is_last)
                # (tuple.__new__: a named tuple's own __new__ is a Python call.)
                place.clt.append(_new_tuple(CLink, (qs, p)))
                if filt is None:
                    always = place.always
                    if always is None:
                        always = place.always = bulk.always_of(place.slot)
                    always.append(bitno)
                else:
                    place.wait(bitno, filt, comp.filter_id, comp.filter_conjuncts)
                place.target.append(bitno)
                if pred_classes is not None:
                    preds = place.preds
                    for pred_cls in pred_classes:
                        waiting = preds.get(pred_cls)
                        if waiting is None:
                            waiting = preds[pred_cls] = bulk.rclink_of(place.ecq, pred_cls, p)
                        waiting.append(bitno)
                if kleene and comp.kleene is not None:
                    place.ecq.general_uses += 1
            pred_classes = comp.classes
        if len(slots) != len(comps):  # some component is negated (not in the skeleton)
            ecqs = self.ecqs
            for comp in comps:
                if comp.negated:
                    for cls in comp.classes:
                        ecqs[cls].clt.append(CLink(qs, BLOCKS))
                        ecqs[cls].general_uses += 1

    def _unlink_skeleton(self, qs: QState) -> None:
        """Undo :meth:`_link_skeleton` (the CLinks go with ``CLT.drop``)."""
        cq = qs.cq
        bit = qs.bit
        slots = qs.slots
        last = qs.steps - 1
        for p, i in enumerate(slots):
            comp = cq.comps[i]
            for cls in comp.classes:
                ecq = self.ecqs[cls]
                self._unset(ecq.seq_filters, p, bit, comp.filter_id)
                _clear(ecq.seq_final if p == last else ecq.seq_more, p, bit)
                if p >= 1:
                    for pred_cls in cq.comps[slots[p - 1]].classes:
                        ecq.rclt.unlink(pred_cls, p, bit)
                if comp.kleene is not None:
                    ecq.general_uses -= 1
        for comp in cq.comps:
            if comp.negated:
                for cls in comp.classes:
                    self.ecqs[cls].general_uses -= 1

    def _remove_node(self, qs: QState, moment: int, clock: float) -> None:
        cq = qs.cq
        bit = qs.bit
        for cls in qs.classes:
            self.ecqs[cls].clt.drop(qs)
        if qs.fast:
            self._unlink_skeleton(qs)
        else:
            for comp in cq.comps:
                for cls in comp.classes:
                    ecq = self.ecqs[cls]
                    if cq.kind == KIND_OR:
                        ecq.disj = [c for c in ecq.disj if c.q is not qs]
                    else:
                        ecq.general_uses -= 1
                        ecq.general_final = [c for c in ecq.general_final if c.q is not qs]
                        ecq.lone_gates = None
                        if ecq.cnj_final & bit:
                            unlink(ecq, qs)
        if cq.stores and cq.window is not None:
            for cls in qs.classes:
                self.ecqs[cls].set_windows(clock, remove=cq.window)
        for cls in qs.classes:
            if not self.ecqs[cls].clt:
                del self.ecqs[cls]
            else:
                self.ecqs[cls].refresh()
        del self.by_bit[qs.bitno]
        if self.policies.pop(qs.bitno, None) is not None and not any(
            st.policy.logs for st in self.policies.values()
        ):
            self.source_log = None
        if cq.window is not None:
            left = self._window_bits[cq.window] & ~bit
            if left:
                self._window_bits[cq.window] = left
            else:
                del self._window_bits[cq.window]
        self._free.append((moment, qs.bitno))
        qs.live = False
        self.deadlines.drop_dead()
        if qs.fast:
            self.kernel.remove_node(qs.bitno)
        self._rebuild_windows()

    @staticmethod
    def _unset(filters: dict[int, SlotFilter], k: int, bit: int, key: Hashable) -> None:
        slot = filters.get(k)
        if slot is not None:
            slot.remove(bit, key)
            if slot.empty():
                del filters[k]

    def _alloc_bit(self) -> int:
        if self._free:
            oldest_alive = min(
                (ecq.siq.queue[0].moment for ecq in self.ecqs.values() if ecq.siq.queue),
                default=None,
            )
            for i, (freed_at, bitno) in enumerate(self._free):
                if oldest_alive is None or oldest_alive > freed_at:
                    del self._free[i]
                    return bitno
        bitno = self._next_bit
        self._next_bit += 1
        return bitno

    def _rebuild_windows(self) -> None:
        # Called whenever a node comes or goes. O(distinct windows), not O(nodes):
        # registering thousands of queries one by one stays linear.
        self.windows = Windows(self._window_bits)
        self.kernel.queries_changed()

    # ------------------------------------------------------------------ moments

    def on_event(self, e: Event, clock_before: float, clock: float) -> list[Emission] | None:
        """One event op: release due trailing negations (phase 0, against the state just
        before the op), then process the event (phase 1). None when nothing is emitted."""
        out: list[Emission] = []
        if clock > self.next_deadline:
            self.fire(e.moment - 1, clock_before, clock, e.arrival, out)
        completed = self.process(e, clock, e.moment)
        if completed:
            self._conclude(completed, e, clock, out)
        return out or None

    def settle_plain(
        self,
        found: list[tuple[QState, list[Any], float]],
        e: Event,
        clock: float,
        more: list[tuple[QState, Cand]] | None = None,
    ) -> list[Emission]:
        """The rest of :meth:`on_event` after the compiled phases found matches
        (``(node, entries, probability)``) that need more than emitting: trailing
        negation, RETURN, probability, Kleene groups, sub-patterns, ``@name`` readers;
        ``more``: candidates the compiled kernel assembled (conjunctions)."""
        out: list[Emission] = []
        completed = [(qs, fast_cand(qs, ents, prob, e)) for qs, ents, prob in found]
        if more:
            completed.extend(more)
        self._conclude(completed, e, clock, out)
        return out

    def _conclude(
        self, completed: list[tuple[QState, Cand]], e: Event, clock: float, out: list[Emission]
    ) -> None:
        """Phase 1 after the test phase: settle what ``e`` completed, then run the
        derived instances that makes."""
        made = self._settle(completed, e, e.moment, clock, clock, 1, e.arrival, out)
        if made:
            self._run(made, e.moment, clock, clock, 1, e.arrival, out)

    @property
    def next_deadline(self) -> float:
        """The earliest deadline of a waiting trailing-negation match (infinity: none),
        the network's own or the kernel's."""
        own = self.deadlines.earliest
        held = self.kernel.next_deadline
        return own if own < held else held

    @property
    def own_deadline(self) -> float:
        """The earliest deadline of the waiting matches the network holds itself (the
        kernel holds those of the queries whose negation it checks: ``QState.negs``)."""
        return self.deadlines.earliest

    def fire(self, moment: int, clock_before: float, clock: float, arrival: int, out: list[Emission]) -> None:
        """Phase 0: every pending trailing-negation match whose deadline the clock now
        exceeds is checked for blockers that arrived before this moment and finished,
        the network's and the kernel's. O(k log n) for k due matches of n waiting
        (``ecq.matching.deadlines``)."""
        due = self.deadlines.due(clock)
        held = self.kernel.due(moment, clock_before, clock)
        if not due and not held:
            return
        made: list[Event] = []
        probes: dict[Any, ChainProbe] = {}
        for qs, cand in due:
            # Due matches of one source share their probe of the chains.
            src = cand.trigger.src
            probe = probes.get(src)
            if probe is None:
                probe = probes[src] = ChainProbe(self.ecqs, src, clock_before, self.timers)
            factor = trailing_factor(qs, cand, Context(moment, probe))
            self._finish(qs, cand, cand.prob * factor, moment, 0, arrival, made, out)
        self._release(held, moment, clock_before, clock, arrival, made, out)

    def release(
        self,
        held: list[tuple[QState, list[Any], float]],
        moment: int,
        clock_before: float,
        clock: float,
        arrival: int,
    ) -> list[Emission]:
        """Phase 0 of the compiled event loop when some of the kernel's due matches
        (``(node, entries, probability)``, blockers checked) need Python: some query
        reads their node's ``@name`` class."""
        out: list[Emission] = []
        self._release(held, moment, clock_before, clock, arrival, [], out)
        return out

    def _release(
        self,
        held: list[tuple[QState, list[Any], float]],
        moment: int,
        clock_before: float,
        clock: float,
        arrival: int,
        made: list[Event],
        out: list[Emission],
    ) -> None:
        for qs, ents, prob in held:
            self._finish(qs, fast_cand(qs, ents, prob, ents[-1]), prob, moment, 0, arrival, made, out)
        if made:
            made.sort(key=inst_key)
            self._run(made, moment, clock_before, clock, 0, arrival, out)

    def _nodes(self) -> list[QState]:
        return [*self.subs.values(), *self.queries.values()]

    def _run(
        self,
        arriving: list[Event],
        moment: int,
        hclock: float,
        clock: float,
        phase: int,
        arrival: int,
        out: list[Emission],
    ) -> None:
        """Process instances arriving at one moment, and the derived instances their
        matches make, until none is left. ``hclock`` sets the drop horizons."""
        queue = list(arriving)
        while queue:
            x = queue.pop(0)
            completed = self.process(x, hclock, moment)
            if completed:
                queue.extend(self._settle(completed, x, moment, hclock, clock, phase, arrival, out))

    def _settle(
        self,
        completed: list[tuple[QState, Cand]],
        x: Event,
        moment: int,
        hclock: float,
        clock: float,
        phase: int,
        arrival: int,
        out: list[Emission],
    ) -> list[Event]:
        """Emit, hold (trailing negation) or turn into derived instances the matches
        ``x`` completed; returns the derived instances (latest key last), which arrive at
        the same moment."""
        made: list[Event] = []
        if self.policies:
            completed = self._choose(completed)
        for qs, cand in completed:
            if qs.cq.trailing:
                deadline = cand.start + (qs.cq.window or 0.0)
                if clock > deadline:
                    ctx = Context(moment, ChainProbe(self.ecqs, x.src, hclock, self.timers), x)
                    self._finish(
                        qs,
                        cand,
                        cand.prob * trailing_factor(qs, cand, ctx),
                        moment,
                        phase,
                        arrival,
                        made,
                        out,
                    )
                else:
                    self.deadlines.add(deadline, qs, cand)
            else:
                self._finish(qs, cand, cand.prob, moment, phase, arrival, made, out)
        if len(made) > 1:
            made.sort(key=inst_key)
        return made

    def _choose(self, completed: list[tuple[QState, Cand]]) -> list[tuple[QState, Cand]]:
        """The candidates of the nodes with a policy replaced by those the policy
        emits (docs/semantics.md §11-§12); the others unchanged. Costs nothing per node
        without a policy beyond one dict lookup per completed node."""
        policies = self.policies
        out: list[tuple[QState, Cand]] = []
        grouped: dict[int, tuple[QState, list[Cand]]] = {}
        for qs, cand in completed:
            if qs.bitno in policies:
                if bound_ok(qs.cq, cand.prob):
                    grouped.setdefault(qs.bitno, (qs, []))[1].append(cand)
            else:
                out.append((qs, cand))
        for bitno, (qs, cands) in grouped.items():
            out.extend((qs, cand) for cand in policies[bitno].choose(cands, self.source_log))
        return out

    def _finish(
        self,
        qs: QState,
        cand: Cand,
        prob: float,
        moment: int,
        phase: int,
        arrival: int,
        made: list[Event],
        out: list[Emission],
    ) -> None:
        """A selected match with its final probability: emitted (and made an ``@name``
        instance), or made an instance of its sub-pattern's derived class."""
        cq = qs.cq
        if not bound_ok(cq, prob):
            return
        entries = cand.entries(cq)
        if not cq.top:
            flat = [
                ev
                for item in entries
                for inst in (item if type(item) is list else (item,))
                for ev in inst.flat or (inst,)
            ]
            prims = cand.prims or entry_prims(entries)
            made.append(derived_instance(cand, cq.name, {}, prob, moment, arrival, entries, flat, prims))
            return
        attrs: dict[str, Any] = {}
        for label, fn in cq.returns:
            value = fn(cand.binding)
            if value is not MISSING:
                attrs[label] = value
        out.append(Emission(qs, cand, prob, attrs, phase))
        qs.counted += 1
        derived = qs.derived_class
        if derived in self.ecqs:
            prims = cand.prims or entry_prims(entries)
            made.append(
                derived_instance(cand, derived, dict(attrs), prob, moment, arrival, entries, None, prims)
            )

    # ------------------------------------------------------------------ events

    def process(self, e: Event, hclock: float, moment: int) -> list[tuple[QState, Cand]]:
        """The test and insert phases for one instance (SCEMon §5.1); the nodes it
        completes with their selected candidates (unordered)."""
        self.seen += 1
        ecq = self.ecqs.get(e.type)
        if ecq is None:
            return []
        # One probe per ECQ per instance, shared by every query this instance touches.
        probe = ChainProbe(self.ecqs, e.src, hclock, self.timers)
        completed, tested, own = self._test_phase(ecq, e, moment, hclock, probe)
        self._insert_phase(ecq, e, tested, hclock, own)
        return completed

    def _test_phase(
        self, ecq: ECQ, e: Event, moment: int, hclock: float, probe: ChainProbe
    ) -> tuple[list[tuple[QState, Cand]], Tested, int]:
        """The test phase of ``e`` in ``ECQ[e.type]``: its filters (the search), then the
        plain sequences' extension and the assembly of the matches it completes (the
        kernel), then composite patterns and disjunctions (SCEMon §5.1). Also returns
        the conjunctions whose filter on the class ``e`` passes (its own bits)."""
        kernel = self.kernel
        timers = self.timers
        own = 0
        if timers is None:
            if ecq.cnj_filter is not None:
                own = kernel.slot_passing(ecq.cnj_filter, e)
            tested = kernel.test_phase(ecq, e, kernel.passing(ecq, e), hclock, probe)
        else:
            began = time.perf_counter()
            passed = kernel.passing(ecq, e)
            if ecq.cnj_filter is not None:
                own = kernel.slot_passing(ecq.cnj_filter, e)
            now = time.perf_counter()
            timers["search"] += now - began
            probed = timers["probe"]
            tested = kernel.test_phase(ecq, e, passed, hclock, probe)
        completed = [(qs, fast_cand(qs, ents, prob, e)) for qs, ents, prob in tested.completed]
        if ecq.general_final:
            self._complete_composite(ecq, e, moment, probe, completed)
        if own:
            self._complete_conjunctions(ecq, e, moment, hclock, probe, completed, own)
        if ecq.disj:
            self._complete_disjunctions(ecq, e, completed)
        if timers is not None:
            # Probes made while evaluating are counted under "probe" only.
            timers["evaluate"] += time.perf_counter() - now - (timers["probe"] - probed)
        return completed, tested, own

    def _complete_composite(
        self, ecq: ECQ, e: Event, moment: int, probe: ChainProbe, completed: list[tuple[QState, Cand]]
    ) -> None:
        """Composite patterns (negation, Kleene closure, sub-patterns, conjunctions) that
        ``e`` can complete: matched by walking the chains they need (ecq.matching.composite)."""
        ctx = Context(moment, probe, e)
        chained = ctx.chain_length
        gates = ecq.lone_gates
        if gates is None:
            gates = ecq.lone_gates = _lone_gates(ecq.general_final)
        if gates is not False and all(chained(classes) + 1 < least for classes, least in gates):
            return  # every query here is a lone group short of its minimum at the source
        seen: set[int] = set()
        for clink in ecq.general_final:
            qs = clink.q
            if qs.bitno in seen or qs.cq.never:
                continue
            seen.add(qs.bitno)
            if e.moment <= qs.reg:
                continue
            for cand in complete(qs, e, ctx):
                completed.append((qs, cand))

    def _complete_conjunctions(
        self,
        ecq: ECQ,
        e: Event,
        moment: int,
        hclock: float,
        probe: ChainProbe,
        completed: list[tuple[QState, Cand]],
        own: int,
    ) -> None:
        """Conjunctions of primitive classes that ``e`` may complete: among those whose
        filter on its class it passes (``own``), the ones whose other classes have an
        instance at ``e``'s source passing their filters within their window, found with
        query bitsets (one look for every conjunction: ecq.matching.conjunction), then assembled:
        by the kernel (the compiled one assembles those of primitive classes in C), the
        rest here (ecq.matching.composite), lowest bit first, sharing one probe of each chain."""
        bits = self.kernel.complete_conjunctions(ecq, e, own, hclock, completed)
        if bits:
            self._assemble_conjunctions(e, moment, bits, probe, completed)

    def assemble_conjunctions(
        self, ecq: ECQ, e: Event, bits: int, hclock: float, completed: list[tuple[QState, Cand]]
    ) -> None:
        """The conjunctions of ``bits`` that the compiled kernel's event loop hands back
        (ecq.kernel._conjunction): assembled here, as :meth:`_complete_conjunctions` does."""
        probe = ChainProbe(self.ecqs, e.src, hclock, self.timers)
        self._assemble_conjunctions(e, e.moment, bits, probe, completed)

    def _assemble_conjunctions(
        self, e: Event, moment: int, bits: int, probe: ChainProbe, completed: list[tuple[QState, Cand]]
    ) -> None:
        ctx = Context(moment, probe, e)
        by_bit = self.by_bit
        while bits:
            low = bits & -bits
            bits ^= low
            qs = by_bit[low.bit_length() - 1]
            if qs.cq.never or e.moment <= qs.reg:
                continue
            for cand in complete(qs, e, ctx):
                completed.append((qs, cand))

    @staticmethod
    def _complete_disjunctions(ecq: ECQ, e: Event, completed: list[tuple[QState, Cand]]) -> None:
        """Disjunctions: each passing instance is a match by itself, nothing stored."""
        taken: set[int] = set()
        for clink in ecq.disj:
            qs = clink.q
            if qs.bitno in taken or qs.cq.never:
                continue
            f = qs.cq.comps[clink.position].filter
            if f is None or f(e):
                taken.add(qs.bitno)
                if bound_ok(qs.cq, e.prob):
                    completed.append((qs, match_cand([e], e, single=clink.position, length=qs.cq.length)))

    def _insert_phase(self, ecq: ECQ, e: Event, tested: Tested, hclock: float, own: int) -> None:
        """The insert phase: ``e`` is stored once, with its PMB, if any partial match
        can go on from it (the kernel)."""
        timers = self.timers
        if own:
            # Stored (conjunctions count as uses): present at its source for the
            # conjunctions whose filter it passes.
            self.kernel.note_conjunction(e, ecq.cls, own)
        if timers is None:
            self.kernel.insert_phase(ecq, e, tested, hclock)
            return
        began = time.perf_counter()
        self.kernel.insert_phase(ecq, e, tested, hclock)
        timers["insert"] += time.perf_counter() - began

    # ----------------------------------------------------------------- cleaning

    def clean(self, clock: float, arrived: int | None = None) -> int:
        """Cleaning: drop the summaries' entries no window reaches, then the instances
        below their class's horizon; returns how many instances went. ``arrived``: the
        events stamped so far (a bound for what the policies used up).
        O(dropped + ECQs + summary groups)."""
        kernel = self.kernel
        kernel.prune(clock)
        kernel.prune_conjunctions(clock)
        dropped = sum(kernel.clean_siq(ecq.siq, ecq.horizon(clock)) for ecq in self.ecqs.values())
        if self.policies:
            self._clean_policies(arrived)
        return dropped

    def _clean_policies(self, arrived: int | None) -> None:
        """What the policies used up, and the source log, below every instance still
        stored that they could use (ecq.matching.policy): per query, the smallest
        arrival index stored in its classes' SIQs (they keep arrival order and drop from
        the front; infinity: none). O(classes + policies × their classes)."""
        inf = float("inf")
        front = {cls: ecq.siq.queue[0].arrival for cls, ecq in self.ecqs.items() if ecq.siq.queue}
        logged = inf
        for bitno, st in self.policies.items():
            # (A policy that neither uses events up nor reads the log keeps nothing.)
            if not (st.consumes or st.logs):
                continue
            alive = min((front.get(cls, inf) for cls in self.by_bit[bitno].classes), default=inf)
            if st.consumes:
                st.clean(alive, arrived)
            if st.logs:
                logged = min(logged, alive)
        if self.source_log is not None:
            self.source_log.clean(logged)

    def stored(self) -> int:
        return sum(len(ecq.siq) for ecq in self.ecqs.values())

    def pmb_entries(self) -> int:
        return sum(e.pmb.size() for ecq in self.ecqs.values() for e in ecq.siq if e.pmb is not None)

    def pending(self) -> int:
        return sum(qs.waiting for qs in self._nodes()) + self.kernel.pending()

    def _check(self) -> None:
        for cls, ecq in self.ecqs.items():
            assert ecq.cls == cls and ecq.clt, f"ECQ {cls} must have CLinks"
            ecq._check()
            for target in ecq.rclt:
                assert target in self.ecqs
            assert ecq.general_uses >= 0
        for qs in self._nodes():
            assert self.by_bit[qs.bitno] is qs
            for cls in qs.classes:
                assert any(c.q is qs for c in self.ecqs[cls].clt)
        assert len(self.by_bit) == len(self.queries) + len(self.subs)
        by_window: dict[float, int] = {}
        for qs in self.by_bit.values():
            if qs.cq.window is not None:
                by_window[qs.cq.window] = by_window.get(qs.cq.window, 0) | qs.bit
        assert by_window == self._window_bits, "window bits must follow the nodes"
        self.deadlines._check()
        self.kernel.check()


class _Place:
    """One class at one position of the sequences in a bulk registration
    (``Network._link_skeleton_bulk``): its ECQ and CLT, its slot (whose filters keep
    their waiting queries themselves: ``SlotFilter.wait``) and the bit numbers waiting
    to join the slot's ``always``, its final or more mask, and each R-CLink's mask."""

    __slots__ = ("ecq", "clt", "slot", "wait", "target", "always", "preds")

    def __init__(self, ecq: ECQ, slot: SlotFilter, target: list[int]) -> None:
        self.ecq = ecq
        self.clt = ecq.clt
        self.slot = slot
        self.wait = slot.wait
        self.target = target
        self.always: list[int] | None = None
        self.preds: dict[str, list[int]] = {}


class _BulkBits:
    """Query bits waiting to join their masks until a bulk registration ends: per mask
    (a dict's entry, or a slot's ``always``), the bit numbers, ORed in at once; the
    slots whose filters hold waiting queries (``SlotFilter.wait``), flushed once; per
    class, the windows its horizon takes in one call. Each OR of one query's bit into a
    mask as wide as the batch copies the mask: per query, registering 100,000 took
    twice as long a query as registering 10,000."""

    __slots__ = (
        "ecqs",
        "masks",
        "slots",
        "filters",
        "final",
        "more",
        "fields",
        "counts",
        "windows",
        "clock",
        "by_window",
    )

    def __init__(self, ecqs: dict[str, ECQ]) -> None:
        self.ecqs = ecqs
        self.masks: dict[int, tuple[dict[Any, int], dict[Any, list[int]]]] = {}
        self.slots: dict[int, tuple[SlotFilter, list[int]]] = {}
        # The slots whose filters may have queries waiting (SlotFilter.wait), by id.
        self.filters: dict[int, SlotFilter] = {}
        # The places of the sequences' positions (``Network._link_skeleton_bulk``):
        # per position, per class, of the queries it is the last position of
        # (``final``) or not (``more``).
        self.final: dict[int, dict[str, _Place]] = {}
        self.more: dict[int, dict[str, _Place]] = {}
        # Per ECQ, the bit numbers waiting to join its conjunctions' masks (the
        # attributes ``cnj_final``, ``cnj_loose``) and bit slices (``cnj_count[j]``).
        self.fields: dict[int, tuple[ECQ, dict[str, list[int]]]] = {}
        self.counts: dict[int, tuple[ECQ, dict[int, list[int]]]] = {}
        # The storing queries' windows waiting to join their classes' horizons: per
        # class, in the order they came, all at one clock (None: none yet).
        self.windows: dict[str, list[float]] = {}
        self.clock: float | None = None
        # Per window, the bit numbers waiting to join the network's mask of it (the
        # list :meth:`pending` gives, found once a batch).
        self.by_window: dict[float, list[int]] = {}

    def link(self, ecq: ECQ, qs: QState, uses: Uses) -> None:
        """``ecq.matching.conjunction.link`` in a bulk registration, once per class of
        the query (``uses``: ``uses_of(qs)``): the same masks, filters and counts, their
        bits left to :meth:`flush`."""
        bitno = qs.bitno
        fields = self.fields.get(id(ecq))
        if fields is None:
            fields = self.fields[id(ecq)] = (ecq, {})
        fields[1].setdefault("cnj_final", []).append(bitno)
        own = own_filter(qs, ecq.cls, uses)
        if ecq.cnj_filter is None:
            ecq.cnj_filter = SlotFilter()
        if own is None:
            self.always_of(ecq.cnj_filter).append(bitno)
        else:
            assert own.filter is not None, "own_filter gives a component with a filter"
            slot = ecq.cnj_filter
            self.filters[id(slot)] = slot
            slot.wait(bitno, own.filter, own.filter_id, own.filter_conjuncts)
        need, countable = needs(qs, ecq.cls, uses)
        if not countable:
            fields[1].setdefault("cnj_loose", []).append(bitno)
            return
        for cls in need:
            self.pending(ecq.cnj_need, cls).append(bitno)
        ecq.cnj_each[bitno] = (tuple(sorted(need)), qs.cq.window or 0.0)
        counts = self.counts.get(id(ecq))
        if counts is None:
            counts = self.counts[id(ecq)] = (ecq, {})
        r, j = len(need), 0
        while r:
            if r & 1:
                counts[1].setdefault(j, []).append(bitno)
            r >>= 1
            j += 1

    def place(self, ecq: ECQ, p: int, is_last: bool) -> _Place:
        """A new place: ``ecq``'s class at position ``p`` of the sequences, the last
        position of its queries or not."""
        slot = ecq.seq_filters.get(p)
        if slot is None:
            slot = ecq.seq_filters[p] = SlotFilter()
        self.filters[id(slot)] = slot
        return _Place(ecq, slot, self.pending(ecq.seq_final if is_last else ecq.seq_more, p))

    def rclink_of(self, ecq: ECQ, pred_cls: str, p: int) -> list[int]:
        """The bit numbers waiting to join the mask of position ``p`` of ``ecq``'s
        R-CLink to ``pred_cls`` (made when missing)."""
        rl = ecq.rclt.get(pred_cls)
        if rl is None:
            rl = ecq.rclt[pred_cls] = RCLink(pred_cls)
        return self.pending(rl.masks, p)

    def add_windows(self, classes: tuple[str, ...], window: float, clock: float) -> None:
        """A storing query of ``classes`` with ``window``, registered at ``clock``:
        ``ECQ.set_windows`` of each class, left to :meth:`flush` (one
        ``Horizon.add_windows`` per class of the batch, not a call per query and class)."""
        if clock != self.clock:
            self._flush_windows()
            self.clock = clock
        by_class = self.windows
        for cls in classes:
            got = by_class.get(cls)
            if got is None:
                got = by_class[cls] = []
            got.append(window)

    def _flush_windows(self) -> None:
        clock = self.clock
        for cls, windows in self.windows.items():
            assert clock is not None, "windows wait with their clock"
            # Adding windows never empties the queue (ECQ.set_windows's only extra).
            self.ecqs[cls].drop.add_windows(clock, windows)
        self.windows = {}

    def pending(self, masks: dict[Any, int], key: Any) -> list[int]:
        """The bit numbers waiting to join ``masks[key]`` (append to it)."""
        entry = self.masks.get(id(masks))
        if entry is None:
            entry = self.masks[id(masks)] = (masks, {})
        got = entry[1].get(key)
        if got is None:
            got = entry[1][key] = []
        return got

    def always_of(self, slot: SlotFilter) -> list[int]:
        """The bit numbers waiting to join the queries ``slot`` takes without a filter."""
        entry = self.slots.get(id(slot))
        if entry is None:
            entry = self.slots[id(slot)] = (slot, [])
        return entry[1]

    def flush(self) -> None:
        if self.windows:
            self._flush_windows()
        for masks, pending in self.masks.values():
            for key, bitnos in pending.items():
                masks[key] = masks.get(key, 0) | bits_of(bitnos)
        for slot, bitnos in self.slots.values():
            slot.always |= bits_of(bitnos)
            slot.native = None
        for slot in self.filters.values():
            # By their numbers: no set as wide as the query numbers per filter.
            slot.flush()
        for ecq, fields in self.fields.values():
            for name, bitnos in fields.items():
                setattr(ecq, name, getattr(ecq, name) | bits_of(bitnos))
        for ecq, slices in self.counts.values():
            for j, bitnos in slices.items():
                while len(ecq.cnj_count) <= j:
                    ecq.cnj_count.append(0)
                ecq.cnj_count[j] |= bits_of(bitnos)


def _clear(masks: dict[int, int], k: int, bit: int) -> None:
    left = masks.get(k, 0) & ~bit
    if left:
        masks[k] = left
    else:
        masks.pop(k, None)


def _lone_gates(final: list[CLink]) -> tuple[tuple[frozenset[str], int], ...] | Literal[False]:
    """:attr:`ECQ.lone_gates` of an ECQ whose completing CLinks are ``final``."""
    least: dict[frozenset[str], int] = {}
    for clink in final:
        cq = clink.q.cq
        if not cq.open_kleene:
            return False
        comp = cq.comps[cq.positives[0]]
        need = comp.kleene[0]  # type: ignore[index]
        if need <= 1:
            return False
        least[comp.classes] = min(need, least.get(comp.classes, need))
    return tuple(least.items())
