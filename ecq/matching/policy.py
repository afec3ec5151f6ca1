"""Selection and consumption policies (docs/semantics.md §11-§12), applied to the
candidates a query completes at one op.

A query with a policy runs in MODE ALL: the kernels and the composite rules give every
candidate the op's event completes, and :meth:`PolicyState.choose` keeps those the
strategy accepts, takes them in the mode's order of preference and checks each against
what the query has used up. What is used up is kept **per query, by arrival index**,
never on the instances themselves (an instance one query consumed stays visible to
every other): the consumed arrival indexes (``CONSUME EXCLUSIVE``) and, per source, a
floor below which nothing may be used (``AFTER MATCH SKIP``). Both are forgotten once no
stored instance lies below them (:meth:`PolicyState.clean`), so they are cleaned with
the instances.

Partition contiguity and skip-till-next-match read the events that arrived between two
of a match's events, which the network does not store when no query needs them: a
:class:`SourceLog` keeps every event of each source, in arrival order, while some query
needs it (and only then: an engine without such a query pays nothing).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from itertools import pairwise
from typing import Any

from ecq.compiler.query import KIND_SEQ, CompiledQuery
from ecq.event import Event
from ecq.matching.candidate import Cand

__all__ = ["PolicyState", "SourceLog"]


class SourceLog:
    """Every event of each source with its arrival index, while a query with a strategy
    that reads them is registered. Filled by the engine before the kernel sees a batch
    (arrival indexes are consecutive), emptied from the front by :meth:`clean`."""

    __slots__ = ("arrivals", "events", "batch_start")

    def __init__(self) -> None:
        self.arrivals: dict[Any, list[int]] = {}
        self.events: dict[Any, list[Event]] = {}
        # The arrival index of the first event of the batch being processed: entries
        # from there on may be of events not processed yet.
        self.batch_start = 0

    def note(self, events: list[Event], first: int) -> None:
        self.batch_start = first
        arrivals = self.arrivals
        log = self.events
        for i, e in enumerate(events, first):
            src = e.src
            got = arrivals.get(src)
            if got is None:
                arrivals[src] = [i]
                log[src] = [e]
            else:
                got.append(i)
                log[src].append(e)

    def between(self, src: Any, low: int, high: int) -> list[Event]:
        """The source's events with ``low < arrival < high``."""
        arrivals = self.arrivals.get(src)
        if not arrivals:
            return []
        i = bisect_right(arrivals, low)
        j = bisect_right(arrivals, high - 1)
        return self.events[src][i:j]

    def clean(self, alive: float) -> None:
        """Forget the entries below ``alive`` (no stored instance a match could use lies
        below it) and below the batch being processed."""
        limit = min(alive, self.batch_start)
        for src in list(self.arrivals):
            arrivals = self.arrivals[src]
            k = bisect_right(arrivals, limit - 1)
            if k:
                if k == len(arrivals):
                    del self.arrivals[src]
                    del self.events[src]
                else:
                    del arrivals[:k]
                    del self.events[src][:k]

    def __len__(self) -> int:
        return sum(len(a) for a in self.arrivals.values())


def _norm(entry: Any) -> tuple[Any, ...]:
    """The emission order of ``events`` entries: an arrival index sorts before a list."""
    if type(entry) is list:
        return (1, tuple([(0, x.arrival) for x in entry]))
    return (0, entry.arrival)


def _last(bound: Any) -> int:
    return max(x.arrival for x in bound) if type(bound) is list else int(bound.arrival)


# A cleaning scans a query's floors only once there are at least this many (and twice
# what its last scan left).
_SCAN_AT_LEAST = 64


class PolicyState:
    """One query's policy and what it has used up."""

    __slots__ = (
        "cq",
        "policy",
        "since",
        "gens",
        "_before_top",
        "floors",
        "_floors_at",
        "consumes",
        "strict",
        "logs",
        "skip_pos",
        "exclusive",
        "skip",
        "mode",
        "signs",
        "partition",
        "seq",
        "comps",
    )

    def __init__(self, cq: CompiledQuery, since: float) -> None:
        assert cq.policy is not None
        self.cq = cq
        self.policy = cq.policy
        # The engine's clock when the query was registered: what it uses up depends on
        # every op since (the service keeps them for replay: docs/semantics.md §12).
        self.since = since
        # Consumed arrival indexes in two generations: those used up since the last
        # cleaning, and those before it (with the largest of them), so that a cleaning
        # drops the older generation whole once the window has passed it instead of
        # scanning every index (:meth:`clean`). An index is consumed if in either.
        # (The compiled kernel holds the list and reads the sets from it.)
        self.gens: list[set[int]] = [set(), set()]
        self._before_top = -1
        self.floors: dict[Any, int] = {}
        # The size at which a cleaning next scans the floors: twice what the last scan
        # left, so a scan's cost is paid for by the floors added since (keeping a floor
        # below every stored instance a little longer changes no match).
        self._floors_at = _SCAN_AT_LEAST
        # What the compiled kernel's choice reads (ecq/kernel/_kernel.pyx, _choose_found).
        self.consumes = self.policy.consumes
        self.strict = self.policy.strategy == "strict-contiguity"
        self.logs = self.policy.logs
        # The position among the match's events of the component AFTER MATCH SKIP TO
        # FIRST/LAST names (-1: none).
        skip_comp = self.policy.skip_comp
        self.skip_pos = cq.positives.index(skip_comp) if skip_comp >= 0 and skip_comp in cq.positives else -1
        self.exclusive = self.policy.exclusive
        self.skip = self.policy.skip
        self.mode = self.policy.mode
        # Per-component selection by position among the match's events: 1 prefers the
        # earlier event (first:), -1 the later (last:); empty when no component is marked.
        select = self.policy.select
        self.signs = tuple(1 if select[i] == "first" else -1 for i in cq.positives) if select else ()
        self.partition = self.policy.strategy == "partition-contiguity"
        # Skip-till-next-match without Kleene closure, by position among the match's
        # events: each positive component, its classes (what an event between must have
        # to be relevant after an event of the match) and whether it has conditions of
        # its own to ask (:meth:`fills`; without, having a class is enough, and in a
        # sequence starting no earlier than the event ends).
        self.seq = cq.kind == KIND_SEQ
        self.comps = tuple(
            (i, cq.comps[i].classes, cq.comps[i].filter is not None or bool(self.policy.kleene_own.get(i)))
            for i in cq.positives
        )

    @property
    def consumed(self) -> set[int]:
        """Arrival indexes used up since the last cleaning."""
        return self.gens[0]

    @property
    def consumed_before(self) -> set[int]:
        """Arrival indexes used up before the last cleaning and not yet forgotten."""
        return self.gens[1]

    # ------------------------------------------------------------------ choosing

    def chain(self, cand: Cand) -> list[tuple[Event, int]]:
        """The candidate's positive events with the component each fills, by arrival."""
        binding = cand.binding
        pairs: list[tuple[Event, int]] = []
        for i in self.cq.positives:
            b = binding[i]
            if b is None:
                continue
            if type(b) is list:
                pairs.extend((x, i) for x in b)
            else:
                pairs.append((b, i))
        pairs.sort(key=lambda p: p[0].arrival)
        return pairs

    def recent_key(self, cand: Cand) -> tuple[int, ...]:
        """docs/semantics.md §3, §4, §6: a sequence's components from the one before the
        last back to the first, a Kleene group by its latest element; a conjunction's
        events other than the completing one, latest first."""
        cq = self.cq
        binding = cand.binding
        positives = [i for i in cq.positives if binding[i] is not None]
        if cq.kind == KIND_SEQ:
            return tuple(_last(binding[i]) for i in reversed(positives[:-1]))
        trigger = cand.trigger.arrival
        return tuple(
            sorted((_last(binding[i]) for i in positives if _last(binding[i]) != trigger), reverse=True)
        )

    def select_key(self, cand: Cand) -> tuple[Any, ...]:
        """docs/semantics.md §11, per-component selection: the components in the
        pattern's order, each preferring its earlier (``first``) or later (``last``)
        instance; smaller is preferred. A Kleene group (never marked) compares by its
        elements for ``first``, by its latest element for ``last``."""
        select = self.policy.select
        out: list[Any] = []
        for i in self.cq.positives:
            b = cand.binding[i]
            if type(b) is list:
                out.append([x.arrival for x in b] if select[i] == "first" else -b[-1].arrival)
            else:
                out.append(b.arrival if select[i] == "first" else -b.arrival)
        return tuple(out)

    def fills(self, k: int, z: Event, x: Event) -> bool:
        """Whether ``z`` could fill component ``k`` of a run at ``x`` (docs/semantics.md
        §11, *relevant after*)."""
        comp = self.cq.comps[k]
        if z.type not in comp.classes:
            return False
        if self.cq.kind == KIND_SEQ and not x.end <= z.start:
            return False
        if comp.filter is not None and not comp.filter(z):
            return False
        own = self.policy.kleene_own.get(k)
        if own:
            env: list[Any] = [None] * self.cq.length
            env[k] = z
            return all(pred(env) for pred in own)
        return True

    def strategy_ok(self, cand: Cand, log: SourceLog | None) -> bool:
        strategy = self.policy.strategy
        chain = self.chain(cand)
        src = cand.trigger.src
        cq = self.cq
        for n, ((x, j), (y, _)) in enumerate(pairwise(chain)):
            ax, ay = x.arrival, y.arrival
            if strategy == "strict-contiguity":
                if ay != ax + 1:
                    return False
                continue
            assert log is not None
            between = log.between(src, ax, ay)
            if not between:
                continue
            if strategy == "partition-contiguity":
                return False
            # skip-till-next-match: nothing between that the run at x waits for.
            if cq.kind == KIND_SEQ:
                p = cq.positives.index(j)
                waiting = list(cq.positives[p + 1 : p + 2])
                if cq.comps[j].kleene is not None:
                    waiting.append(j)
            else:
                waiting = sorted({k for _, k in chain[n + 1 :]})
            for z in between:
                if any(self.fills(k, z, x) for k in waiting):
                    return False
        return True

    def choose(self, cands: Iterable[Cand], log: SourceLog | None) -> list[Cand]:
        """The candidates of one op (all completed by the same event) that the policy
        emits, consuming as it goes (docs/semantics.md §12, "Within one op")."""
        policy = self.policy
        kept = [c for c in cands if not policy.filters or self.strategy_ok(c, log)]
        if not kept:
            return []
        if len(kept) > 1:
            # One candidate (the common case) needs no order: keys are not made for it.
            entries = self.cq
            kept.sort(key=lambda c: tuple(_norm(x) for x in c.entries(entries)))
            if policy.select:
                kept.sort(key=self.select_key)
            elif policy.mode == "recent":
                kept.sort(key=self.recent_key, reverse=True)
        out: list[Cand] = []
        for c in kept:
            if not policy.consumes:
                # Nothing used up to check against or record (MODE CHRONICLE, a
                # strategy, first:/last: alone; floors come only with AFTER MATCH SKIP):
                # the chain is not needed.
                out.append(c)
                if policy.mode != "all":
                    break
                continue
            chain = self.chain(c)
            skip_own = (
                [x.arrival for x, k in chain if k == policy.skip_comp] if policy.skip_comp >= 0 else None
            )
            if not self.take([x.arrival for x, _ in chain], c.trigger.src, skip_own):
                continue
            out.append(c)
            if policy.mode != "all":
                break
        return out

    def take(self, arrivals: list[int], src: Any, own: list[int] | None = None) -> bool:
        """Whether a candidate of source ``src`` whose chain has these arrival indexes
        (ascending) passes what the query has used up; if it does, it is used up
        (docs/semantics.md §12). ``own``: the arrival indexes of the component that
        ``AFTER MATCH SKIP TO FIRST/LAST v`` names, ascending."""
        policy = self.policy
        consumed = self.consumed
        floor = self.floors.get(src)
        if policy.exclusive and not (
            consumed.isdisjoint(arrivals) and self.consumed_before.isdisjoint(arrivals)
        ):
            return False
        if floor is not None and arrivals[0] < floor:
            return False
        if policy.exclusive:
            consumed.update(arrivals)
        skip = policy.skip
        if skip is not None:
            if skip == "past-last-row":
                new = arrivals[-1] + 1
            elif skip == "next-row":
                new = arrivals[0] + 1
            else:
                assert own
                new = own[0] if skip == "first" else own[-1]
            if floor is None or new > floor:
                self.floors[src] = new
        return True

    # ------------------------------------------------------------------ cleaning

    def clean(self, alive: float, arrived: int | None = None) -> None:
        """Forget what lies below ``alive``: no stored instance the query could use has
        a smaller arrival index, so a consumed index or a floor there excludes nothing.
        The older generation of consumed indexes goes whole once its largest is below,
        and the newer one becomes the older; nothing is paid per index. ``arrived``:
        the number of events the engine has stamped (every index used up is below it),
        which spares finding the newer generation's largest."""
        before = self.consumed_before
        if not before or self._before_top < alive:
            # The older generation is all below: it goes, and the newer one takes its
            # place (the sets swap in the list the compiled kernel holds). Else (a
            # window longer than a cleaning period) both stay, the newer growing, until
            # the window has passed the older: at most two windows' worth of indexes.
            before.clear()
            consumed = self.consumed
            if consumed:
                self._before_top = _top(consumed, arrived)
                self.gens.reverse()
        floors = self.floors
        if len(floors) >= self._floors_at:
            for src in [src for src, floor in floors.items() if floor <= alive]:
                del floors[src]
            self._floors_at = max(2 * len(floors), _SCAN_AT_LEAST)

    def size(self) -> int:
        """Entries kept (consumed indexes and floors)."""
        return len(self.consumed) + len(self.consumed_before) + len(self.floors)


def _top(consumed: set[int], arrived: int | None) -> int:
    """The largest index used up, or a bound on it (the last arrival index stamped)."""
    return max(consumed) if arrived is None else arrived - 1
