"""The kernel interface: exactly what the shared network's hot path needs of a kernel,
and what a kernel may read of the network and the engine it serves.

A ``Network`` chooses its kernel once, when it is made (``ecq.kernel.select``), and
calls it for the plain-sequence part of every instance (SCEMon §5.1: the test phase
over the instance's class's CLT/R-CLT, then the insert phase into its SIQ and PMB),
for cleaning (summaries, then each SIQ below its horizon) and for the event loop. The
kernel owns the per-source summaries, the conjunctions' presence (the compiled one
assembles the conjunctions of primitive classes too) and whatever it derives from the registered
queries; the network tells it when queries change. A kernel may hold the matches of
trailing negation that wait for the clock (the compiled one does, for the nodes whose
negation it checks itself: ``QState.negs``); the network asks it for the due ones in
phase 0. Other composite patterns, disjunctions, the rest of trailing negation and
emission stay in the network (ecq/network.py), in Python.

The two implementations: ``ecq.kernel.pure.PureKernel`` and the compiled
``ecq.kernel._kernel.CompiledKernel`` (``_kernel.pyi`` types it for mypy).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ecq.event import Event
    from ecq.match import Match
    from ecq.matching.candidate import Cand
    from ecq.matching.emission import Emission
    from ecq.structures.ecq import ECQ, SlotFilter
    from ecq.structures.qstate import QState
    from ecq.structures.siq import SIQ
    from ecq.time.windows import Windows

__all__ = [
    "Kernel",
    "NetworkView",
    "LoopHost",
    "Passed",
    "Tested",
    "Probe",
    "SummaryView",
    "Groups",
]

# Latest-first disjoint (start, query bits) groups: a PMB entry, an extension's result.
Groups = Sequence[tuple[float, int]]
# A source's summary as the pure kernel keeps it: per class, the latest start of an
# instance that can start a query and the queries it can start; per later position, the
# latest-first disjoint groups of the partial matches ending at the source.
SummaryView = tuple[dict[str, tuple[float, int]], list[list[tuple[float, int]]]]


class Probe(Protocol):
    """One source's visible instances of a class, latest first, for the instance being
    processed (``ecq.network.ChainProbe``)."""

    def __call__(self, cls: str) -> list[Event]:
        """Walked once per class and instance, then shared."""
        ...

    def again(self, cls: str) -> list[Event]:
        """Walked anew (the "instances" ablation level probes once per CLink)."""
        ...


class Passed(Protocol):
    """Which queries an instance passes at each sequence position of its class (its
    filters evaluated), in the kernel's own form."""


class Tested(Protocol):
    """The test phase's result for one instance, handed back to the same kernel's
    insert phase."""

    @property
    def completed(self) -> list[tuple[QState, list[Any], float]]:
        """The matches of the kernels' nodes the instance completes (``QState.fast``:
        plain sequences, single-component filters, sequences with negation or Kleene
        closure): each node with one match's entries (its positive components' events
        in order, a Kleene group as a list) and probability."""
        ...


class NetworkView(Protocol):
    """What a kernel reads of its network (all public, all the network's own)."""

    ecqs: dict[str, ECQ]
    by_bit: dict[int, QState]
    windows: Windows
    seen: int

    @property
    def next_deadline(self) -> float:
        """The earliest deadline of a pending trailing-negation match (the network's
        own or its kernel's)."""
        ...

    @property
    def own_deadline(self) -> float:
        """The earliest deadline of the pending matches the network holds itself."""
        ...

    def release(
        self,
        held: list[tuple[QState, list[Any], float]],
        moment: int,
        clock_before: float,
        clock: float,
        arrival: int,
    ) -> list[Emission]:
        """Phase 0 in Python for due matches the kernel held (``Kernel.due``'s form)."""
        ...

    def on_event(self, e: Event, clock_before: float, clock: float) -> list[Emission] | None:
        """One event op in Python (phase 0, then phase 1)."""
        ...

    def settle_plain(
        self,
        found: list[tuple[QState, list[Any], float]],
        e: Event,
        clock: float,
        more: list[tuple[QState, Cand]] | None = None,
    ) -> list[Emission]:
        """The rest of ``on_event`` after the kernel's phases found matches that need
        more than emitting (``more``: conjunctions' candidates the kernel assembled)."""
        ...

    def assemble_conjunctions(
        self, ecq: ECQ, e: Event, bits: int, hclock: float, completed: list[tuple[QState, Cand]]
    ) -> None:
        """Assemble, in Python, the conjunctions of ``bits`` that ``e`` may complete."""
        ...


class LoopHost(Protocol):
    """What the event loop reads and writes of the engine: its counters and clock, and
    the per-event loop it stands for (``OpClock.step_events``)."""

    ops: int
    arrivals: int
    clock: float
    next_seq: int
    since_clean: int
    clean_every: int

    def emit(self, emitted: list[Emission], trigger: int, out: list[Match]) -> None: ...

    def clean(self) -> int: ...

    def step_events(self, events: Iterable[Event]) -> list[Match]: ...


class Kernel(Protocol):
    """The hot path of one network (see the module's docstring). Every method gives
    exactly what the pure kernel's gives; property tests hold the two to each other
    and to tests/reference.py."""

    @property
    def name(self) -> str:
        """``"compiled"`` or ``"pure"``."""
        ...

    @property
    def notes_sources(self) -> bool:
        """Whether :meth:`run_events` notes each event in the network's
        ``source_log`` itself as it stamps it (else the engine notes the batch first)."""
        ...

    # -- registration

    def queries_changed(self) -> None:
        """A node came or went: what the kernel derived from the queries is stale."""
        ...

    def remove_node(self, bitno: int) -> None:
        """A node's bit leaves every summary (its partial matches go with it)."""
        ...

    # -- trailing negation: matches the kernel holds until the clock passes their deadline

    @property
    def next_deadline(self) -> float:
        """The earliest deadline of a match the kernel holds (infinity: none)."""
        ...

    def due(self, moment: int, clock_before: float, clock: float) -> list[tuple[QState, list[Any], float]]:
        """Phase 0 at ``moment``: the held matches whose deadline ``clock`` exceeds, taken
        out in deadline order, each with its probability times ``1 - prob`` of its
        trailing blockers (horizons at ``clock_before``): ``(node, entries,
        probability)``, for ``Network`` to finish (those of unregistered nodes dropped)."""
        ...

    def pending(self) -> int:
        """Matches held for registered nodes."""
        ...

    def check(self) -> None:
        """Assert the invariants of what the kernel holds (tests call it)."""
        ...

    # -- test and insert phases (plain sequences and single-component filters)

    def passing(self, ecq: ECQ, e: Event) -> Passed:
        """The filters of ``e``'s class's positions, evaluated (the search phase)."""
        ...

    def slot_passing(self, slot: SlotFilter, e: Event) -> int:
        """``slot.passing(e)``: the bits of the filters of one :class:`SlotFilter` that
        ``e`` passes (the conjunctions' filters of a class, ecq.matching.conjunction)."""
        ...

    # -- conjunctions of primitive classes (ecq.matching.conjunction)

    def note_conjunction(self, e: Event, cls: str, own: int) -> None:
        """``e`` of ``cls`` is stored and passes the conjunctions' filters of ``own``
        (``slot_passing`` of its class's ``cnj_filter``): present at its source."""
        ...

    def complete_conjunctions(
        self, ecq: ECQ, e: Event, own: int, hclock: float, completed: list[tuple[QState, Cand]]
    ) -> int:
        """The conjunctions ``e`` may complete among ``own``: the kernel may assemble
        some itself (their candidates appended to ``completed``, selected by mode); the
        bits of the others that pass the presence test are returned for the network to
        assemble (ecq.matching.composite). ``hclock`` sets the drop horizons."""
        ...

    def prune_conjunctions(self, clock: float) -> None:
        """Forget the instances of each class below its drop horizon at ``clock``
        (``ECQ.horizon``). O(classes + dropped)."""
        ...

    def test_phase(self, ecq: ECQ, e: Event, passed: Passed, hclock: float, probe: Probe) -> Tested:
        """Extend every query's partial matches with ``e`` and assemble the matches it
        completes. ``hclock`` sets the drop horizons; ``probe`` reads the SIQs' chains
        (the pure kernel's ablation levels probe; the summary level needs none)."""
        ...

    def insert_phase(self, ecq: ECQ, e: Event, tested: Tested, hclock: float) -> None:
        """Store ``e`` once, with its PMB, if a partial match can go on from it (or a
        composite node uses its class); fold its PMB into its source's summary."""
        ...

    # -- cleaning

    def prune(self, clock: float) -> None:
        """Drop summary entries no window can reach any more."""
        ...

    def clean_siq(self, siq: SIQ, horizon: float) -> int:
        """``SIQ.clean``: drop instances below ``horizon`` from the front; how many."""
        ...

    # -- the event loop

    def run_events(
        self, engine: LoopHost, events: Iterable[Event], unseen: bytes | None = None
    ) -> list[Match]:
        """``engine.step_events(events)``, possibly compiled: the same results.
        ``unseen``: one byte per event, 1 where the event is one the network does not
        see, given as itself: it stands for its placeholder view
        (``ecq.partitions.placeholder``; ``KeyViews.seen`` makes both)."""
        ...

    # -- readers, and the phases' parts one by one (tests compare the kernels on them)

    def summary_view(self) -> dict[Any, SummaryView]:
        """Every source's summary, in the pure kernel's form."""
        ...

    def extend(self, ecq: ECQ, e: Event, passed: Passed) -> dict[int, Groups]:
        """The summary level's extension: per position, the groups ``e`` extends."""
        ...

    def summarise(
        self, e: Event, init: int, kept: dict[int, list[tuple[float, int]]] | None, hclock: float
    ) -> None:
        """Fold a PMB (``init``, ``kept`` groups) into ``e``'s source's summary."""
        ...
