"""The positive skeleton of a sequence with negation or Kleene closure: what lets the
shared network match such a sequence with query bitsets, as it matches plain ones.

Under every match of a sequence of primitive classes with negated components, Kleene
components or both (``SEQ(A, !B, C)``, ``SEQ(A, B+, C)``, ``SEQ(A, B, !C)``) lies a match
of its *skeleton*: its positive components as a plain sequence, a Kleene component
standing for one of its events. The network registers a node's skeleton in the ECQs'
query bitsets (CLT, R-CLT, filters; then the kernels' PMBs and per-source summaries),
so one pass over the source's summary tells which of thousands of such queries an
arriving instance may complete, with the big-integer operations of plain sequences;
the other queries cost nothing. The kernel then assembles the skeleton's matches as a
plain sequence's (most recent first, backtracking, MODE RECENT stopping at the first
accepted) and hands each to the *leaf* here, which turns it into the node's candidate
or rejects it:

- **negation** (leading and middle; trailing negation waits for the clock,
  ``ecq.matching.deadlines``): the negated class's chain at the source — walked once per
  arriving instance and shared by every query that probes it (``ChainProbe``) — is
  searched for blockers between the bound neighbours; each multiplies the probability
  by ``1 - prob`` (a certain one rejects the candidate);
- **Kleene closure**: the group is built from its class's chain between the bound
  neighbours. The skeleton's event must be the group's most recent (``B+``, ``B{m,}``) or
  its run's last (``B^n``): each candidate then comes from exactly one skeleton match,
  and the first one met, most recent first, is the one MODE RECENT selects (it compares
  a group by its latest element, docs/semantics.md §6).

Conditions that read a Kleene group (aggregates, equivalence tests) wait for the leaf;
every other condition is checked where the skeleton binds its components.

A node without Kleene closure whose negated components have one class each
(``QState.negs``) needs no leaf: :func:`negation_factor` checks its middle and leading
negations on the skeleton match itself, walking each negated class's chain latest first
from the right neighbour back to the left one (or the registration) and stopping there,
as the compiled kernel does in C (``ecq/kernel/_negation.pyx``); trailing negation's
check at the deadline is :func:`ecq.matching.composite.trailing_factor` here and the compiled
kernel's own in C.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import product
from typing import TYPE_CHECKING, Any

from ecq.event import Event
from ecq.matching.candidate import Bound, Cand
from ecq.matching.composite import Context, as_list, kleene_groups, seq_cand

if TYPE_CHECKING:
    from ecq.structures.qstate import QState

__all__ = ["leaf", "fast_cand", "negation_factor"]


def leaf(
    qs: QState, env: list[Bound], last: Event, probe: Callable[[str], list[Event]]
) -> tuple[list[Any], float] | None:
    """The node's candidate from a skeleton match bound in ``env`` (indexed by
    component; a Kleene component holds the skeleton's event): its entries and
    probability, or None when a rule rejects it or another skeleton match stands for
    it. ``probe`` reads the source's chains at this moment; ``last`` completed it."""
    ctx = Context(last.moment, probe, last)
    kleene = qs.kleene
    if not kleene:
        cand = seq_cand(qs, list(env), last, ctx)
    else:
        comps = qs.cq.comps
        # No group can reach its minimum (the common case of a trailing B{2,}: one B at
        # the source): nothing need be walked.
        if any(ctx.short_of(comps[k]) for k in kleene):
            return None
        binding = list(env)
        used: frozenset[int] = frozenset(
            e.arrival for i in qs.slots if i not in kleene for e in as_list(binding[i])
        )
        chosen: list[list[list[Event]]] = []
        for k in kleene:
            mine = env[k]
            # The group whose latest element is the skeleton's: at most one.
            latest = [g for g in kleene_groups(qs, k, binding, used, ctx) if g and g[-1] is mine]
            if not latest:
                return None
            chosen.append(latest)
        cand = None
        for groups in product(*chosen):
            full = list(binding)
            for k, g in zip(kleene, groups, strict=True):
                full[k] = g
            cand = seq_cand(qs, full, last, ctx)
            if cand is not None:
                break
    if cand is None:
        return None
    return cand.entries(qs.cq), cand.prob


def negation_factor(qs: QState, env: list[Any], last: Event, probe: Callable[[str], list[Event]]) -> float:
    """docs/semantics.md §5, middle and leading negation of a node the kernels check
    (``QState.negs``), on its skeleton match bound in ``env`` (indexed by component;
    ``last`` completed it): the product of ``1 - prob`` of the blockers, component by
    component, each class's chain latest first (the order of ``ecq.matching.composite.blockers``,
    so the last bits agree); 0 when a certain blocker exists. A blocker arrived after
    the left neighbour (or the registration) and before the right one, ends before the
    right one starts and starts after the left one ends (leading: no earlier than the
    match's end minus the window). Cost: the chains' instances between the neighbours."""
    factor = 1.0
    low = last.end - (qs.cq.window or 0.0)
    reg = qs.reg
    for j, cls, left, right, conds in qs.negs:
        if right < 0:
            continue  # trailing: checked at the deadline
        rb = env[right]
        rb_moment, rb_start = rb.moment, rb.start
        if left >= 0:
            lb = env[left]
            floor, lb_end = lb.moment, lb.end
        else:
            floor, lb_end = reg, low
        for x in probe(cls):
            moment = x.moment
            if moment >= rb_moment:
                continue
            if moment <= floor:
                break  # the chain is in arrival order: the rest came before
            if x.end > rb_start or lb_end > x.start:
                continue
            if conds:
                # The binding as ecq.matching.composite.blockers gives it: the other negated
                # components keep what they hold (an equivalence test reads them).
                held = env[j]
                env[j] = x
                passed = all(c(env) for c in conds)
                env[j] = held
                if not passed:
                    continue
            factor *= 1.0 - x.prob
            if factor == 0.0:
                return factor  # a certain blocker: 0 times anything left is 0
    return factor


def fast_cand(qs: QState, entries: list[Any], prob: float, trigger: Event) -> Cand:
    """A match the kernel assembled (its entries: the positive components' events in
    order, a Kleene group as a list) as a candidate with its binding by component."""
    slots = qs.slots
    if len(slots) == qs.cq.length:
        binding: list[Bound] = entries
    else:
        binding = [None] * qs.cq.length
        for i, item in zip(slots, entries, strict=True):
            binding[i] = item
    first, final = entries[0], entries[-1]
    start = first.start if type(first) is not list else min(e.start for e in first)
    end = final.end if type(final) is not list else max(e.end for e in final)
    cand = Cand(binding, start, end, prob, trigger, (), _NO_PRIMS)
    cand.ents = entries
    return cand


_NO_PRIMS: frozenset[int] = frozenset()
