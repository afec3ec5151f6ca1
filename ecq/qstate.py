"""The state of one registered node inside the network (:class:`QState`): a query, or a
sub-pattern shared by queries.

The ECQs' CLinks, the assembly, the composite rules and the baseline's plans all read
it, and the network makes it; it imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ecq.conditions import PredFn
from ecq.query import KIND_OR, CompiledQuery

if TYPE_CHECKING:
    from ecq.candidate import Cand

__all__ = ["QState", "NodePlan"]


class NodePlan(Protocol):
    """What the compiled kernel keeps on a node (``QState.plan``): its constants, and
    the matches of the node that the kernel's event loop emitted."""

    @property
    def matches(self) -> int: ...


@dataclass(eq=False)
class QState:
    """A registered node (a query, or a shared sub-pattern) inside the network: its
    compiled form, its bit, its registration (``order`` among queries, ``reg`` the moment
    of the register op: it sees instances of later moments only), the conditions grouped
    by the binding step that checks them, and its pending trailing-negation matches."""

    cq: CompiledQuery
    bitno: int
    order: int
    reg: int
    bit: int = 0
    checks_at: list[list[PredFn]] = field(default_factory=list)
    classes_at: list[tuple[str, ...]] = field(default_factory=list)
    classes: tuple[str, ...] = ()
    pending: list[tuple[Cand, float]] = field(default_factory=list)
    users: int = 1
    # Matches emitted by the Python code; the compiled loop counts its own in the plan.
    counted: int = 0
    # The class of this query's matches for queries that read them (``@name``).
    derived_class: str = ""
    # A match is emitted as it is found: no trailing negation, RETURN or probability
    # clause (whether some query reads ``@name`` is checked when it is found).
    simple: bool = False
    # The compiled kernel's constants of this node (made on use; None otherwise).
    plan: NodePlan | None = None

    def __post_init__(self) -> None:
        self.bit = 1 << self.bitno
        self.derived_class = "@" + self.cq.name
        cq = self.cq
        self.simple = cq.top and not cq.trailing and not cq.returns and cq.probability is None
        n = self.cq.length
        self.checks_at = [[] for _ in range(n)]
        for comps, pred in self.cq.checks:
            # The fast path binds a sequence from its last component back.
            self.checks_at[min(comps)].append(pred)
        self.classes_at = [tuple(sorted(c.classes)) for c in self.cq.comps]
        self.classes = tuple(sorted(self.cq.classes()))

    @property
    def name(self) -> str:
        return self.cq.name

    @property
    def matches(self) -> int:
        """Matches emitted so far."""
        return self.counted + (self.plan.matches if self.plan is not None else 0)

    @property
    def fast(self) -> bool:
        """Handled by the bitset fast path (plain sequences and single-component filters)."""
        return self.cq.plain or self.cq.is_filter

    @property
    def general(self) -> bool:
        return not self.fast and self.cq.kind != KIND_OR
