"""A match before selection (:class:`Cand`): what the matching rules of
:mod:`ecq.matching.composite`, the assembly and the baseline's plans produce, and what a
registered node keeps while a trailing negation is pending (:class:`ecq.structures.qstate.QState`).

Kept apart from the rules that make candidates so that the node state can name it
without importing the rules (they read the node state).
"""

from __future__ import annotations

from typing import Any

from ecq.compiler.query import CompiledQuery
from ecq.event import Event

__all__ = ["Bound", "Cand"]

Bound = Any  # an Event, or a list of Events for a Kleene group


class Cand:
    """A match before selection: the bindings of the components and what follows."""

    __slots__ = ("binding", "start", "end", "prob", "trigger", "recent_key", "prims", "ents")

    def __init__(
        self,
        binding: list[Bound],
        start: float,
        end: float,
        prob: float,
        trigger: Event,
        recent_key: tuple[Any, ...],
        prims: frozenset[int],
    ) -> None:
        self.binding = binding
        self.start = start
        self.end = end
        self.prob = prob
        self.trigger = trigger
        self.recent_key = recent_key
        self.prims = prims
        # The entries when known up front (a stack-assembled match: its events).
        self.ents: list[Any] | None = None

    def entries(self, cq: CompiledQuery) -> list[Any]:
        """``events`` of the match: the bound positive components in order
        (docs/semantics.md §9; a disjunction binds one)."""
        if self.ents is not None:
            return self.ents
        return [b for c in cq.comps if not c.negated and (b := self.binding[c.index]) is not None]
