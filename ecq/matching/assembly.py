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
from typing import TYPE_CHECKING, Any

from ecq.event import Event
from ecq.matching.composite import bound_ok
from ecq.matching.skeleton import leaf, negation_factor

if TYPE_CHECKING:
    from ecq.structures.qstate import QState

__all__ = ["assemble_seq", "by_recency"]

Probe = Callable[[str], list[Event]]

NEG_INF = float("-inf")


def by_recency(lists: list[list[Event]]) -> Iterator[Event]:
    if len(lists) == 1:
        return iter(lists[0])
    return heapq.merge(*lists, key=lambda p: -p.moment)


def _probability(env: list[Event]) -> float:
    prob = 1.0
    for ev in env:
        prob *= ev.prob
    return prob


def assemble_seq(qs: QState, last: Event, probe: Probe) -> list[tuple[list[Any], float]]:
    """The matches of ``qs`` that ``last`` completes, as (entries, probability): one
    (RECENT) or all (ALL). The node's skeleton (``QState.slots``) is bound as a plain
    sequence, from the last position back, into an environment indexed by component;
    a node with Kleene closure (or negation the kernels do not check themselves) hands
    each skeleton match to ``ecq.matching.skeleton.leaf``; the others' middle and leading
    negations are ``ecq.matching.skeleton.negation_factor``. Cost: the predecessors visited."""
    cq = qs.cq
    slots = qs.slots
    n = qs.steps
    bound = last.end - (cq.window or 0.0)
    reg = qs.reg
    bit = qs.bit
    checks_at = qs.checks_at
    mode_all = cq.mode_all
    min_prob = cq.probability
    leafy = qs.leafy
    inner = any(neg.right >= 0 for neg in qs.negs)
    latest_only = qs.latest_only
    env: list[Any] = [last] * cq.length
    found: list[tuple[list[Any], float]] = []

    def complete() -> bool:
        # The skeleton is bound: a match (or, through the leaf, a candidate or none).
        if leafy:
            got = leaf(qs, env, last, probe)
            if got is None:
                return False
            found.append(got)
        else:
            ents = env.copy() if n == cq.length else [env[i] for i in slots]
            prob = _probability(ents)
            if inner:
                # Middle and leading negation, checked here (ecq.matching.skeleton).
                prob *= negation_factor(qs, env, last, probe)
                if not bound_ok(cq, prob):
                    return False
            elif min_prob is not None and prob < min_prob:
                return False
            found.append((ents, prob))
        return not mode_all

    def fill(i: int, nxt: Event) -> bool:
        classes = qs.classes_at[i]
        candidates = probe(classes[0]) if len(classes) == 1 else by_recency([probe(c) for c in classes])
        nxt_moment = nxt.moment
        nxt_start = nxt.start
        slot = slots[i]
        # A group's latest element only (QState.latest_only): the largest start of the
        # later events that would join the same groups.
        only_latest = latest_only[i]
        later = NEG_INF
        for p in candidates:
            moment = p.moment
            if moment >= nxt_moment:
                continue
            if moment <= reg:
                break  # everything further back arrived before the query existed
            if p.end > nxt_start:
                continue
            if only_latest:
                if later >= p.start:
                    continue  # any group holding p holds a later event too
                later = p.start
            # The PMB check of PMB.extends, inlined: this loop runs for every match.
            pmb = p.pmb
            if i == 0 and pmb.init & bit:
                if p.start < bound:
                    continue
            else:
                t = pmb.latest(i, bit, p.start)
                if t is None or t < bound:
                    continue
            env[slot] = p
            if checks_at[i] and not all(check(env) for check in checks_at[i]):
                continue
            if i:
                if fill(i - 1, p):
                    return True
                continue
            if complete():
                return True
        return False

    if n == 1:
        # One positive component (and a negation): only the last event is bound.
        if last.start >= bound and all(check(env) for check in checks_at[0]):
            complete()
    else:
        fill(n - 2, last)
    return found
