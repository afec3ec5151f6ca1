"""The :class:`Engine`: the public face of the shared ECQ network.

It owns time and numbering: every processed event gets its arrival index, the clock is
the largest ``end`` seen (or a later ``advance_time``), and every match its ``seq``. It
has no I/O, no threads and no wall clock; the service and the CLI are adapters around it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ecq.errors import DuplicateQueryError, SemanticError, UnknownQueryError
from ecq.event import Event
from ecq.language.ast import Query
from ecq.match import Match
from ecq.network import Network, QState
from ecq.query import CompiledQuery, compile_query

__all__ = ["Engine"]

NEG_INF = float("-inf")


class Engine:
    """Evaluates any number of registered queries over one stream, in one shared network.

    ``clean_every``: physical cleaning runs every that many events (results do not depend
    on it; memory does).
    """

    def __init__(self, clean_every: int = 4096) -> None:
        self.network = Network()
        self.clock = NEG_INF
        self.arrivals = 0
        self.next_seq = 0
        self.clean_every = clean_every
        self._since_clean = 0

    # ------------------------------------------------------------------ queries

    def register(self, name: str, query: str | Query | CompiledQuery) -> CompiledQuery:
        """Compile and add a query, which sees the events processed from now on.

        ``query`` is query text, a parsed :class:`Query`, or an already compiled query
        (the service compiles once to validate, then registers). Raises
        :class:`~ecq.errors.QueryError` subclasses and leaves the engine unchanged.
        """
        if not isinstance(name, str) or not name:
            raise SemanticError("a query needs a non-empty name")
        if name in self.network.queries:
            raise DuplicateQueryError(f"a query named {name!r} is already registered")
        cq = self.compile(name, query)
        self.network.register(cq, self.arrivals, self.clock)
        return cq

    @staticmethod
    def compile(name: str, query: str | Query | CompiledQuery) -> CompiledQuery:
        """Check and compile without registering (same errors as :meth:`register`)."""
        if isinstance(query, CompiledQuery):
            return query if query.name == name else compile_query(name, query.ast)
        if isinstance(query, str):
            from ecq.language import parse_query

            return compile_query(name, parse_query(query), query)
        if isinstance(query, Query):
            return compile_query(name, query)
        raise SemanticError(f"cannot register a {type(query).__name__} as a query")

    def unregister(self, name: str) -> None:
        """Remove a query at any point of the stream."""
        if name not in self.network.queries:
            raise UnknownQueryError(f"no query named {name!r} is registered")
        self.network.unregister(name, self.arrivals, self.clock)

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
        """Process events in order; returns the matches they complete, in emission order
        (docs/semantics.md). Events are stamped with their arrival index."""
        out: list[Match] = []
        network = self.network
        process = network.process
        for e in events:
            if e.arrival >= 0:
                e = _copy(e)
            e.arrival = self.arrivals
            self.arrivals += 1
            if e.end > self.clock:
                self.clock = e.end
            completed = process(e, self.clock)
            if completed:
                self._emit(completed, e, out)
            self._since_clean += 1
            if self._since_clean >= self.clean_every:
                self._since_clean = 0
                network.clean(self.clock)
        return out

    def advance_time(self, t: float) -> list[Match]:
        """Move the clock to ``t`` (if later). Matches waiting for the clock (trailing
        negation) are emitted here; nothing else is."""
        if t > self.clock:
            self.clock = t
        return []

    def _emit(self, completed: list[tuple[QState, list[list[Event]]]], trigger: Event, out: list[Match]) -> None:
        for qs, envs in completed:
            cq = qs.cq
            for env in envs:
                prob = 1.0
                for ev in env:
                    prob *= ev.prob
                if prob <= 0.0:
                    continue
                if cq.kind == "and":
                    start = min(ev.start for ev in env)
                    end = max(ev.end for ev in env)
                else:
                    start = env[0].start
                    end = env[-1].end
                attrs: dict[str, Any] = {}
                for label, fn in cq.returns:
                    value = fn(env)
                    attrs[label] = None if _is_missing(value) else value
                out.append(
                    Match(cq.name, trigger.src, start, end, list(env), attrs, prob, self.next_seq, trigger.arrival)
                )
                self.next_seq += 1
                qs.matches += 1
                qs.last_match = end

    # -------------------------------------------------------------------- stats

    def clean(self) -> int:
        """Run physical cleaning now; returns the number of dropped instances."""
        self._since_clean = 0
        return self.network.clean(self.clock)

    def stats(self) -> dict[str, Any]:
        """ECQs, stored instances, PMB entries, matches per query, clock and counters."""
        net = self.network
        return {
            "ecqs": len(net.ecqs),
            "queries": len(net.queries),
            "stored_instances": net.stored(),
            "pmb_entries": net.pmb_entries(),
            "events": self.arrivals,
            "matches": self.next_seq,
            "clock": self.clock,
            "matches_per_query": {qs.name: qs.matches for qs in net.queries.values()},
        }

    def _check(self) -> None:
        self.network._check()


def _copy(e: Event) -> Event:
    copy = Event(e.src, e.type, e.start, e.end, e.attrs, e.prob, e.id)
    copy.parts = e.parts
    return copy


def _is_missing(value: Any) -> bool:
    from ecq.conditions import MISSING

    return value is MISSING
