"""The state of one registered node inside the network (:class:`QState`): a query, or a
sub-pattern shared by queries.

The ECQs' CLinks, the assembly, the composite rules and the baseline's plans all read
it, and the network makes it; it imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from ecq.compiler.conditions import PredFn
from ecq.compiler.query import KIND_OR, CompiledQuery

__all__ = ["QState", "NodePlan", "Neg"]


class Neg(NamedTuple):
    """A negated component of one primitive class that the kernels check themselves
    (docs/semantics.md §5): its component, its class, the nearest positive components
    before and after it (-1: none; ``right`` -1 for trailing negation) and the
    conditions that mention it (called with the match's binding, the candidate blocker
    at ``comp``; a missing attribute makes them true)."""

    comp: int
    cls: str
    left: int
    right: int
    conds: tuple[PredFn, ...]


class NodePlan(Protocol):
    """What the compiled kernel keeps on a node (``QState.plan``): its constants, and
    the matches of the node that the kernel's event loop emitted."""

    @property
    def matches(self) -> int: ...




@dataclass(eq=False)
class QState:
    """A registered node (a query, or a shared sub-pattern) inside the network: its
    compiled form, its bit, its registration (``order`` among queries, ``reg`` the moment
    of the register op: it sees instances of later moments only), its *skeleton* (the
    positive components, which the kernels bind as a plain sequence's positions:
    ``ecq.matching.skeleton``) with the classes and conditions of each position, and how many of
    its trailing-negation matches wait for the clock (in the network's ``Deadlines``)."""

    cq: CompiledQuery
    bitno: int
    order: int
    reg: int
    # The skeleton: position p binds component ``slots[p]`` (the positive components in
    # order; for a plain sequence, every component); ``steps`` positions.
    slots: tuple[int, ...] = ()
    steps: int = 0
    # The Kleene components (their skeleton position binds the group's latest event).
    kleene: tuple[int, ...] = ()
    # Per position: a group ``B+`` / ``B{m,}`` whose elements need no condition, so an
    # event some later one (before the next position's) starts no earlier than is
    # never its group's latest (``ecq.matching.assembly`` skips it).
    latest_only: tuple[bool, ...] = ()
    # The conditions checked once position p is bound (binding goes from the last back;
    # a condition that reads a Kleene group waits for the whole candidate), and the
    # classes of each position.
    # Tuples (never changed once made): a position without a check holds the one empty
    # tuple, and the classes are values a snapshot writes once (service.server.snapshot).
    checks_at: tuple[tuple[PredFn, ...], ...] = ()
    classes_at: tuple[tuple[str, ...], ...] = ()
    # The negated components the kernels check themselves (:class:`Neg`, in
    # component order): every one of them, when the node has no Kleene component and
    # each negated component has one class; else none.
    negs: tuple[Neg, ...] = ()
    # A skeleton match needs ``ecq.matching.skeleton.leaf`` to become a candidate (Kleene
    # closure, or negation before the last positive component that ``negs`` lacks).
    leafy: bool = False
    classes: tuple[str, ...] = ()
    waiting: int = 0
    # False once unregistered: its waiting matches are dropped as they come due.
    live: bool = True
    users: int = 1
    # Matches emitted by the Python code; the compiled loop counts its own in the plan.
    counted: int = 0
    # The class of this query's matches for queries that read them (``@name``).
    derived_class: str = ""
    # A match is emitted as it is found: no trailing negation, RETURN, probability
    # clause or Kleene group (whether some query reads ``@name`` is checked when it is
    # found).
    simple: bool = False
    # The compiled kernel's constants of this node (made on use; None otherwise).
    plan: NodePlan | None = None
    # Its selection and consumption policy's state (ecq.matching.policy.PolicyState),
    # set by the network when it installs a node with a policy.
    policy: Any = None
    # Simple but for its policy, which the compiled kernel then applies to the matches
    # it assembled before emitting them itself (a plain or skeletal sequence, or a
    # conjunction, without Kleene closure, trailing negation, RETURN or probability
    # clause).
    kernel_policy: bool = False

    def __post_init__(self) -> None:
        cq = self.cq
        self.derived_class = "@" + cq.name
        # What follows from the query's structure alone, made once per shape.
        layout = cq.node_layout
        slots = self.slots = cq.positives
        self.steps = len(slots)
        self.kleene = layout.kleene
        self.simple = layout.simple
        if cq.checks:
            checks_at: list[list[PredFn]] = [[] for _ in slots]
            for (_, pred), p in zip(cq.checks, layout.check_at, strict=True):
                if p >= 0:
                    checks_at[p].append(pred)
            self.checks_at = tuple([tuple(c) for c in checks_at])
        else:  # the common case (every condition a filter): no list made per position
            self.checks_at = ((),) * len(slots)
        comps = cq.comps
        # A class set of one (nearly every component's) needs no sort; a loop, not
        # nested comprehensions (a call each).
        classes_at = []
        for i in slots:
            c = comps[i].classes
            classes_at.append(tuple(c) if len(c) == 1 else tuple(sorted(c)))
        self.classes_at = tuple(classes_at)
        self.latest_only = layout.latest_only
        self.classes = tuple(sorted(cq.classes()))
        if layout.has_negs:
            self.negs = tuple(
                Neg(
                    c.index, next(iter(c.classes)), *cq.neighbours(c.index), cq.blocker_conds.get(c.index, ())
                )
                for c in comps
                if c.negated
            )
        self.leafy = layout.leafy
        self.kernel_policy = layout.kernel_policy

    @property
    def bit(self) -> int:
        """The node's query bit, ``1 << bitno``: made when read, not kept, since it is
        as long as the number of nodes (kept on every node, the bits of 100,000 queries
        took 600 MB)."""
        return 1 << self.bitno

    @property
    def name(self) -> str:
        return self.cq.name

    @property
    def matches(self) -> int:
        """Matches emitted so far."""
        return self.counted + (self.plan.matches if self.plan is not None else 0)

    @property
    def fast(self) -> bool:
        """Handled by the kernels' query bitsets through its skeleton: plain sequences,
        single-component filters, sequences of primitive classes with negation or
        Kleene closure."""
        cq = self.cq
        return cq.plain or cq.is_filter or cq.skeletal

    @property
    def general(self) -> bool:
        return not self.fast and self.cq.kind != KIND_OR
