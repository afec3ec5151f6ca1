"""Matching for composite patterns: negation, Kleene closure, derived components, and
conjunctions.

The bitset fast path (:mod:`ecq.network`, :mod:`ecq.matching.assembly`) covers plain sequences of
primitive classes. Everything else is matched here, when an instance arrives that can
complete the pattern, by walking the per-source back chains of the SIQs it needs (one
probe per class, shared with the fast path through the same probe cache) — nothing is
materialised per partial match, so memory stays that of the stored instances:

- a sequence binds its plain positive components from the last back to the first; a
  Kleene group is then built from its class's chain between its bound plain neighbours
  (a group over a sub-pattern or ``@name`` as a chain of instances that follow each
  other: :func:`group_forms`); negated components are probed for blockers between their
  neighbours;
- a conjunction tries the sets of events most recent first and takes, per set, the first
  assignment of events to components (docs/semantics.md); one with Kleene groups takes
  the window that ends with the arriving instance and builds each group there.

Each function mirrors a rule of docs/semantics.md (§3–§8 and the choices); the names
(``before``, ``blockers``, ``kleene_groups``) are the rules' names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import product
from typing import TYPE_CHECKING, Any

from ecq.compiler.query import Comp, CompiledQuery
from ecq.event import Event
from ecq.matching.candidate import Bound, Cand

if TYPE_CHECKING:
    from ecq.structures.qstate import QState

__all__ = [
    "Context",
    "complete",
    "trailing_factor",
    "inst_key",
    "entry_key",
    "prims_of",
    "bound_ok",
    "probability",
    "match_cand",
    "entry_prims",
    "derived_instance",
    "seq_cand",
    "kleene_groups",
    "as_list",
]

# ------------------------------------------------------------------ instances


def entry_key(item: Any) -> tuple[Any, ...]:
    """A total order on ``events`` entries: an arrival index before a list."""
    if isinstance(item, Event):
        if item.parts is None:
            return (0, item.arrival)
        return (1, tuple(entry_key(p) for p in item.parts))
    return (1, tuple(entry_key(p) for p in item))


def inst_key(ev: Event) -> tuple[Any, ...]:
    """Arrival order of instances: moment, then entries, then class (instances made at
    the same moment — a sub-pattern's several matches — are ordered by their events)."""
    if ev.parts is None:
        return (ev.moment, (0, ev.arrival), ev.type)
    return (ev.moment, entry_key(ev), ev.type)


def prims_of(ev: Event) -> frozenset[int]:
    """The arrival indexes of the primitive events an instance is made of."""
    return ev.prims if ev.prims is not None else frozenset((ev.arrival,))


def as_list(bound: Bound) -> list[Event]:
    return bound if type(bound) is list else [bound]


def before(left: Bound, right: Bound) -> bool:
    """Sequence order: every event of ``left`` arrived at an earlier moment than, and
    ends no later than the start of, every event of ``right``."""
    return all(x.moment < y.moment and x.end <= y.start for x in as_list(left) for y in as_list(right))


class Context:
    """What matching at one moment needs: the moment, the probe of the per-source chains
    (visible instances only), and the arriving instance (if any)."""

    __slots__ = ("moment", "probe", "arriving", "chained")

    def __init__(
        self, moment: int, probe: Callable[[str], list[Event]], arriving: Event | None = None
    ) -> None:
        self.moment = moment
        self.probe = probe
        self.arriving = arriving
        # Instances in the chains of a set of classes at the source, counted once per
        # moment for every lone Kleene group over that set (see :func:`complete`).
        self.chained: dict[frozenset[str], int] = {}

    def chain_length(self, classes: frozenset[str]) -> int:
        """The visible instances of ``classes`` at the source, all chains together."""
        got = self.chained.get(classes)
        if got is None:
            got = self.chained[classes] = sum(len(self.probe(c)) for c in classes)
        return got

    def short_of(self, comp: Comp) -> bool:
        """Whether Kleene component ``comp``'s group cannot reach its minimum here: its
        elements are instances of the source's chains or the arriving one, and those are
        fewer (an upper bound, counted once per moment and class set)."""
        least = comp.kleene[0]  # type: ignore[index]
        return least > 1 and self.chain_length(comp.classes) + 1 < least

    def instances(self, qs: QState, classes: frozenset[str] | tuple[str, ...]) -> list[Event]:
        """Visible instances of ``classes`` that ``qs`` may see, latest first."""
        reg = qs.reg
        if len(classes) == 1:
            return [p for p in self.probe(next(iter(classes))) if p.moment > reg]
        return latest_first([p for cls in sorted(classes) for p in self.probe(cls) if p.moment > reg])


def latest_first(insts: list[Event]) -> list[Event]:
    """``insts`` (each class's chain latest first, the chains one after the other in
    class order) in one list, latest first by :func:`inst_key`; ties keep their order.
    What a descending ``heapq.merge`` of the chains gives, but sorted in C: a merge with
    a key paid a Python comparison per step, 40% of a conjunction's assembly in the
    demo workload's profile."""
    insts.sort(key=inst_key, reverse=True)
    return insts


# ------------------------------------------------------------------- helpers


def _passes(cq: CompiledQuery, index: int, ev: Event) -> bool:
    comp = cq.comps[index]
    return ev.type in comp.classes and (comp.filter is None or comp.filter(ev))


def _fills(tests: tuple[tuple[frozenset[str], Callable[[Event], bool] | None], ...], ev: Event) -> int:
    """The components among ``tests`` (``CompiledQuery.positive_tests``) that ``ev`` may
    fill, bit ``k`` for the ``k``-th: its class is one of theirs and it passes their filter."""
    mask = 0
    for k, (classes, f) in enumerate(tests):
        if ev.type in classes and (f is None or f(ev)):
            mask |= 1 << k
    return mask


def _checks_ok(cq: CompiledQuery, env: list[Bound]) -> bool:
    return all(check(env) for _, check in cq.checks)


def _distinct(insts: list[Event]) -> frozenset[int] | None:
    """The union of the instances' primitive events, or None if two share one."""
    seen: set[int] = set()
    total = 0
    for ev in insts:
        p = prims_of(ev)
        total += len(p)
        seen |= p
    return frozenset(seen) if len(seen) == total else None


def blockers(
    qs: QState,
    index: int,
    cand: Cand,
    ctx: Context,
    where: Callable[[Event], bool],
) -> Iterator[Event]:
    """The events of negated component ``index`` that block ``cand``: same source,
    arrived before this moment, visible, sharing no primitive event with the match,
    placed as ``where`` says, passing the conditions that mention the component (a
    missing attribute makes those true)."""
    cq = qs.cq
    conds = cq.blocker_conds.get(index, ())
    env = list(cand.binding)
    for x in ctx.instances(qs, cq.comps[index].classes):
        if x.moment >= ctx.moment or prims_of(x) & cand.prims or not where(x):
            continue
        env[index] = x
        if all(c(env) for c in conds):
            yield x


def _factor(xs: Iterator[Event], factor: float = 1.0) -> float:
    """``factor`` times ``1 - prob`` of each blocker, in order (the order of the
    multiplications is part of the result's last bits)."""
    for x in xs:
        factor *= 1.0 - x.prob
    return factor


# ----------------------------------------------------------------- sequences


def kleene_groups(
    qs: QState, index: int, binding: list[Bound], used: frozenset[int], ctx: Context
) -> list[list[Event]]:
    """docs/semantics.md §6: the groups Kleene component ``index`` can take given the bound
    plain components: ``B+``/``B{m,}``/``B{m,n}`` all qualifying events (m to n of them),
    ``B^n`` every run of n successive qualifying events. A group without a right
    neighbour (trailing, or alone) ends with the arriving instance; alone, its elements
    are the events of the window that ends with it."""
    cq = qs.cq
    comp = cq.comps[index]
    assert comp.kleene is not None and cq.window is not None
    # Bounded by the nearest plain components: a group beside another has no neighbour
    # on that side (the two are put in order by seq_cand).
    left, right = cq.group_bounds[index]
    positives = cq.positives
    conds = cq.element_conds.get(index, ())
    env = list(binding)
    qualifying = []
    seen = ctx.instances(qs, comp.classes)
    arriving = ctx.arriving
    if arriving is not None and arriving.type in comp.classes and arriving not in seen:
        # The arriving instance is stored after matching; a trailing group ends with it.
        seen = [arriving, *seen]
    alone = len(positives) == 1
    if alone and (arriving is None or arriving.type not in comp.classes):
        return []
    for x in reversed(seen):
        if x.moment > ctx.moment or prims_of(x) & used:
            continue
        if alone:
            assert arriving is not None
            if x.end > arriving.end or arriving.end - x.start > cq.window:
                continue
        else:
            if left >= 0 and not before(binding[left], x):
                continue
            if right >= 0 and not before(x, binding[right]):
                continue
            if left < 0 and max(y.end for y in as_list(binding[positives[-1]])) - x.start > cq.window:
                continue
            if right < 0 and x.end - min(y.start for y in as_list(binding[positives[0]])) > cq.window:
                continue
        env[index] = x
        if all(c(env) for c in conds):
            qualifying.append(x)
    if index != positives[-1]:
        return group_forms(qs, index, env, qualifying, None)
    # No right neighbour: the group ends with the arriving instance.
    return group_forms(qs, index, env, qualifying, arriving) if arriving is not None else []


def group_forms(
    qs: QState,
    index: int,
    env: list[Bound],
    qualifying: list[Event],
    ends_with: Event | None,
    latest: bool = False,
) -> list[list[Event]]:
    """docs/semantics.md §6: the groups of Kleene component ``index`` from its qualifying
    instances (arrival order): a run (iteration conditions) or a chain (instances of a
    sub-pattern or ``@name``) built in arrival order, then ``B^n``'s runs of n or the
    whole group of m to n. ``ends_with``: the arriving instance that ends the group (no
    right neighbour), else None; ``latest``: ``B^n`` is only the run of the n latest
    (a group in a conjunction). ``env`` is the binding, its slot ``index`` overwritten."""
    cq = qs.cq
    comp = cq.comps[index]
    assert comp.kleene is not None
    minimum, exact = comp.kleene
    iters = cq.iteration_conds.get(index, ())
    chained = comp.derived

    def follows(prev: Event, x: Event) -> bool:
        # A chain's instance begins after the last joined ends; an iteration condition
        # sees the binding and, after it, the run's previous element.
        if chained and not before(prev, x):
            return False
        env[index] = x
        full = [*env, prev]
        return all(c(full) for c in iters)

    if (chained or (iters and not exact)) and qualifying:
        # docs/semantics.md §6: a run with an iteration condition, or a chain, is built in
        # arrival order, each qualifying instance joining when it follows the last joined.
        run = [qualifying[0]]
        for x in qualifying[1:]:
            if follows(run[-1], x):
                run.append(x)
        qualifying = run
    if not exact:
        if ends_with is not None and (not qualifying or qualifying[-1] is not ends_with):
            return []  # a group without a right neighbour ends with the arriving instance
        size = len(qualifying)
        if size < minimum or (comp.kleene_max is not None and size > comp.kleene_max):
            return []
        return [qualifying]
    runs = [qualifying[s : s + minimum] for s in range(len(qualifying) - minimum + 1)]
    if iters and not chained:
        runs = [r for r in runs if all(follows(p, x) for p, x in zip(r, r[1:], strict=False))]
    if ends_with is not None:
        runs = [r for r in runs if r[-1] is ends_with]
    if latest:
        runs = [r for r in runs if r[-1] is qualifying[-1]]
    return runs


def _seq_negation(qs: QState, cand: Cand, ctx: Context) -> float:
    """docs/semantics.md §5, middle and leading negation: the product of ``1 - prob`` of the
    blockers (0 when a certain one exists). Trailing negation waits for its deadline."""
    cq = qs.cq
    window = cq.window or 0.0
    factor = 1.0
    for comp in cq.comps:
        if not comp.negated:
            continue
        left, right = cq.neighbours(comp.index)
        if right < 0:
            continue
        rb = cand.binding[right]
        lb = cand.binding[left] if left >= 0 else None

        def where(x: Event, lb: Bound = lb, rb: Bound = rb) -> bool:
            if lb is not None:
                return before(lb, x) and before(x, rb)
            return before(x, rb) and cand.end - window <= x.start

        factor = _factor(blockers(qs, comp.index, cand, ctx, where), factor)
    return factor


def trailing_factor(qs: QState, cand: Cand, ctx: Context) -> float:
    """docs/semantics.md §5, trailing negation, at its deadline: blockers arrived after the
    last positive event and before now, with ``x.end <= start + T``."""
    cq = qs.cq
    deadline = cand.start + (cq.window or 0.0)
    factor = 1.0
    for j in cq.trailing:
        left, _ = cq.neighbours(j)
        lb = cand.binding[left]
        factor = _factor(
            blockers(qs, j, cand, ctx, lambda x, lb=lb: before(lb, x) and x.end <= deadline),  # type: ignore[misc]
            factor,
        )
    return factor


def _seq_candidates(qs: QState, x: Event, ctx: Context) -> list[Cand]:
    cq = qs.cq
    comps = cq.comps
    positives = cq.positives
    last = positives[-1]
    plain = [i for i in positives if comps[i].kleene is None]
    kleene = [i for i in positives if comps[i].kleene is not None]
    window = cq.window or 0.0
    mode_all = cq.mode_all or bool(kleene)
    out: list[Cand] = []
    binding: list[Bound] = [None] * len(comps)

    if comps[last].kleene is None:
        if not _passes(cq, last, x):
            return out
        binding[last] = x
        todo = plain[:-1]
        right_plain = x
    else:
        # A trailing B^n: the arriving instance ends the group.
        if x.type not in comps[last].classes:
            return out
        todo = plain
        right_plain = x
    low = x.end - window

    def leaf() -> bool:
        used_plain = [binding[i] for i in plain]
        used = frozenset().union(*(prims_of(e) for e in used_plain))
        options = [kleene_groups(qs, k, binding, used, ctx) for k in kleene]
        for groups in product(*options):
            full = list(binding)
            for k, g in zip(kleene, groups, strict=True):
                full[k] = g
            cand = seq_cand(qs, full, x, ctx)
            if cand is None:
                continue
            out.append(cand)
            if not mode_all:
                return True
        return False

    def fill(pos: int, nxt: Event) -> bool:
        if pos < 0:
            return leaf()
        i = todo[pos]
        for p in ctx.instances(qs, comps[i].classes):
            if p.moment >= nxt.moment or p.end > nxt.start or p.start < low:
                continue
            if not _passes(cq, i, p):
                continue
            binding[i] = p
            if fill(pos - 1, p):
                return True
        binding[i] = None
        return False

    fill(len(todo) - 1, right_plain)
    if kleene and not cq.mode_all and out:
        out = [max(out, key=lambda c: c.recent_key)]
    return out


def seq_cand(qs: QState, binding: list[Bound], x: Event, ctx: Context) -> Cand | None:
    """The candidate of a full binding, or None when a rule fails (docs/semantics.md §3)."""
    cq = qs.cq
    positives = cq.positives
    for a, b in zip(positives, positives[1:], strict=False):
        if not before(binding[a], binding[b]):
            return None
    insts = [e for i in positives for e in as_list(binding[i])]
    prims = _distinct(insts)
    if prims is None:
        return None
    start = min(e.start for e in as_list(binding[positives[0]]))
    end = max(e.end for e in as_list(binding[positives[-1]]))
    if end - start > (cq.window or 0.0):
        return None
    if not _checks_ok(cq, binding):
        return None
    recent_key = tuple(max(inst_key(e) for e in as_list(binding[i])) for i in reversed(positives[:-1]))
    cand = Cand(binding, start, end, probability(insts), x, recent_key, prims)
    cand.prob *= _seq_negation(qs, cand, ctx)
    if not bound_ok(cq, cand.prob):
        return None
    return cand


# -------------------------------------------------------------- conjunctions


def _conj_candidates(qs: QState, x: Event, ctx: Context) -> list[Cand]:
    """docs/semantics.md §4: sets of events, one per positive component, that ``x`` completes
    (its key is the largest), most recent first."""
    cq = qs.cq
    comps = cq.comps
    positives = cq.positives
    window = cq.window or 0.0
    tests = cq.positive_tests
    # Each filter is evaluated once per event here, and the assignment reads the masks.
    fills = {id(x): _fills(tests, x)}
    if not fills[id(x)]:
        return []
    xkey = inst_key(x)
    xprims = prims_of(x)
    xstart, xend = x.start, x.end
    reg = qs.reg
    pool = []
    # ctx.instances, filtered before the chains are put in one order (fewer to sort).
    for cls in cq.positive_classes:
        for p in ctx.probe(cls):
            if p.moment <= reg or inst_key(p) >= xkey or prims_of(p) & xprims:
                continue
            if (p.end if p.end > xend else xend) - (p.start if p.start < xstart else xstart) > window:
                continue
            mask = _fills(tests, p)
            if mask:
                pool.append(p)
                fills[id(p)] = mask
    if len(cq.positive_classes) > 1:
        latest_first(pool)  # one chain is in its own order already, as ctx.instances keeps it
    out: list[Cand] = []
    need = len(positives) - 1
    if len(pool) < need:
        return out
    for others in _windowed_combinations(pool, need, x, window):
        members = sorted((*others, x), key=inst_key)
        prims = _distinct(members)
        if prims is None:
            continue
        binding = _first_assignment(cq, members, [fills[id(e)] for e in members])
        if binding is None:
            continue
        start = min(e.start for e in members)
        end = max(e.end for e in members)
        recent_key = tuple(inst_key(e) for e in sorted(others, key=inst_key, reverse=True))
        cand = Cand(binding, start, end, probability([binding[i] for i in positives]), x, recent_key, prims)
        if any(c.negated for c in comps):
            cand.prob *= _conj_negation(qs, cand, ctx)
        if not bound_ok(cq, cand.prob):
            continue
        out.append(cand)
        if not cq.mode_all:
            break
    return out


def _conj_kleene_candidates(qs: QState, x: Event, ctx: Context) -> list[Cand]:
    """docs/semantics.md §6, Kleene inside a conjunction: the matches whose latest
    instance is ``x``. Every instance lies in the window that ends with ``x`` (``end <=
    x.end``, ``x.end - start <= T``); the plain components take distinct instances, one
    set of them per match (the first assignment, lexicographic by arrival, that passes);
    each group is made from the window's qualifying instances as a lone group is
    (``B^n``: the run of the n latest); ``x`` is among the match's instances. MODE RECENT
    takes the one whose plain instances other than ``x`` are latest (latest to earliest)."""
    cq = qs.cq
    comps = cq.comps
    positives = cq.positives
    window = cq.window or 0.0
    plain = [i for i in positives if comps[i].kleene is None]
    kleene = [i for i in positives if comps[i].kleene is not None]
    if not any(x.type in comps[i].classes for i in positives):
        return []
    xkey = inst_key(x)
    low = x.end - window

    def window_of(i: int) -> list[Event]:
        # Arrival order (earliest first), ``x`` itself included when it is of the class
        # (ctx.instances gives what the query may see, latest first).
        got = [
            p
            for p in ctx.instances(qs, comps[i].classes)
            if p.end <= x.end and p.start >= low and inst_key(p) < xkey
        ]
        got.reverse()
        if x.type in comps[i].classes and x.start >= low:
            got.append(x)
        return got

    pools = {i: window_of(i) for i in positives}
    if any(not pools[i] for i in positives):
        return []
    lists = [[p for p in pools[i] if _passes(cq, i, p)] for i in plain]
    same_before = cq.same_before
    place = {i: n for n, i in enumerate(plain)}
    out: list[Cand] = []
    decided: set[frozenset[int]] = set()
    binding: list[Bound] = [None] * len(comps)
    for combo in product(*lists):
        members = frozenset(id(e) for e in combo)
        if len(members) < len(combo) or members in decided:
            continue
        # Components of one class set take their instances in arrival order (§4).
        if any(
            same_before[i] >= 0 and inst_key(combo[place[same_before[i]]]) >= inst_key(e)
            for i, e in zip(plain, combo, strict=True)
        ):
            continue
        for i, e in zip(plain, combo, strict=True):
            binding[i] = e
        used = frozenset().union(*(prims_of(e) for e in combo))
        options = []
        for k in kleene:
            env = list(binding)
            conds = cq.element_conds.get(k, ())
            qualifying = []
            for p in pools[k]:
                if prims_of(p) & used:
                    continue
                env[k] = p
                if all(c(env) for c in conds):
                    qualifying.append(p)
            options.append(group_forms(qs, k, env, qualifying, None, latest=True))
        for groups in product(*options):
            full = list(binding)
            for k, g in zip(kleene, groups, strict=True):
                full[k] = g
            insts = [e for i in positives for e in as_list(full[i])]
            if not any(e is x for e in insts):
                continue
            prims = _distinct(insts)
            if prims is None or not _checks_ok(cq, full):
                continue
            start = min(e.start for e in insts)
            end = max(e.end for e in insts)
            recent_key = tuple(sorted((inst_key(e) for e in combo if e is not x), reverse=True))
            cand = Cand(full, start, end, probability(insts), x, recent_key, prims)
            if any(c.negated for c in comps):
                cand.prob *= _conj_negation(qs, cand, ctx)
            if not bound_ok(cq, cand.prob):
                continue
            decided.add(members)
            out.append(cand)
            break
    if not cq.mode_all and out:
        out = [max(out, key=lambda c: c.recent_key)]
    return out


def _conj_negation(qs: QState, cand: Cand, ctx: Context) -> float:
    """docs/semantics.md §5: ``!X`` in a conjunction forbids an x with ``min(start) <=
    x.start`` and ``x.end <= max(end)`` that arrived before the match's last event."""
    factor = 1.0
    for comp in qs.cq.comps:
        if comp.negated:
            factor = _factor(
                blockers(qs, comp.index, cand, ctx, lambda x: cand.start <= x.start and x.end <= cand.end),
                factor,
            )
    return factor


def _windowed_combinations(
    pool: list[Event], size: int, last: Event, window: float
) -> Iterator[tuple[Event, ...]]:
    """``combinations(pool, size)`` in the same (most recent first) order, skipping
    prefixes whose span already exceeds the window."""
    if last.end - last.start > window:
        return
    chosen: list[Event] = []

    def rec(start: int, lo: float, hi: float) -> Iterator[tuple[Event, ...]]:
        if len(chosen) == size:
            yield tuple(chosen)
            return
        for idx in range(start, len(pool) - (size - len(chosen)) + 1):
            p = pool[idx]
            nlo = p.start if p.start < lo else lo
            nhi = p.end if p.end > hi else hi
            if nhi - nlo > window:
                continue
            chosen.append(p)
            yield from rec(idx + 1, nlo, nhi)
            chosen.pop()

    yield from rec(0, last.start, last.end)


def _first_assignment(cq: CompiledQuery, members: list[Event], fills: list[int]) -> list[Bound] | None:
    """The first assignment of ``members`` (in arrival order) to the positive
    components, in lexicographic order component by component, that respects the
    same-class arrival order, the filters (``fills``: per member, the positive
    components it may fill, as :func:`_fills` gives) and the conditions."""
    comps = cq.comps
    positives = cq.positives
    same_before = cq.same_before
    env: list[Bound] = [None] * len(comps)
    used = [False] * len(members)

    def assign(k: int) -> bool:
        if k == len(positives):
            return _checks_ok(cq, env)
        i = positives[k]
        before_i = same_before[i]
        for idx, ev in enumerate(members):
            if used[idx] or not fills[idx] >> k & 1:
                continue
            if before_i >= 0 and env[before_i] is not None and inst_key(env[before_i]) > inst_key(ev):
                continue
            env[i] = ev
            used[idx] = True
            if assign(k + 1):
                return True
            used[idx] = False
            env[i] = None
        return False

    return env if assign(0) else None


# ----------------------------------------------------------------- dispatch


def complete(qs: QState, x: Event, ctx: Context) -> list[Cand]:
    """The candidates of a composite node that the arriving instance ``x`` completes,
    already selected by the node's mode (one per trigger for RECENT)."""
    cq = qs.cq
    if cq.kind == "and":
        if cq.kleene_comps:
            return _conj_kleene_candidates(qs, x, ctx)
        return _conj_candidates(qs, x, ctx)
    if cq.open_kleene:
        # A lone group (docs/semantics.md §6) needs its minimum of instances at the
        # source, the arriving one included; the chains' lengths bound that from above
        # for every query at once, so most arrivals stop here, before any group is built.
        comp = cq.comps[cq.positives[0]]
        if x.type not in comp.classes or ctx.short_of(comp):
            return []
    return _seq_candidates(qs, x, ctx)


# ---------------------------------------------------- candidates and instances


def bound_ok(cq: CompiledQuery, prob: float) -> bool:
    """The probability bound (docs/semantics.md §7): ``PROBABILITY >= p`` of a query, else
    ``> 0`` (a sub-pattern has no clause of its own)."""
    if cq.top and cq.probability is not None:
        return prob >= cq.probability
    return prob > 0.0


def probability(env: list[Event]) -> float:
    """Product of the instances' ``prob``, in component order (the order is part of the
    result's last bits, so it is the shared engine's)."""
    prob = 1.0
    for ev in env:
        prob *= ev.prob
    return prob


def match_cand(env: list[Event], trigger: Event, single: int = -1, length: int = 0) -> Cand:
    """A stack-assembled match (or a disjunction's one event, at ``single`` of ``length``
    components) as a candidate, as the shared engine's fast path makes it."""
    binding: list[Any] = env
    if single >= 0:
        binding = [None] * length
        binding[single] = trigger
    cand = Cand(binding, env[0].start, env[-1].end, probability(env), trigger, (), _NO_PRIMS)
    cand.ents = env
    return cand


_NO_PRIMS: frozenset[int] = frozenset()


def entry_prims(entries: list[Any]) -> frozenset[int]:
    """The arrival indexes of the primitive events of a match's entries."""
    out: set[int] = set()
    for item in entries:
        for inst in item if type(item) is list else (item,):
            out |= prims_of(inst)
    return frozenset(out)


def derived_instance(
    cand: Cand,
    cls: str,
    attrs: dict[str, Any],
    prob: float,
    moment: int,
    arrival: int,
    entries: list[Any],
    flat: list[Event] | None,
    prims: frozenset[int],
) -> Event:
    """A sub-pattern's or ``@name`` instance made from a match (docs/semantics.md §8)."""
    d = Event(cand.trigger.src, cls, cand.start, cand.end, attrs, prob)
    d.arrival = arrival
    d.moment = moment
    d.parts = entries
    d.flat = flat
    d.prims = prims
    return d
