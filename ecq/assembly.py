"""Assembling complete matches once an arriving instance completes a query.

The test phase (``ecq.network``) decides with query bitsets *which* queries the arriving
instance may complete; this module builds the matches themselves by following the
per-source back chains of the SIQs, binding components from the last to the first (a
sequence) and checking each cross-component condition as soon as its components are
bound.

Sequences use the PMBs to prune: a predecessor is tried only if its PMB says a partial
match of the query ends there with a start time inside the window. For a query without
cross-component conditions that makes MODE RECENT a straight walk with no backtracking;
with such conditions the search backtracks, so RECENT still finds the most recent
*valid* predecessors when the most recent ones fail.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ecq.event import Event

if TYPE_CHECKING:
    from ecq.network import QState

__all__ = ["assemble_seq", "assemble_and"]

Probe = Callable[[str], list[Event]]


def _by_recency(lists: list[list[Event]]) -> Iterator[Event]:
    if len(lists) == 1:
        return iter(lists[0])
    return heapq.merge(*lists, key=lambda p: -p.arrival)


def _probability(env: list[Event]) -> float:
    prob = 1.0
    for ev in env:
        prob *= ev.prob
    return prob


def assemble_seq(qs: QState, last: Event, probe: Probe) -> list[list[Event]]:
    """The matches of sequence ``qs`` that ``last`` completes: one (RECENT) or all (ALL,
    ordered by the arrival indexes of their events). Cost: the predecessors visited."""
    cq = qs.cq
    comps = cq.comps
    n = len(comps)
    bound = last.end - (cq.window or 0.0)
    reg = qs.reg
    bit = qs.bit
    checks_at = qs.checks_at
    mode_all = cq.mode_all
    min_prob = cq.probability
    env: list[Event] = [last] * n
    found: list[list[Event]] = []

    def fill(i: int, nxt: Event) -> bool:
        classes = qs.classes_at[i]
        lists = [probe(cls) for cls in classes]
        for p in _by_recency(lists):
            arrival = p.arrival
            if arrival >= nxt.arrival:
                continue
            if arrival < reg:
                break  # everything further back arrived before the query existed
            if p.end > nxt.start or not p._pmb.extends(i, bit, bound, p.start):
                continue
            env[i] = p
            if checks_at[i] and not all(check(env) for check in checks_at[i]):
                continue
            if i:
                if fill(i - 1, p):
                    return True
                continue
            if min_prob is not None and _probability(env) < min_prob:
                continue
            found.append(env.copy())
            if not mode_all:
                return True
        return False

    fill(n - 2, last)
    if mode_all and len(found) > 1:
        found.sort(key=lambda m: [ev.arrival for ev in m])
    return found


def assemble_and(qs: QState, last: Event, last_pass: dict[int, int], probe: Probe) -> list[list[Event]]:
    """The matches of conjunction ``qs`` completed by ``last`` (the latest arrival of each
    set). Sets are tried most recent first (by their other events, latest to earliest),
    so RECENT takes the first set that has a valid assignment of events to components."""
    cq = qs.cq
    comps = cq.comps
    n = len(comps)
    window = cq.window or 0.0
    reg = qs.reg
    bit = qs.bit
    min_prob = cq.probability

    def can_fill(ev: Event, k: int) -> bool:
        if ev is last:
            return bool(last_pass.get(k, 0) & bit)
        cpass = ev._pmb.cpass
        return bool(cpass and cpass.get(k, 0) & bit)

    pool: list[Event] = []
    for cls in qs.classes:
        for p in probe(cls):
            if p.arrival < reg or p.arrival >= last.arrival:
                continue
            if max(p.end, last.end) - min(p.start, last.start) > window:
                continue
            if any(cls in comps[k].classes and can_fill(p, k) for k in range(n)):
                pool.append(p)
    if len(pool) < n - 1:
        return []
    pool.sort(key=lambda p: -p.arrival)

    found: list[list[Event]] = []
    seen: set[frozenset[int]] = set()
    for others in _windowed_combinations(pool, n - 1, last, window):
        events = sorted((*others, last), key=lambda ev: ev.arrival)
        if min_prob is not None and _probability(events) < min_prob:
            continue
        assignment = _first_assignment(qs, events, can_fill)
        if assignment is None:
            continue
        if cq.overlapping:
            key = frozenset(ev.arrival for ev in events)
            if key in seen:
                continue
            seen.add(key)
        found.append(assignment)
        if not cq.mode_all:
            break
    if cq.mode_all and len(found) > 1:
        found.sort(key=lambda m: [ev.arrival for ev in m])
    return found


def _windowed_combinations(
    pool: list[Event], size: int, last: Event, window: float
) -> Iterator[tuple[Event, ...]]:
    """``combinations(pool, size)`` in the same (most recent first) order, skipping
    prefixes whose span already exceeds the window."""
    if size == 0:
        yield ()
        return
    if size == 1:
        for p in pool:
            yield (p,)
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


def _first_assignment(
    qs: QState, events: list[Event], can_fill: Callable[[Event, int], bool]
) -> list[Event] | None:
    """The first assignment of ``events`` (ascending arrival) to components, in
    lexicographic order of arrival indexes component by component, that respects the
    same-class arrival order, the filters and the cross-component conditions."""
    comps = qs.cq.comps
    same_before = qs.cq.same_before
    checks_at = qs.checks_at
    n = len(comps)
    env: list[Event] = [events[0]] * n
    used = [False] * n

    def assign(k: int) -> bool:
        if k == n:
            return True
        classes = comps[k].classes
        before = same_before[k]
        for idx, ev in enumerate(events):
            if used[idx] or ev.type not in classes or not can_fill(ev, k):
                continue
            if before >= 0 and env[before].arrival > ev.arrival:
                continue
            env[k] = ev
            if checks_at[k] and not all(check(env) for check in checks_at[k]):
                continue
            used[idx] = True
            if assign(k + 1):
                return True
            used[idx] = False
        return False

    return env if assign(0) else None
