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
    from ecq.qstate import QState

__all__ = ["assemble_seq", "by_recency"]

Probe = Callable[[str], list[Event]]


def by_recency(lists: list[list[Event]]) -> Iterator[Event]:
    if len(lists) == 1:
        return iter(lists[0])
    return heapq.merge(*lists, key=lambda p: -p.moment)


def _probability(env: list[Event]) -> float:
    prob = 1.0
    for ev in env:
        prob *= ev.prob
    return prob


def assemble_seq(qs: QState, last: Event, probe: Probe) -> list[list[Event]]:
    """The matches of plain sequence ``qs`` that ``last`` completes: one (RECENT) or all
    (ALL). Cost: the predecessors visited."""
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
        candidates = probe(classes[0]) if len(classes) == 1 else by_recency([probe(c) for c in classes])
        nxt_moment = nxt.moment
        nxt_start = nxt.start
        for p in candidates:
            moment = p.moment
            if moment >= nxt_moment:
                continue
            if moment <= reg:
                break  # everything further back arrived before the query existed
            if p.end > nxt_start:
                continue
            # The PMB check of PMB.extends, inlined: this loop runs for every match.
            pmb = p.pmb
            if i == 0 and pmb.init & bit:
                if p.start < bound:
                    continue
            else:
                t = pmb.latest(i, bit, p.start)
                if t is None or t < bound:
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
    return found
