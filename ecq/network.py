"""The shared ECQ network: every registered query compiled into one set of ECQs.

Per arriving instance ``e`` of class ``X`` (SCEMon §5.1):

- **test phase**: look up ``ECQ[X]`` (one dict lookup; a class no query uses costs
  nothing more); evaluate the distinct filters of the positions ``X`` fills; for each
  R-CLink probe the predecessor ECQ *once* for ``e``'s source and extend, with a few
  big-integer operations per predecessor PMatch group, the partial matches of every query
  that needs it; the window is a precomputed bitset per bound. Queries whose last
  position ``e`` reaches are handed to :mod:`ecq.assembly` to build their matches.
- **insert phase**: if ``e`` extends any partial match that can go on, store it once in
  ``ECQ[X]``'s SIQ with its PMB, whatever number of queries it serves.

Cleaning drops instances below each class's drop horizon (docs/semantics.md).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

from ecq.assembly import assemble_and, assemble_seq
from ecq.conditions import PredFn
from ecq.ecq import ECQ, CLink, RCLink, SlotFilter
from ecq.event import Event
from ecq.pmb import PMB, resolve_latest
from ecq.query import KIND_AND, KIND_OR, KIND_SEQ, CompiledQuery

__all__ = ["Network", "QState"]


@dataclass(eq=False)
class QState:
    """A registered query inside the network: its compiled form, its bit, when it was
    registered (``order`` among queries, ``reg`` the first arrival index it may see) and
    the conditions grouped by the binding step that can check them."""

    cq: CompiledQuery
    bitno: int
    order: int
    reg: int
    bit: int = 0
    checks_at: list[list[PredFn]] = field(default_factory=list)
    classes_at: list[tuple[str, ...]] = field(default_factory=list)
    classes: tuple[str, ...] = ()
    matches: int = 0
    last_match: float | None = None

    def __post_init__(self) -> None:
        self.bit = 1 << self.bitno
        n = self.cq.length
        self.checks_at = [[] for _ in range(n)]
        for comps, pred in self.cq.checks:
            # Sequences bind from the last component back; conjunctions from the first on.
            anchor = min(comps) if self.cq.kind == KIND_SEQ else max(comps)
            self.checks_at[anchor].append(pred)
        self.classes_at = [tuple(sorted(c.classes)) for c in self.cq.comps]
        self.classes = tuple(sorted(self.cq.classes()))

    @property
    def name(self) -> str:
        return self.cq.name


Completion = tuple[QState, list[list[Event]]]


class Network:
    """All ECQs, the registered queries and their bit assignment."""

    def __init__(self) -> None:
        self.ecqs: dict[str, ECQ] = {}
        self.queries: dict[str, QState] = {}
        self.by_bit: dict[int, QState] = {}
        self._next_bit = 0
        # Bits of unregistered queries: (arrival at unregistration, bit number). A bit is
        # reused only once every instance that may still carry it has been dropped.
        self._free: list[tuple[int, int]] = []
        self._order = 0
        # Window masks: ascending distinct windows and, for each, the queries whose
        # window is at least that long.
        self._wins: list[float] = []
        self._wcum: list[int] = []

    # ------------------------------------------------------------- registration

    def register(self, cq: CompiledQuery, arrival: int, clock: float) -> QState:
        """Add ``cq``; it sees instances arriving from ``arrival`` on. O(components)."""
        qs = QState(cq, self._alloc_bit(), self._order, arrival)
        self._order += 1
        bit = qs.bit
        n = cq.length
        for comp in cq.comps:
            for cls in comp.classes:
                if cls not in self.ecqs:
                    self.ecqs[cls] = ECQ(cls)
        for k, comp in enumerate(cq.comps):
            for cls in comp.classes:
                ecq = self.ecqs[cls]
                ecq.clt.append(CLink(qs, k))
                if cq.kind == KIND_SEQ:
                    ecq.seq_filters.setdefault(k, SlotFilter()).add(bit, comp.filter, comp.filter_key)
                    target = ecq.seq_final if k == n - 1 else ecq.seq_more
                    target[k] = target.get(k, 0) | bit
                    if k >= 1:
                        for pred_cls in cq.comps[k - 1].classes:
                            ecq.rclt.setdefault(pred_cls, RCLink(pred_cls)).add(k, bit)
                elif cq.kind == KIND_AND:
                    ecq.cnj_filters.setdefault(k, SlotFilter()).add(bit, comp.filter, comp.filter_key)
                    if n >= 2:
                        ecq.cnj_more |= bit
                else:
                    ecq.disj.append(CLink(qs, k))
        if cq.stores and cq.window is not None:
            for cls in qs.classes:
                self.ecqs[cls].set_windows(clock, add=cq.window)
        self.queries[cq.name] = qs
        self.by_bit[qs.bitno] = qs
        self._rebuild_windows()
        return qs

    def unregister(self, name: str, arrival: int, clock: float) -> QState:
        """Remove a query; ECQs whose CLT empties go with their instances."""
        qs = self.queries.pop(name)
        cq = qs.cq
        bit = qs.bit
        n = cq.length
        for k, comp in enumerate(cq.comps):
            for cls in comp.classes:
                ecq = self.ecqs[cls]
                ecq.clt = [c for c in ecq.clt if c.q is not qs]
                if cq.kind == KIND_SEQ:
                    self._unset(ecq.seq_filters, k, bit, comp.filter_key)
                    target = ecq.seq_final if k == n - 1 else ecq.seq_more
                    _clear(target, k, bit)
                    if k >= 1:
                        for pred_cls in cq.comps[k - 1].classes:
                            rl = ecq.rclt.get(pred_cls)
                            if rl is not None:
                                rl.remove(k, bit)
                                if not rl.masks:
                                    del ecq.rclt[pred_cls]
                elif cq.kind == KIND_AND:
                    self._unset(ecq.cnj_filters, k, bit, comp.filter_key)
                    ecq.cnj_more &= ~bit
                else:
                    ecq.disj = [c for c in ecq.disj if c.q is not qs]
        if cq.stores and cq.window is not None:
            for cls in qs.classes:
                self.ecqs[cls].set_windows(clock, remove=cq.window)
        for cls in qs.classes:
            if not self.ecqs[cls].clt:
                del self.ecqs[cls]
        del self.by_bit[qs.bitno]
        self._free.append((arrival, qs.bitno))
        self._rebuild_windows()
        return qs

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
                (ecq.siq.queue[0].arrival for ecq in self.ecqs.values() if ecq.siq.queue),
                default=None,
            )
            for i, (freed_at, bitno) in enumerate(self._free):
                if oldest_alive is None or oldest_alive >= freed_at:
                    del self._free[i]
                    return bitno
        bitno = self._next_bit
        self._next_bit += 1
        return bitno

    def _rebuild_windows(self) -> None:
        by_window: dict[float, int] = {}
        for qs in self.queries.values():
            if qs.cq.window is not None:
                by_window[qs.cq.window] = by_window.get(qs.cq.window, 0) | qs.bit
        self._wins = sorted(by_window)
        cum = 0
        wcum = [0] * len(self._wins)
        for j in range(len(self._wins) - 1, -1, -1):
            cum |= by_window[self._wins[j]]
            wcum[j] = cum
        self._wcum = wcum

    def window_mask(self, span: float) -> int:
        """Queries whose window admits ``span`` (``span <= window``). O(log windows)."""
        j = bisect_left(self._wins, span)
        return self._wcum[j] if j < len(self._wcum) else 0

    # ------------------------------------------------------------------ events

    def process(self, e: Event, clock: float) -> list[Completion]:
        """Test and insert phases for one instance; the completed queries with their
        matches (event lists in component order), in registration order."""
        ecq = self.ecqs.get(e.type)
        if ecq is None:
            return []
        ecqs = self.ecqs
        src = e.src
        probes: dict[str, list[Event]] = {}

        def probe(cls: str) -> list[Event]:
            # One probe per predecessor ECQ per event, shared by every query (R-CLT).
            got = probes.get(cls)
            if got is None:
                target = ecqs[cls]
                got = target.siq.chain(src, target.horizon(clock))
                probes[cls] = got
            return got

        completed: list[Completion] = []

        # ---- sequences: filters, then one probe per R-CLink extends all queries at once
        seq_pass: dict[int, int] = {}
        for k, slot in ecq.seq_filters.items():
            seq_pass[k] = slot.passing(e)
        extended: dict[int, list[tuple[float, int]]] = {}
        if ecq.rclt:
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
                            source: list[tuple[float, int]] | tuple[tuple[float, int], ...] = (
                                (p.start, pmb.init),
                            )
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

        done = seq_pass.get(0, 0) & ecq.seq_final.get(0, 0)
        for k, groups in extended.items():
            final = ecq.seq_final.get(k, 0)
            if final:
                for _t, bits in groups:
                    done |= bits & final
        if done:
            for qs in self._queries_of(done):
                if qs.cq.never:
                    continue
                if qs.cq.length == 1:
                    envs = [[e]] if _accept_single(qs, e) else []
                else:
                    envs = assemble_seq(qs, e, probe)
                if envs:
                    completed.append((qs, envs))

        # ---- conjunctions
        cnj_pass: dict[int, int] = {}
        cnj_any = 0
        for k, slot in ecq.cnj_filters.items():
            bits = slot.passing(e)
            if bits:
                cnj_pass[k] = bits
                cnj_any |= bits
        if cnj_any:
            for qs in self._queries_of(cnj_any):
                if qs.cq.never:
                    continue
                if qs.cq.length == 1:
                    envs = [[e]] if _accept_single(qs, e) else []
                else:
                    envs = assemble_and(qs, e, cnj_pass, probe)
                if envs:
                    completed.append((qs, envs))

        # ---- disjunctions: each passing event is a match by itself, nothing stored
        if ecq.disj:
            seen: set[int] = set()
            for clink in ecq.disj:
                qs = clink.q
                if qs.bitno in seen or qs.cq.never:
                    continue
                f = qs.cq.comps[clink.position].filter
                if f is None or f(e):
                    seen.add(qs.bitno)
                    if _accept_single(qs, e):
                        completed.append((qs, [[e]]))

        # ---- insert phase: store once if any partial match can go on from here
        init = seq_pass.get(0, 0) & ecq.seq_more.get(0, 0)
        kept: dict[int, list[tuple[float, int]]] | None = None
        for k, groups in extended.items():
            more = ecq.seq_more.get(k, 0)
            if not more:
                continue
            keep = [(t, bits & more) for t, bits in groups if bits & more]
            if keep:
                if kept is None:
                    kept = {}
                kept[k] = keep
        cpass: dict[int, int] | None = None
        if cnj_any & ecq.cnj_more:
            more = ecq.cnj_more
            cpass = {k: bits & more for k, bits in cnj_pass.items() if bits & more}
        if init or kept or cpass:
            e._pmb = PMB(init, kept, cpass)
            ecq.siq.insert(e)

        if len(completed) > 1:
            completed.sort(key=lambda c: c[0].order)
        return completed

    def _queries_of(self, bits: int) -> list[QState]:
        """The queries of a bitset, in registration order. O(set bits)."""
        by_bit = self.by_bit
        out = []
        while bits:
            low = bits & -bits
            out.append(by_bit[low.bit_length() - 1])
            bits ^= low
        if len(out) > 1:
            out.sort(key=lambda q: q.order)
        return out

    # ----------------------------------------------------------------- cleaning

    def clean(self, clock: float) -> int:
        """Drop instances below their class's horizon; returns how many. O(dropped + ECQs)."""
        return sum(ecq.siq.clean(ecq.horizon(clock)) for ecq in self.ecqs.values())

    def stored(self) -> int:
        return sum(len(ecq.siq) for ecq in self.ecqs.values())

    def pmb_entries(self) -> int:
        return sum(e._pmb.size() for ecq in self.ecqs.values() for e in ecq.siq if e._pmb is not None)

    def _check(self) -> None:
        for cls, ecq in self.ecqs.items():
            assert ecq.cls == cls and ecq.clt, f"ECQ {cls} must have CLinks"
            ecq._check()
            for target in ecq.rclt:
                assert target in self.ecqs
        for qs in self.queries.values():
            assert self.by_bit[qs.bitno] is qs
            for cls in qs.classes:
                assert any(c.q is qs for c in self.ecqs[cls].clt)


def _accept_single(qs: QState, e: Event) -> bool:
    min_prob = qs.cq.probability
    return min_prob is None or e.prob >= min_prob


def _clear(masks: dict[int, int], k: int, bit: int) -> None:
    left = masks.get(k, 0) & ~bit
    if left:
        masks[k] = left
    else:
        masks.pop(k, None)
