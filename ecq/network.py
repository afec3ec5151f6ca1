"""The shared ECQ network: every registered query compiled into one set of ECQs.

Per arriving instance ``e`` of class ``X`` (SCEMon §5.1):

- **test phase**: look up ``ECQ[X]`` (one dict lookup; a class no query uses costs
  nothing more); evaluate the distinct filters of the positions ``X`` fills; for each
  R-CLink probe the predecessor ECQ *once* for ``e``'s source and extend, with a few
  big-integer operations per predecessor PMatch group, the partial matches of every plain
  sequence query that needs it (the window is a precomputed bitset per bound). Queries
  whose last position ``e`` reaches are handed to :mod:`ecq.assembly`; composite patterns
  (negation, Kleene closure, sub-patterns, conjunctions) to :mod:`ecq.composite`, through
  the same probe cache.
- **insert phase**: if ``e`` can still take part in a match, store it once in
  ``ECQ[X]``'s SIQ with its PMB, whatever number of queries it serves.

Sub-patterns are nodes of their own whose matches become instances of a derived class
(SCEMon's virtual primitive event classes) and go through the network like events; every
query's matches likewise become instances of ``@<name>`` when some query reads them.
Each op is a *moment* (docs/semantics.md): the clock first releases pending trailing
negations (phase 0), then the event is processed (phase 1).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from ecq import accel
from ecq.assembly import assemble_seq
from ecq.candidate import Cand
from ecq.composite import (
    Context,
    bound_ok,
    complete,
    derived_instance,
    entry_key,
    entry_prims,
    inst_key,
    match_cand,
    trailing_factor,
)
from ecq.conditions import MISSING
from ecq.ecq import ECQ, CLink, SlotFilter
from ecq.errors import SemanticError
from ecq.event import Event
from ecq.match import Match
from ecq.pmb import PMB, merge_latest, resolve_latest
from ecq.qstate import QState
from ecq.query import KIND_OR, KIND_SEQ, CompiledQuery

__all__ = ["Network", "Emission", "LEVELS", "matches_of", "reachable", "check_depends"]

# Ablation levels of the benchmark, each adding one technique to the one before:
#   instances   instance sharing only (paper §5.1): one probe per CLink, one PMatch per query
#   subpatterns + sub-pattern sharing (§5.2): one probe per R-CLink, shared by its queries
#   pmb         + PMB reduction (§5.3): initial PMatch entries implied by the instance
#   bitsets     + query bitsets: an R-CLink extends all its queries with big-int operations
#   summary     + per-source summaries of the latest partial-match start per query: one
#                 pass over a source's few groups instead of one probe per predecessor
LEVELS = ("instances", "subpatterns", "pmb", "bitsets", "summary")


class Emission:
    """A query's match leaving the network, with what orders it (docs/semantics.md)."""

    __slots__ = ("qs", "cand", "prob", "attrs", "phase", "entries")

    def __init__(self, qs: QState, cand: Cand, prob: float, attrs: dict[str, Any], phase: int) -> None:
        self.qs = qs
        self.cand = cand
        self.prob = prob
        self.attrs = attrs
        self.phase = phase
        self.entries: list[Any] = cand.entries(qs.cq)

    def sort_key(self) -> tuple[Any, ...]:
        entries = self.entries
        for x in entries:
            if type(x) is not Event or x.parts is not None:
                return (self.phase, self.qs.order, entry_key(entries))
        # Primitive events only (the common case): their arrival indexes order them.
        return (self.phase, self.qs.order, (1, tuple([(0, x.arrival) for x in entries])))


def matches_of(emitted: list[Emission], trigger: int, first_seq: int) -> list[Match]:
    """The matches of one op in emission order (docs/semantics.md), numbered from
    ``first_seq``."""
    if len(emitted) > 1:
        emitted.sort(key=Emission.sort_key)
    out = []
    for seq, em in enumerate(emitted, first_seq):
        cand = em.cand
        cq = em.qs.cq
        out.append(
            Match(
                cq.name,
                cand.trigger.src,
                cand.start,
                cand.end,
                em.entries,
                em.attrs,
                em.prob,
                seq,
                trigger,
            )
        )
    return out


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
            raise SemanticError(f"@{dep} names no registered query")
    if cq.name in reachable(cq.depends, depends):
        raise SemanticError(f"query {cq.name!r} would read its own matches through @name: a cycle")


class Network:
    """All ECQs, the registered nodes and their bit assignment."""

    def __init__(self, level: str = "summary", profile: bool = False, compiled: bool | None = None) -> None:
        if level not in LEVELS:
            raise ValueError(f"level must be one of {', '.join(LEVELS)}")
        if compiled and not accel.available():
            raise ValueError("the compiled functions are not built (make install) or SCEMON_PURE is set")
        self.level = level
        # The compiled twins of the summary level's hot functions (ecq.accel), or None.
        self._c: Any = accel.speedups if compiled is not False else None
        self.reduced = level not in ("instances", "subpatterns")
        # Per-phase seconds when profiling (the benchmark's breakdown), else None.
        self.timers: dict[str, float] | None = (
            dict.fromkeys(("search", "probe", "evaluate", "insert", "clean"), 0.0) if profile else None
        )
        # The compiled event loop and plain phases run the summary level when not
        # profiling (the profiled loop times the phases from Python).
        self.compiled_plain = self._c is not None and level == "summary" and not profile
        # Per source (level "summary"): (latest (start, bits) per class for first components, and for each
        # later position one latest-first list of disjoint (start, bits) groups); with
        # the compiled functions the same content natively (``_speedups.SrcSummary``).
        self.summary: dict[Any, Any] = {}
        # What the compiled part derives from the registered queries (ecq._speedups
        # _net_of), emptied whenever they change.
        self.c_cache: dict[str, Any] = {}
        # Class names numbered by the compiled part (ecq._speedups._class_id), for good.
        self.c_class_ids: dict[str, int] = {}
        self.c_class_names: list[str] = []
        # The nodes of each window (bits), kept as nodes come and go.
        self._window_bits: dict[float, int] = {}
        self._max_window = float("-inf")
        # Spans up to the smallest window pass every query's window: no mask needed.
        self._min_window = float("-inf")
        # Nodes holding pending trailing-negation matches, and the earliest deadline.
        self._pending_nodes: set[QState] = set()
        self._next_deadline = float("inf")
        self.ecqs: dict[str, ECQ] = {}
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
        # Window masks: ascending distinct windows and, for each, the nodes whose window
        # is at least that long.
        self._wins: list[float] = []
        self._wcum: list[int] = []

    # ------------------------------------------------------------- registration

    def register(self, cq: CompiledQuery, moment: int, clock: float) -> QState:
        """Add a query (and the sub-patterns it needs); it sees instances of later
        moments. Raises :class:`SemanticError` for an unknown or cyclic ``@name``."""
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
        bit = qs.bit
        n = cq.length
        for cls in qs.classes:
            if cls not in self.ecqs:
                self.ecqs[cls] = ECQ(cls)
        last_positive = cq.positives[-1]
        for k, comp in enumerate(cq.comps):
            for cls in comp.classes:
                ecq = self.ecqs[cls]
                ecq.clt.append(CLink(qs, k))
                if qs.fast:
                    ecq.seq_filters.setdefault(k, SlotFilter()).add(bit, comp.filter, comp.filter_key)
                    target = ecq.seq_final if k == n - 1 else ecq.seq_more
                    target[k] = target.get(k, 0) | bit
                    if k >= 1:
                        for pred_cls in cq.comps[k - 1].classes:
                            ecq.rclt.link(pred_cls, k, bit)
                elif cq.kind == KIND_OR:
                    ecq.disj.append(CLink(qs, k))
                else:
                    ecq.general_uses += 1
                    if not comp.negated and (cq.kind != KIND_SEQ or k == last_positive):
                        ecq.general_final.append(CLink(qs, k))
        if cq.stores and cq.window is not None:
            for cls in qs.classes:
                self.ecqs[cls].set_windows(clock, add=cq.window)
        for cls in qs.classes:
            self.ecqs[cls].refresh()
        self.by_bit[qs.bitno] = qs
        if cq.window is not None:
            self._window_bits[cq.window] = self._window_bits.get(cq.window, 0) | bit
        self._rebuild_windows()
        return qs

    def _remove_node(self, qs: QState, moment: int, clock: float) -> None:
        cq = qs.cq
        bit = qs.bit
        n = cq.length
        for k, comp in enumerate(cq.comps):
            for cls in comp.classes:
                ecq = self.ecqs[cls]
                ecq.clt.drop(qs)
                if qs.fast:
                    self._unset(ecq.seq_filters, k, bit, comp.filter_key)
                    _clear(ecq.seq_final if k == n - 1 else ecq.seq_more, k, bit)
                    if k >= 1:
                        for pred_cls in cq.comps[k - 1].classes:
                            ecq.rclt.unlink(pred_cls, k, bit)
                elif cq.kind == KIND_OR:
                    ecq.disj = [c for c in ecq.disj if c.q is not qs]
                else:
                    ecq.general_uses -= 1
                    ecq.general_final = [c for c in ecq.general_final if c.q is not qs]
        if cq.stores and cq.window is not None:
            for cls in qs.classes:
                self.ecqs[cls].set_windows(clock, remove=cq.window)
        for cls in qs.classes:
            if not self.ecqs[cls].clt:
                del self.ecqs[cls]
            else:
                self.ecqs[cls].refresh()
        del self.by_bit[qs.bitno]
        if cq.window is not None:
            left = self._window_bits[cq.window] & ~bit
            if left:
                self._window_bits[cq.window] = left
            else:
                del self._window_bits[cq.window]
        self._free.append((moment, qs.bitno))
        qs.pending.clear()
        self._pending_nodes.discard(qs)
        if qs.fast and self._c is not None:
            for native in self.summary.values():
                native.remove_bit(qs.bitno)
        elif qs.fast and self.summary:
            keep = ~bit
            for starts, later in self.summary.values():
                for cls, (t, b) in list(starts.items()):
                    if b & keep:
                        starts[cls] = (t, b & keep)
                    else:
                        del starts[cls]
                for groups in later:
                    groups[:] = [(t, b & keep) for t, b in groups if b & keep]
        self._rebuild_windows()

    @staticmethod
    def _unset(filters: dict[int, SlotFilter], k: int, bit: int, key: tuple[object, ...]) -> None:
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
        self.c_cache = {}
        by_window = self._window_bits
        self._wins = sorted(by_window)
        self._max_window = self._wins[-1] if self._wins else float("-inf")
        self._min_window = self._wins[0] if self._wins else float("-inf")
        cum = 0
        wcum = [0] * len(self._wins)
        for j in range(len(self._wins) - 1, -1, -1):
            cum |= by_window[self._wins[j]]
            wcum[j] = cum
        self._wcum = wcum

    def window_mask(self, span: float) -> int:
        """Nodes whose window admits ``span`` (``span <= window``). O(log windows)."""
        j = bisect_left(self._wins, span)
        return self._wcum[j] if j < len(self._wcum) else 0

    # ------------------------------------------------------------------ moments

    def on_event(self, e: Event, clock_before: float, clock: float) -> list[Emission] | None:
        """One event op: release due trailing negations (phase 0, against the state just
        before the op), then process the event (phase 1). None when nothing is emitted."""
        out: list[Emission] = []
        if clock > self._next_deadline:
            self.fire(e.moment - 1, clock_before, clock, e.arrival, out)
        completed = self.process(e, clock, e.moment)
        if completed:
            self._conclude(completed, e, clock, out)
        return out or None

    def settle_plain(self, found: list[tuple[QState, list[Event]]], e: Event, clock: float) -> list[Emission]:
        """The rest of :meth:`on_event` after the compiled plain phases found matches
        (``(node, events)``) that need more than emitting: trailing negation, RETURN,
        probability, sub-patterns, ``@name`` readers."""
        out: list[Emission] = []
        self._conclude([(qs, match_cand(env, e)) for qs, env in found], e, clock, out)
        return out

    def _conclude(
        self, completed: list[tuple[QState, Cand]], e: Event, clock: float, out: list[Emission]
    ) -> None:
        """Phase 1 after the test phase: settle what ``e`` completed, then run the
        derived instances that makes."""
        made = self._settle(completed, e, e.moment, clock, clock, 1, e.arrival, out)
        if made:
            self._run(made, e.moment, clock, clock, 1, e.arrival, out)

    def fire(self, moment: int, clock_before: float, clock: float, arrival: int, out: list[Emission]) -> None:
        """Phase 0: every pending trailing-negation match whose deadline the clock now
        exceeds is checked for blockers that arrived before this moment and finished."""
        if not clock > self._next_deadline:
            return
        made: list[Event] = []
        for qs in sorted(self._pending_nodes, key=lambda q: q.order):
            due = [(c, d) for c, d in qs.pending if clock > d]
            if not due:
                continue
            qs.pending = [(c, d) for c, d in qs.pending if not clock > d]
            for cand, _deadline in due:
                ctx = Context(moment, self._probe(cand.trigger.src, clock_before))
                self._finish(
                    qs, cand, cand.prob * trailing_factor(qs, cand, ctx), moment, 0, arrival, made, out
                )
        self._pending_nodes = {qs for qs in self._pending_nodes if qs.pending}
        self._next_deadline = min(
            (d for qs in self._pending_nodes for _, d in qs.pending), default=float("inf")
        )
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
        for qs, cand in completed:
            if qs.cq.trailing:
                deadline = cand.start + (qs.cq.window or 0.0)
                if clock > deadline:
                    ctx = Context(moment, self._probe(x.src, hclock), x)
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
                    qs.pending.append((cand, deadline))
                    self._pending_nodes.add(qs)
                    if deadline < self._next_deadline:
                        self._next_deadline = deadline
            else:
                self._finish(qs, cand, cand.prob, moment, phase, arrival, made, out)
        if len(made) > 1:
            made.sort(key=inst_key)
        return made

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

    def _probe(self, src: Any, hclock: float, cache: bool = True) -> Any:
        """The probe of one source's visible instances of a class, latest first; cached
        for the instance being processed (one probe per ECQ, shared by all queries)."""
        ecqs = self.ecqs
        probes: dict[str, list[Event]] = {}
        timers = self.timers

        def probe(cls: str) -> list[Event]:
            got = probes.get(cls) if cache else None
            if got is None:
                began = time.perf_counter() if timers is not None else 0.0
                target = ecqs.get(cls)
                got = target.siq.chain(src, target.horizon(hclock)) if target is not None else []
                probes[cls] = got
                if timers is not None:
                    timers["probe"] += time.perf_counter() - began
            return got

        return probe

    # ------------------------------------------------------------------ events

    def process(self, e: Event, hclock: float, moment: int) -> list[tuple[QState, Cand]]:
        """Test and insert phases for one instance; the nodes it completes with their
        selected candidates (unordered)."""
        self.seen += 1
        ecq = self.ecqs.get(e.type)
        if ecq is None:
            return []
        # The probe (built on first use: most events complete nothing) is shared by every
        # query this instance touches: one probe per ECQ per instance.
        probe: Any = None
        completed: list[tuple[QState, Cand]] = []
        static = ecq.static_pass

        # ---- plain sequences: filters, then extend every query's partial matches
        timers = self.timers
        began = time.perf_counter() if timers is not None else 0.0
        if static is not None:
            seq_pass = static
        else:
            seq_pass = {k: slot.passing(e) for k, slot in ecq.seq_filters.items()}
        if timers is not None:
            now = time.perf_counter()
            timers["search"] += now - began
            began = now
            probed = timers["probe"]
        compiled = self.compiled_plain
        extended: dict[int, list[tuple[float, int]]] = {}
        if compiled:
            pairs: list[tuple[QState, list[Event]]] = []
            extended = self._c.test_plain(self, ecq, e, seq_pass, hclock, pairs)
            completed = [(qs, match_cand(env, e)) for qs, env in pairs]
        else:
            if len(seq_pass) > 1 or 0 not in seq_pass:
                level = self.level
                if level == "summary":
                    if self._c is not None:
                        extended = self._c.extend_summary(self, ecq, e, seq_pass)
                    else:
                        extended = self._extend_summary(ecq, e, seq_pass)
                elif level == "bitsets":
                    probe = self._probe(e.src, hclock)
                    extended = self._extend_bitsets(ecq, e, seq_pass, probe)
                else:
                    probe = self._probe(e.src, hclock)
                    extended = self._extend_per_query(ecq, e, seq_pass, probe, hclock)

            done = seq_pass.get(0, 0) & ecq.seq_final.get(0, 0)
            for k, groups in extended.items():
                final = ecq.seq_final.get(k, 0)
                if final:
                    for _t, bits in groups:
                        done |= bits & final
            if done:
                if probe is None:
                    probe = self._probe(e.src, hclock)
                for qs in self._nodes_of(done):
                    cq = qs.cq
                    if cq.never:
                        continue
                    if cq.length == 1:
                        if bound_ok(cq, e.prob):
                            completed.append((qs, match_cand([e], e)))
                    else:
                        found = (
                            self._c.assemble_seq(qs, e, probe)
                            if self._c is not None
                            else assemble_seq(qs, e, probe)
                        )
                        for env in found:
                            completed.append((qs, match_cand(env, e)))

        # ---- composite patterns: negation, Kleene closure, sub-patterns, conjunctions
        if ecq.general_final:
            if probe is None:
                probe = self._probe(e.src, hclock)
            ctx = Context(moment, probe, e)
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

        # ---- disjunctions: each passing event is a match by itself, nothing stored
        if ecq.disj:
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

        # ---- insert phase: store once if any partial match can go on from here
        if timers is not None:
            now = time.perf_counter()
            # Probes made while evaluating are counted under "probe" only.
            timers["evaluate"] += now - began - (timers["probe"] - probed)
            began = now
        if compiled:
            self._c.insert_plain(self, ecq, e, seq_pass, extended, hclock)
            return completed
        init = seq_pass.get(0, 0) & ecq.seq_more.get(0, 0)
        kept: dict[int, list[tuple[float, int]]] | None = None
        if init and not self.reduced:
            kept = {0: [(e.start, init)]}
            init = 0
        for k, groups in extended.items():
            more = ecq.seq_more.get(k, 0)
            if not more:
                continue
            keep = [(t, bits & more) for t, bits in groups if bits & more]
            if keep:
                if kept is None:
                    kept = {}
                kept[k] = keep
        if init or kept or ecq.general_uses:
            e._pmb = PMB(init, kept)
            ecq.siq.insert(e)
            if self.level == "summary" and (init or kept):
                if self._c is not None:
                    self._c.summarise(self, e, init, kept, hclock)
                else:
                    self._summarise(e, init, kept, hclock)
        if timers is not None:
            timers["insert"] += time.perf_counter() - began
        return completed

    # ------------------------------------------------------------- extension

    def _extend_summary(
        self, ecq: ECQ, e: Event, seq_pass: dict[int, int]
    ) -> dict[int, list[tuple[float, int]]]:
        """Level "summary": for each position ``k`` of ``e``'s class, the queries whose
        partial match at ``k - 1`` (at ``e``'s source) ``e`` extends within their window,
        from the source's summary. O(groups of the source) big-int operations."""
        summary = self.summary.get(e.src)
        out: dict[int, list[tuple[float, int]]] = {}
        if summary is None:
            return out
        starts, later = summary
        window_mask = self.window_mask
        full = self._min_window
        e_end = e.end
        oldest = e_end - self._max_window
        final = ecq.seq_final
        more = ecq.seq_more
        for k, passed in seq_pass.items():
            if k == 0 or k > len(later) + 1:
                continue
            m = passed & (final.get(k, 0) | more.get(k, 0))
            if not m:
                continue
            res: list[tuple[float, int]] = []
            if k == 1:
                # One group per class: the latest instance of each class that can start.
                stale = None
                for cls, (t, bits) in starts.items():
                    if t < oldest:
                        stale = [cls] if stale is None else [*stale, cls]
                        continue
                    bb = bits & m
                    if bb:
                        if e_end - t > full:
                            bb &= window_mask(e_end - t)
                        if bb:
                            res.append((t, bb))
                if stale is not None:
                    for cls in stale:
                        del starts[cls]
            else:
                for t, bits in later[k - 2]:
                    if t < oldest:
                        break  # latest first: no window reaches this group or the rest
                    bb = bits & m
                    if bb:
                        if e_end - t > full:
                            bb &= window_mask(e_end - t)
                        if bb:
                            res.append((t, bb))
            if res:
                # First positions: each query at its latest start, one group per distinct
                # start (classes' entries share query bits only through ANY(...)); later
                # positions' groups are that already.
                out[k] = resolve_latest(res) if k == 1 else res
        return out

    def _summarise(
        self, e: Event, init: int, kept: dict[int, list[tuple[float, int]]] | None, hclock: float
    ) -> None:
        """Fold ``e``'s PMB into its source's summary: for first components one entry
        per class (its latest start, and the queries its instances start), for later
        positions one list of disjoint groups keeping each query's latest start. Both
        are upper bounds used to prune; matches are verified when assembled.
        O(groups of the source)."""
        summary = self.summary.get(e.src)
        if summary is None:
            summary = self.summary[e.src] = ({}, [])
        starts: dict[str, tuple[float, int]] = summary[0]
        later: list[list[tuple[float, int]]] = summary[1]
        cutoff = hclock - self._max_window
        if init:
            previous = starts.get(e.type)
            if previous is None:
                starts[e.type] = (e.start, init)
            else:
                # One entry per class: the latest start and every query any instance of
                # the class can start, an upper bound that the assembly verifies.
                t, bits = previous
                starts[e.type] = (e.start if e.start > t else t, bits | init)
        if kept:
            for k, groups in kept.items():
                while len(later) < k:
                    later.append([])
                merge_latest(later[k - 1], groups, cutoff)

    def prune_summary(self, clock: float) -> None:
        """Drop summary groups no window can reach any more (run with cleaning)."""
        cutoff = clock - self._max_window
        if self._c is not None:
            for native in self.summary.values():
                native.prune(cutoff)
            for src in [src for src, native in self.summary.items() if native.empty()]:
                del self.summary[src]
            return
        empty = []
        for src, (starts, later) in self.summary.items():
            for cls in [c for c, (t, _) in starts.items() if t < cutoff]:
                del starts[cls]
            for groups in later:
                if groups and groups[-1][0] < cutoff:
                    groups[:] = [g for g in groups if g[0] >= cutoff]
            if not starts and not any(later):
                empty.append(src)
        for src in empty:
            del self.summary[src]

    def _extend_bitsets(
        self, ecq: ECQ, e: Event, seq_pass: dict[int, int], probe: Any
    ) -> dict[int, list[tuple[float, int]]]:
        """Level "bitsets": one probe per R-CLink; all its queries extended at once."""
        extended: dict[int, list[tuple[float, int]]] = {}
        if not ecq.rclt:
            return extended
        window_mask = self.window_mask
        e_start = e.start
        e_end = e.end
        wcache: dict[float, int] = {}
        gathered: dict[int, list[tuple[float, int]]] = {}
        for pred_cls, rl in ecq.rclt.items():
            cands: list[Event] | None = None
            for k, mask in rl.masks.items():
                m = mask & seq_pass.get(k, 0)
                if not m:
                    continue
                if cands is None:
                    cands = probe(pred_cls)
                if not cands:
                    break
                groups = gathered.setdefault(k, [])
                for p in cands:
                    if p.end > e_start:
                        continue
                    pmb = p._pmb
                    if k == 1:
                        if not pmb.init & m:
                            continue
                        source: Any = ((p.start, pmb.init),)
                    else:
                        source = pmb.entries.get(k - 1, ()) if pmb.entries else ()
                    for t, bits in source:
                        bb = bits & m
                        if bb:
                            wm = wcache.get(t)
                            if wm is None:
                                wm = wcache[t] = window_mask(e_end - t)
                            bb &= wm
                            if bb:
                                groups.append((t, bb))
        for k, groups in gathered.items():
            if groups:
                extended[k] = resolve_latest(groups)
        return extended

    def _extend_per_query(
        self, ecq: ECQ, e: Event, seq_pass: dict[int, int], probe: Any, hclock: float
    ) -> dict[int, list[tuple[float, int]]]:
        """Levels "instances", "subpatterns" and "pmb": the paper's test phase, query by
        query; "instances" probes once per CLink, the others once per R-CLink."""
        shared = self.level != "instances"
        own = probe if shared else self._probe(e.src, hclock, cache=False)
        found: dict[int, list[tuple[float, int]]] = {}
        for clink in ecq.clt:
            qs = clink.q
            k = clink.position
            if k == 0 or not qs.fast or not seq_pass.get(k, 0) & qs.bit:
                continue
            bit = qs.bit
            low = e.end - (qs.cq.window or 0.0)
            best: float | None = None
            for pred_cls in qs.classes_at[k - 1]:
                for p in own(pred_cls):
                    if p.end > e.start:
                        continue
                    t = p._pmb.latest(k - 1, bit, p.start)
                    if t is not None and t >= low and (best is None or t > best):
                        best = t
            if best is not None:
                found.setdefault(k, []).append((best, bit))
        return {k: resolve_latest(groups) for k, groups in found.items()}

    def _nodes_of(self, bits: int) -> list[QState]:
        """The nodes of a bitset. O(set bits)."""
        by_bit = self.by_bit
        out = []
        while bits:
            low = bits & -bits
            out.append(by_bit[low.bit_length() - 1])
            bits ^= low
        return out

    # ----------------------------------------------------------------- cleaning

    def clean(self, clock: float) -> int:
        """Drop instances below their class's horizon; returns how many.
        O(dropped + ECQs + summary groups)."""
        if self.summary:
            self.prune_summary(clock)
        if self._c is not None:
            return sum(self._c.clean_siq(ecq.siq, ecq.horizon(clock)) for ecq in self.ecqs.values())
        return sum(ecq.siq.clean(ecq.horizon(clock)) for ecq in self.ecqs.values())

    def stored(self) -> int:
        return sum(len(ecq.siq) for ecq in self.ecqs.values())

    def pmb_entries(self) -> int:
        return sum(e._pmb.size() for ecq in self.ecqs.values() for e in ecq.siq if e._pmb is not None)

    def pending(self) -> int:
        return sum(len(qs.pending) for qs in self._nodes())

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


def _clear(masks: dict[int, int], k: int, bit: int) -> None:
    left = masks.get(k, 0) & ~bit
    if left:
        masks[k] = left
    else:
        masks.pop(k, None)
