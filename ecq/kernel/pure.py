"""The pure-Python kernel: every ablation level of the benchmark (``ecq.network.LEVELS``),
and what runs where the compiled kernel is not built or ``SCEMON_PURE`` is set. The
compiled kernel (level "summary") gives exactly what this one gives.

Queries are bits of Python ints here, so extending thousands of queries at once is a
few big-integer operations per group instead of a loop over queries. At level
"summary" a source's summary keeps, per query and position, the latest start of a
partial match, merged across classes: the first position as one ``(start, bits)`` entry
per class, later positions as one latest-first list of disjoint groups. It is an upper
bound: it prunes, and every match is verified when it is assembled.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ecq.event import Event
from ecq.kernel.interface import Groups, LoopHost, NetworkView, Passed, Probe, SummaryView, Tested
from ecq.match import Match
from ecq.matching.assembly import assemble_seq
from ecq.matching.composite import bound_ok
from ecq.matching.conjunction import Presences, candidates
from ecq.partitions import placeholder
from ecq.structures.ecq import ECQ, SlotFilter
from ecq.structures.pmb import PMB, merge_latest, resolve_latest
from ecq.structures.siq import SIQ

if TYPE_CHECKING:
    from ecq.matching.candidate import Cand
    from ecq.structures.qstate import QState

__all__ = ["PureKernel", "PlainTest"]

# Per position k of a class: (latest start, query bits) groups.
Extended = dict[int, list[tuple[float, int]]]


@dataclass
class PlainTest:
    """The pure test phase's result: what the insert phase needs, and the matches."""

    passed: dict[int, int]
    extended: Extended
    completed: list[tuple[QState, list[Any], float]] = field(default_factory=list)


class PureKernel:
    """The hot path of one network in Python (see ``ecq.kernel.interface.Kernel``)."""

    name = "pure"
    notes_sources = False

    def __init__(self, network: NetworkView, level: str) -> None:
        self.network = network
        self.level = level
        # PMB reduction (SCEMon §5.3) from level "pmb" on: initial entries are implied.
        self.reduced = level not in ("instances", "subpatterns")
        # Per source, at level "summary": (latest (start, bits) per class for first
        # components, and for each later position one latest-first list of groups).
        self.summaries: dict[Any, SummaryView] = {}
        # The conjunctions' presence (ecq.matching.conjunction).
        self.presence = Presences()

    # ------------------------------------------------------------- registration

    def queries_changed(self) -> None:
        """Nothing is derived from the queries here beyond what the network keeps."""

    def remove_node(self, bitno: int) -> None:
        keep = ~(1 << bitno)
        for starts, later in self.summaries.values():
            for cls, (t, b) in list(starts.items()):
                if b & keep:
                    starts[cls] = (t, b & keep)
                else:
                    del starts[cls]
            for groups in later:
                groups[:] = [(t, b & keep) for t, b in groups if b & keep]

    # ------------------------------------------------------------- trailing negation

    # The pure kernel holds no waiting matches: the network keeps them all
    # (ecq.matching.deadlines) and checks them with ecq.matching.composite.trailing_factor.

    @property
    def next_deadline(self) -> float:
        return math.inf

    def due(self, moment: int, clock_before: float, clock: float) -> list[tuple[QState, list[Any], float]]:
        return []

    def pending(self) -> int:
        return 0

    def check(self) -> None:
        """Nothing of its own to check beyond the summaries' invariants (tests)."""

    # ------------------------------------------------------------- test phase

    def passing(self, ecq: ECQ, e: Event) -> Passed:
        static = ecq.static_pass
        if static is not None:
            return static
        return {k: slot.passing(e) for k, slot in ecq.seq_filters.items()}

    def slot_passing(self, slot: SlotFilter, e: Event) -> int:
        return slot.passing(e)

    # ------------------------------------------------------------- conjunctions

    def note_conjunction(self, e: Event, cls: str, own: int) -> None:
        self.presence.note(e.src, cls, e.start, own)

    def complete_conjunctions(
        self, ecq: ECQ, e: Event, own: int, hclock: float, completed: list[tuple[QState, Cand]]
    ) -> int:
        # The presence count only: the network assembles every candidate.
        return candidates(ecq, self.presence.get(e.src), e.end, self.network.windows, own)

    def prune_conjunctions(self, clock: float) -> None:
        ecqs = self.network.ecqs
        self.presence.prune(lambda cls: ecqs[cls].horizon(clock) if cls in ecqs else math.inf)

    def test_phase(self, ecq: ECQ, e: Event, passed: Passed, hclock: float, probe: Probe) -> Tested:
        seq_pass = cast(dict[int, int], passed)
        extended: Extended = {}
        if len(seq_pass) > 1 or 0 not in seq_pass:
            level = self.level
            if level == "summary":
                extended = self._extend_summary(ecq, e, seq_pass)
            elif level == "bitsets":
                extended = self._extend_bitsets(ecq, e, seq_pass, probe)
            else:
                extended = self._extend_per_query(ecq, e, seq_pass, probe)
        tested = PlainTest(seq_pass, extended)
        done = seq_pass.get(0, 0) & ecq.seq_final.get(0, 0)
        for k, groups in extended.items():
            final = ecq.seq_final.get(k, 0)
            if final:
                for _t, bits in groups:
                    done |= bits & final
        if done:
            self._assemble(done, e, probe, tested.completed)
        return tested

    def _assemble(
        self, done: int, e: Event, probe: Probe, out: list[tuple[QState, list[Any], float]]
    ) -> None:
        """The matches of the nodes ``e`` completes (lowest bit first): assembly."""
        for qs in self._nodes_of(done):
            cq = qs.cq
            if cq.never:
                continue
            if qs.steps == 1 and not cq.skeletal and not qs.checks_at[0]:
                if bound_ok(cq, e.prob):
                    out.append((qs, [e], e.prob))
            else:
                for ents, prob in assemble_seq(qs, e, probe):
                    out.append((qs, ents, prob))

    def _nodes_of(self, bits: int) -> list[QState]:
        """The nodes of a bitset. O(set bits)."""
        by_bit = self.network.by_bit
        out = []
        while bits:
            low = bits & -bits
            out.append(by_bit[low.bit_length() - 1])
            bits ^= low
        return out

    # ------------------------------------------------------------- insert phase

    def insert_phase(self, ecq: ECQ, e: Event, tested: Tested, hclock: float) -> None:
        plain = cast(PlainTest, tested)
        init = plain.passed.get(0, 0) & ecq.seq_more.get(0, 0)
        kept: Extended | None = None
        if init and not self.reduced:
            kept = {0: [(e.start, init)]}
            init = 0
        for k, groups in plain.extended.items():
            more = ecq.seq_more.get(k, 0)
            if not more:
                continue
            keep = [(t, bits & more) for t, bits in groups if bits & more]
            if keep:
                if kept is None:
                    kept = {}
                kept[k] = keep
        if init or kept or ecq.general_uses:
            e.pmb = PMB(init, kept)
            ecq.siq.insert(e)
            if self.level == "summary" and (init or kept):
                self.summarise(e, init, kept, hclock)

    # ------------------------------------------------------------- extension

    def extend(self, ecq: ECQ, e: Event, passed: Passed) -> dict[int, Groups]:
        return dict(self._extend_summary(ecq, e, cast(dict[int, int], passed)))

    def _extend_summary(self, ecq: ECQ, e: Event, seq_pass: dict[int, int]) -> Extended:
        """Level "summary": for each position ``k`` of ``e``'s class, the queries whose
        partial match at ``k - 1`` (at ``e``'s source) ``e`` extends within their window,
        from the source's summary. O(groups of the source) big-int operations."""
        summary = self.summaries.get(e.src)
        out: Extended = {}
        if summary is None:
            return out
        starts, later = summary
        windows = self.network.windows
        window_mask = windows.mask
        full = windows.least
        e_end = e.end
        oldest = e_end - windows.most
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

    def _extend_bitsets(self, ecq: ECQ, e: Event, seq_pass: dict[int, int], probe: Probe) -> Extended:
        """Level "bitsets": one probe per R-CLink; all its queries extended at once."""
        extended: Extended = {}
        if not ecq.rclt:
            return extended
        window_mask = self.network.windows.mask
        e_start = e.start
        e_end = e.end
        wcache: dict[float, int] = {}
        gathered: Extended = {}
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
                    pmb = p.pmb
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

    def _extend_per_query(self, ecq: ECQ, e: Event, seq_pass: dict[int, int], probe: Probe) -> Extended:
        """Levels "instances", "subpatterns" and "pmb": the paper's test phase, query by
        query; "instances" probes once per CLink, the others once per R-CLink."""
        own = probe if self.level != "instances" else probe.again
        found: Extended = {}
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
                    t = p.pmb.latest(k - 1, bit, p.start)
                    if t is not None and t >= low and (best is None or t > best):
                        best = t
            if best is not None:
                found.setdefault(k, []).append((best, bit))
        return {k: resolve_latest(groups) for k, groups in found.items()}

    # ------------------------------------------------------------- summaries

    def summarise(
        self, e: Event, init: int, kept: dict[int, list[tuple[float, int]]] | None, hclock: float
    ) -> None:
        """Fold ``e``'s PMB into its source's summary: for first components one entry
        per class (its latest start, and the queries its instances start), for later
        positions one list of disjoint groups keeping each query's latest start. Both
        are upper bounds used to prune; matches are verified when assembled.
        O(groups of the source)."""
        summary = self.summaries.get(e.src)
        if summary is None:
            summary = self.summaries[e.src] = ({}, [])
        starts, later = summary
        cutoff = hclock - self.network.windows.most
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

    def summary_view(self) -> dict[Any, SummaryView]:
        return self.summaries

    # ------------------------------------------------------------- cleaning

    def prune(self, clock: float) -> None:
        cutoff = clock - self.network.windows.most
        empty = []
        for src, (starts, later) in self.summaries.items():
            for cls in [c for c, (t, _) in starts.items() if t < cutoff]:
                del starts[cls]
            for groups in later:
                if groups and groups[-1][0] < cutoff:
                    groups[:] = [g for g in groups if g[0] >= cutoff]
            if not starts and not any(later):
                empty.append(src)
        for src in empty:
            del self.summaries[src]

    def clean_siq(self, siq: SIQ, horizon: float) -> int:
        return siq.clean(horizon)

    # ------------------------------------------------------------- the event loop

    def run_events(
        self, engine: LoopHost, events: Iterable[Event], unseen: bytes | None = None
    ) -> list[Match]:
        if unseen is not None:
            events = [placeholder(e) if mark else e for e, mark in zip(events, unseen, strict=True)]
        return engine.step_events(events)
