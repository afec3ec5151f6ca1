"""A query's selection and consumption policy, compiled (docs/semantics.md §11-§12).

Kept apart from :mod:`ecq.compiler.query` so that the rules of the policies live in one
small module: what the query text says, resolved to component indexes, and the
combinations refused at registration.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ecq.compiler.conditions import PredFn
from ecq.language.ast import Query

__all__ = ["Policy", "has_policy"]


@dataclass(frozen=True)
class Policy:
    """``mode`` is the mode the user chose ("recent", "chronicle" or "all": the query
    itself runs in MODE ALL and the policy chooses); ``strategy`` one of
    ``ecq.language.ast.STRATEGIES``; ``exclusive`` for ``CONSUME EXCLUSIVE``; ``skip``
    the AFTER MATCH SKIP form (None: none) and ``skip_comp`` the component index that
    ``TO FIRST v`` / ``TO LAST v`` names (-1 otherwise)."""

    mode: str
    strategy: str
    exclusive: bool
    skip: str | None
    skip_comp: int = -1
    # A Kleene component's own conditions (the conjuncts that read its events and no
    # other component: its one-event ``filter`` is empty), called with a binding whose
    # entry at the component is one event; what skip-till-next-match asks of an event
    # that might fill it.
    kleene_own: dict[int, tuple[PredFn, ...]] = field(default_factory=dict)
    # Per-component selection (``first:`` / ``last:``, docs/semantics.md §11): for each
    # component index, "first" or "last" (the mode's for an unmarked one); empty when no
    # component is marked.
    select: tuple[str, ...] = ()

    @property
    def filters(self) -> bool:
        """Whether the strategy filters candidates at all."""
        return self.strategy != "skip-till-any-match"

    @property
    def consumes(self) -> bool:
        return self.exclusive or self.skip is not None

    @property
    def logs(self) -> bool:
        """Whether the strategy reads the events between a match's events that no query
        stores (partition contiguity, skip-till-next-match)."""
        return self.strategy in ("partition-contiguity", "skip-till-next-match")


def has_policy(ast: Query) -> bool:
    """Whether the query text chose anything beyond §3-§10 (MODE RECENT / ALL)."""
    return (
        ast.mode == "chronicle"
        or ast.strategy != "skip-till-any-match"
        or ast.consume != "shared"
        or ast.skip is not None
        or any(c.select is not None for c in ast.pattern.items)
    )
