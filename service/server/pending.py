"""Registrations and deletions at an event time: a query (or its delete) held until the
stream reaches a given time
(docs/architecture.md, "Registering and deleting at one point of the stream").

``POST /v1/queries`` with ``at: T`` does not install the query at once: it is logged and
held, and installed exactly where the released stream reaches ``T`` — after every
released event with ``end < T``, before the first with ``end >= T`` (or before a time
advance to ``T`` or beyond). Just before installing, the engine's clock is advanced to
``T``, so the query starts from the same clock wherever it is installed: on one
service, or on every shard of a cluster, each of which reaches ``T`` in its own share of
the stream. The shards' matches together are then one service's registering at ``T``.

Why in the time keeper: the keeper is where events leave the reorder buffer for the
engine, in the order the engine takes them; splitting a released run there is the one
place that sees both live ingestion and a rebuild's replay the same way, so a rebuild
installs a held query at the same point as it was installed live (the op log holds the
registration where it was accepted, with its ``T``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ecq.compiler.query import CompiledQuery
from ecq.engine import Engine
from ecq.event import Event
from ecq.match import Match
from ecq.time.timekeeper import IDLE, MAX_AHEAD, Late, TimeKeeper

__all__ = ["Held", "PendingKeeper"]


@dataclass
class Held:
    """Queries registered together to be installed when the stream reaches ``at``, or
    (``delete``) a query to be deleted then (``queries`` empty)."""

    at: float
    queries: list[tuple[str, CompiledQuery]]
    delete: str | None = None


class PendingKeeper(TimeKeeper[Engine]):
    """A :class:`~ecq.time.timekeeper.TimeKeeper` that also installs held queries where
    the released stream reaches their time."""

    def __init__(
        self, engine: Engine, lateness: float = 0.0, max_ahead: float = MAX_AHEAD, idle: float = IDLE
    ) -> None:
        super().__init__(engine, lateness, max_ahead, idle)
        self.waiting: list[Held] = []
        # Names installed, and names deleted by a held delete, since the host last looked
        # (it updates its query list, and the store forgets the deleted).
        self._installed: list[str] = []
        self._deleted: list[str] = []

    # ------------------------------------------------------------------ holding

    def hold(self, at: float, queries: list[tuple[str, CompiledQuery]]) -> None:
        """Hold queries until the stream reaches ``at`` (which the caller checked is
        beyond the released clock). Groups are installed in order of ``at``, then in the
        order they were held."""
        self._insert(Held(at, list(queries)))

    def hold_delete(self, at: float, name: str) -> None:
        """Hold the deletion of a query (installed or itself held) until the stream
        reaches ``at`` (which the caller checked is beyond the released clock). In order
        of ``at`` with the held registrations, then in the order they were held."""
        self._insert(Held(at, [], name))

    def _insert(self, held: Held) -> None:
        index = len(self.waiting)
        while index > 0 and self.waiting[index - 1].at > held.at:
            index -= 1
        self.waiting.insert(index, held)

    def drop(self, name: str) -> bool:
        """Forget a held query (deleted before the stream reached its time)."""
        for group in self.waiting:
            for i, (held, _) in enumerate(group.queries):
                if held == name:
                    del group.queries[i]
                    if not group.queries:
                        self.waiting.remove(group)
                    return True
        return False

    def drop_delete(self, name: str) -> bool:
        """Forget a held delete (cancelled, or the query deleted at once)."""
        for group in self.waiting:
            if group.delete == name:
                self.waiting.remove(group)
                return True
        return False

    def deleting(self) -> dict[str, float]:
        """Every held delete: ``name -> its time``."""
        return {group.delete: group.at for group in self.waiting if group.delete is not None}

    def waiting_for(self, name: str) -> float | None:
        """The time a held query waits for, or None when it is not held."""
        for group in self.waiting:
            if any(held == name for held, _ in group.queries):
                return group.at
        return None

    def installed(self) -> list[str]:
        """The names installed since the last call."""
        out, self._installed = self._installed, []
        return out

    def deleted(self, peek: bool = False) -> list[str]:
        """The names a held delete removed since the last call (``peek``: without
        forgetting them, for the store's commit of the op that removed them)."""
        if peek:
            return list(self._deleted)
        out, self._deleted = self._deleted, []
        return out

    def _install_due(self, upto: float) -> list[Match]:
        """Install (or delete) every group whose time is at most ``upto``, each after
        advancing the engine's clock to its time: the matches that advance released."""
        matches: list[Match] = []
        while self.waiting and self.waiting[0].at <= upto:
            group = self.waiting.pop(0)
            if group.at > self.engine.clock:
                matches += self.engine.advance_time(group.at)
            if group.delete is not None:
                # A query still waiting for a later time never runs; one installed goes.
                if not self.drop(group.delete) and group.delete in self.engine.key_of:
                    self.engine.unregister(group.delete)
                self._deleted.append(group.delete)
                continue
            self.engine.register_many(group.queries)
            self._installed += [name for name, _ in group.queries]
        return matches

    # ------------------------------------------------------------------ the keeper's

    def _apply(self, released: list[Event]) -> tuple[list[Match], Late]:
        if not self.waiting or not released:
            return super()._apply(released)
        matches: list[Match] = []
        late = Late()
        rest: Sequence[Event] = released
        while rest and self.waiting:
            at = self.waiting[0].at
            cut = next((i for i, e in enumerate(rest) if e.end >= at), None)
            if cut is None:
                break
            if cut:
                found, behind = super()._apply(list(rest[:cut]))
                matches += found
                late.extend(behind)
            matches += self._install_due(rest[cut].end)
            rest = rest[cut:]
        if rest:
            found, behind = super()._apply(list(rest))
            matches += found
            late.extend(behind)
        return matches, late

    def advance_time(self, t: float) -> list[Match]:
        matches, _ = self._apply(self.reorder.observe(t))
        target = t if not self.lateness else self.reorder.observed - self.lateness
        matches += self._install_due(target)
        matches += self.engine.advance_time(target)
        return matches

    def catch_up(self, observed: float, released: float) -> list[Match]:
        matches, _ = self._apply(self.reorder.observe(observed))
        if released > self.engine.clock:
            matches += self._install_due(released)
            matches += self.engine.advance_time(released)
        return matches
