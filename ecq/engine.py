"""The :class:`Engine`: the public face of the shared ECQ network.

It owns time and numbering. Every call that changes anything is an *op* with a moment
(docs/semantics.md); every processed event gets its arrival index; the clock is the
largest ``end`` seen (or a later ``advance_time``); every match gets its ``seq``. It has
no I/O, no threads and no wall clock: the service and the CLI are adapters around it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from ecq.compiler.query import CompiledQuery, compile_query, retag
from ecq.errors import DuplicateQueryError, SemanticError, UnknownQueryError
from ecq.event import Event
from ecq.language.ast import Query
from ecq.match import Match
from ecq.matching.emission import Emission
from ecq.network import Network
from ecq.ops import OpClock
from ecq.structures.qstate import QState

__all__ = ["Engine"]


class Engine(OpClock):
    """Evaluates any number of registered queries over one stream, in one shared network.

    ``clean_every``: physical cleaning runs every that many events (results do not depend
    on it; memory does). ``level``: the techniques in use, for the benchmark's ablations
    (``ecq.network.LEVELS``; every level gives the same matches). ``profile``: accumulate
    seconds per phase in ``network.timers``. ``compiled``: the kernel (``ecq.kernel``):
    compiled when built (None, the default), the pure-Python one (False), or compiled
    or a ValueError saying why it cannot be (True).
    """

    def __init__(
        self,
        clean_every: int = 4096,
        level: str = "summary",
        profile: bool = False,
        compiled: bool | None = None,
    ) -> None:
        super().__init__(clean_every)
        self.network = Network(level, profile, compiled)

    # ------------------------------------------------------------------ queries

    def register(self, name: str, query: str | Query | CompiledQuery) -> CompiledQuery:
        """Compile and add a query, which sees the events processed from now on.

        ``query`` is query text, a parsed :class:`Query`, or a compiled query (one
        compiled under ``name`` is only re-tagged for this point of the stream, not
        compiled again). Raises :class:`~ecq.errors.QueryError` subclasses and leaves
        the engine unchanged.
        """
        if not isinstance(name, str) or not name:
            raise SemanticError("a query needs a non-empty name")
        if name in self.network.queries:
            raise DuplicateQueryError(f"a query named {name!r} is already registered")
        tag = f"#{self.network.seen}"
        if isinstance(query, CompiledQuery) and query.name == name and query.top:
            cq = retag(query, tag)
        else:
            cq = self.compile(name, query, tag=tag)
        self.ops += 1
        self.network.register(cq, 2 * self.ops + 1, self.clock)
        return cq

    @staticmethod
    def compile(name: str, query: str | Query | CompiledQuery, tag: str = "") -> CompiledQuery:
        """Check and compile without registering (same errors as :meth:`register`).

        ``tag`` names the point of the stream the query is registered at: sub-patterns
        are shared by queries registered at the same point (they see the same events)."""
        if isinstance(query, CompiledQuery):
            query = query.ast
        if isinstance(query, str):
            from ecq.language import parse_query

            return compile_query(name, parse_query(query), query, tag)
        if isinstance(query, Query):
            return compile_query(name, query, None, tag)
        raise SemanticError(f"cannot register a {type(query).__name__} as a query")

    def unregister(self, name: str) -> None:
        """Remove a query at any point of the stream (its pending matches go with it)."""
        if name not in self.network.queries:
            raise UnknownQueryError(f"no query named {name!r} is registered")
        self.ops += 1
        self.network.unregister(name, 2 * self.ops + 1, self.clock)

    def queries(self) -> list[CompiledQuery]:
        """Registered queries in registration order."""
        return [qs.cq for qs in sorted(self.network.queries.values(), key=lambda q: q.order)]

    def query_state(self, name: str) -> QState:
        try:
            return self.network.queries[name]
        except KeyError:
            raise UnknownQueryError(f"no query named {name!r} is registered") from None

    # ------------------------------------------------------------------- events

    def process(self, events: Iterable[Event]) -> list[Match]:
        """Process events in order; returns the matches they release, in emission order.
        Events are stamped with their arrival index and moment. (The kernel's event
        loop, compiled when the kernel is: same results; profiled runs time the
        phases from the Python loop.)"""
        net = self.network
        log = net.source_log
        if log is not None:
            # A strategy reads the events between a match's (ecq.matching.policy).
            events = list(events)
            log.note(events, self.arrivals)
        if net.timers is not None:
            return self.step_events(events)
        return net.kernel.run_events(self, events)

    def consuming_since(self) -> float | None:
        """The earliest clock at which a query that uses events up (``CONSUME
        EXCLUSIVE``, ``AFTER MATCH SKIP``) still registered was registered; None when
        there is none. What such a query used up depends on every op since, so whoever
        rebuilds the engine by replay must keep them (docs/semantics.md §12)."""
        return min(
            (st.since for st in self.network.policies.values() if st.policy.consumes),
            default=None,
        )

    def _on_event(self, e: Event, clock_before: float, clock: float) -> list[Emission] | None:
        return self.network.on_event(e, clock_before, clock)

    def _fire(
        self, moment: int, clock_before: float, clock: float, arrival: int, out: list[Emission]
    ) -> None:
        self.network.fire(moment, clock_before, clock, arrival, out)

    # -------------------------------------------------------------------- stats

    def clean(self) -> int:
        """Run physical cleaning now; returns the number of dropped instances."""
        self.since_clean = 0
        timers = self.network.timers
        if timers is None:
            return self.network.clean(self.clock)
        began = time.perf_counter()
        dropped = self.network.clean(self.clock)
        timers["clean"] += time.perf_counter() - began
        return dropped

    def stats(self) -> dict[str, Any]:
        """ECQs, stored instances, PMB entries, pending matches, matches per query, and
        the kernel the network runs (``"compiled"`` or ``"pure"``)."""
        net = self.network
        return {
            "kernel": net.kernel.name,
            "ecqs": len(net.ecqs),
            "queries": len(net.queries),
            "derived_classes": len(net.subs),
            "stored_instances": net.stored(),
            "pmb_entries": net.pmb_entries(),
            "pending_matches": net.pending(),
            "events": self.arrivals,
            "matches": self.next_seq,
            "clock": self.clock,
            "matches_per_query": {qs.name: qs.matches for qs in net.queries.values()},
        }

    def _check(self) -> None:
        self.network._check()
