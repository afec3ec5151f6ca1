"""A match leaving the network (:class:`Emission`), and the order in which the matches
of one op are numbered and emitted (docs/semantics.md, "Moments and the order of
emitted matches"): the shared engine and the separate-processing baseline both emit
through here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ecq.event import Event
from ecq.match import Match
from ecq.matching.candidate import Cand
from ecq.matching.composite import entry_key

if TYPE_CHECKING:
    from ecq.structures.qstate import QState

__all__ = ["Emission", "matches_of"]


class Emission:
    """A query's match leaving the network, with what orders it (docs/semantics.md)."""

    __slots__ = ("qs", "cand", "prob", "attrs", "phase", "entries")

    def __init__(self, qs: QState, cand: Cand, prob: float, attrs: dict[str, Any], phase: int) -> None:
        self.qs = qs
        self.cand = cand
        self.prob = prob
        self.attrs = attrs
        self.phase = phase
        self.entries: list[Any] = cand.entries(qs.cq)

    def sort_key(self) -> tuple[Any, ...]:
        entries = self.entries
        for x in entries:
            if type(x) is not Event or x.parts is not None:
                return (self.phase, self.qs.order, entry_key(entries))
        # Primitive events only (the common case): their arrival indexes order them.
        return (self.phase, self.qs.order, (1, tuple([(0, x.arrival) for x in entries])))


def matches_of(emitted: list[Emission], trigger: int, first_seq: int) -> list[Match]:
    """The matches of one op in emission order (docs/semantics.md), numbered from
    ``first_seq``."""
    if len(emitted) > 1:
        emitted.sort(key=Emission.sort_key)
    out = []
    for seq, em in enumerate(emitted, first_seq):
        cand = em.cand
        cq = em.qs.cq
        out.append(
            Match(
                cq.name,
                cand.trigger.src,
                cand.start,
                cand.end,
                em.entries,
                em.attrs,
                em.prob,
                seq,
                trigger,
            )
        )
    return out
