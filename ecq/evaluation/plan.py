"""One query's private plan in the separate-processing baseline (:mod:`ecq.evaluation.baseline`).

A :class:`Plan` holds a query's nodes (its sub-patterns, then itself) and everything
they store, for that query alone: per-source :class:`Stacks` for a plain sequence (SASE's
active instance stacks with RIP pointers) and a per-source, per-class store for the
general matching rules. :class:`Horizon` is a class's drop horizon, the one piece of
metadata the baseline keeps per class (it says which copies are visible; docs/semantics.md,
Cleaning).
"""

from __future__ import annotations

from typing import Any

from ecq.compiler.conditions import PredFn
from ecq.compiler.query import KIND_OR, KIND_SEQ
from ecq.event import Event
from ecq.matching.candidate import Cand
from ecq.matching.composite import bound_ok, derived_instance, entry_prims, match_cand, probability
from ecq.structures.qstate import QState
from ecq.time.horizon import Horizon as _Horizon

__all__ = [
    "DISJ",
    "FILTER",
    "GENERAL",
    "SASE",
    "Entry",
    "Horizon",
    "Plan",
    "PlanNode",
    "Stacks",
    "assemble",
    "bound_ok",
    "match_cand",
    "derived_instance",
    "entry_prims",
    "probability",
]

NEG_INF = float("-inf")

# How a node is evaluated.
SASE, FILTER, DISJ, GENERAL = range(4)


# A stack entry: (instance, latest start of a partial match ending here, absolute index
# of the top of the previous stack when the instance arrived).
Entry = tuple[Event, float, int]


class Horizon(_Horizon):
    """The drop horizon of one class (the shared engine's rule, :mod:`ecq.time.horizon`),
    with the number of plan nodes using the class."""

    __slots__ = ("uses",)

    def __init__(self) -> None:
        super().__init__()
        self.uses = 0


class Stacks:
    """One source's stacks inside one plain-sequence node: ``items[k]`` for positions
    ``0 .. n-2`` in arrival order, ``base[k]`` how many were dropped from its bottom (so
    pointers are absolute indexes and survive cleaning)."""

    __slots__ = ("items", "base")

    def __init__(self, n: int) -> None:
        self.items: list[list[Entry]] = [[] for _ in range(n)]
        self.base = [0] * n


class PlanNode:
    """One compiled query or sub-pattern inside a plan, with its own state."""

    __slots__ = (
        "qs",
        "cq",
        "kind",
        "n",
        "window",
        "filters",
        "finals",
        "single",
        "sources",
        "pending",
        "trailing",
        "bound",
        "never",
    )

    def __init__(self, qs: QState) -> None:
        cq = qs.cq
        self.qs = qs
        self.cq = cq
        self.n = cq.length
        self.window = cq.window if cq.window is not None else 0.0
        if cq.kind == KIND_OR:
            self.kind = DISJ
        elif cq.is_filter:
            self.kind = FILTER
        elif cq.plain:
            self.kind = SASE
        else:
            self.kind = GENERAL
        self.filters: list[PredFn | None] = [c.filter for c in cq.comps]
        # Classes whose arrival may complete the node (a general node only).
        last = cq.positives[-1]
        self.finals: frozenset[str] = frozenset().union(
            *(c.classes for c in cq.comps if not c.negated and (cq.kind != KIND_SEQ or c.index == last))
        )
        # The class of each position when it has exactly one (its horizon is looked up
        # once per scan of its stack).
        self.single: list[str | None] = [
            next(iter(c.classes)) if len(c.classes) == 1 else None for c in cq.comps
        ]
        self.sources: dict[Any, Stacks] = {}
        self.pending: list[tuple[Cand, float]] = []
        self.trailing = bool(cq.trailing)
        self.bound = cq.probability if cq.top else None
        self.never = cq.never


class Plan:
    """The plan of one registered query: its nodes (sub-patterns deepest first, then the
    query), which of its nodes use each class at which positions, and the private store
    of its general nodes (source -> class -> instances in arrival order)."""

    __slots__ = ("name", "order", "reg", "nodes", "top", "routes", "stored", "store", "matches")

    def __init__(self, name: str, order: int, reg: int, nodes: list[PlanNode]) -> None:
        self.name = name
        self.order = order
        self.reg = reg
        self.nodes = nodes
        self.top = nodes[-1]
        self.routes: dict[str, list[tuple[Plan, PlanNode, tuple[int, ...]]]] = {}
        for node in nodes:
            by_class: dict[str, list[int]] = {}
            for comp in node.cq.comps:
                for cls in comp.classes:
                    by_class.setdefault(cls, []).append(comp.index)
            for cls, positions in by_class.items():
                self.routes.setdefault(cls, []).append((self, node, tuple(positions)))
        self.stored: frozenset[str] = frozenset(
            cls for node in nodes if node.kind == GENERAL for c in node.cq.comps for cls in c.classes
        )
        self.store: dict[Any, dict[str, list[Event]]] = {}
        self.matches = 0

    def size(self) -> int:
        """Instances this plan stores (stack entries and private store). O(stored)."""
        n = sum(len(items) for node in self.nodes for st in node.sources.values() for items in st.items)
        return n + sum(len(xs) for per in self.store.values() for xs in per.values())


def assemble(
    node: PlanNode, st: Stacks, last: Event, top: int, hclock: float, horizons: dict[str, Horizon]
) -> list[list[Event]]:
    """The matches ``last`` completes: walk the stacks back from the pointers, most
    recent first, backtracking past predecessors that fail a condition (RECENT: the
    first match found; ALL: every one). O(entries visited)."""
    cq = node.cq
    n = node.n
    bound = last.end - node.window
    checks_at = node.qs.checks_at
    mode_all = cq.mode_all
    min_prob = node.bound
    env: list[Event] = [last] * n
    found: list[list[Event]] = []

    def fill(i: int, ptr: int, nxt: Event) -> bool:
        stack = st.items[i]
        j = ptr - st.base[i]
        if j >= len(stack):
            j = len(stack) - 1
        while j >= 0:
            p, t, back = stack[j]
            j -= 1
            if p.moment >= nxt.moment or p.end > nxt.start or t < bound:
                continue
            if p.start < horizons[p.type].at(hclock):
                continue
            env[i] = p
            if checks_at[i] and not all(check(env) for check in checks_at[i]):
                continue
            if i:
                if fill(i - 1, back, p):
                    return True
                continue
            if min_prob is not None and probability(env) < min_prob:
                continue
            found.append(env.copy())
            if not mode_all:
                return True
        return False

    fill(n - 2, top, last)
    return found
