"""The :class:`Engine`: the public face of the shared ECQ network.

It owns time and numbering. Every call that changes anything is an *op* with a moment
(docs/semantics.md); every processed event gets its arrival index; the clock is the
largest ``end`` seen (or a later ``advance_time``); every match gets its ``seq``. It has
no I/O, no threads and no wall clock: the service and the CLI are adapters around it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ecq.collector import collector_paused
from ecq.compiler.query import CompiledQuery, compile_query, compile_text, retag
from ecq.errors import BatchQueryError, DuplicateQueryError, QueryError, SemanticError, UnknownQueryError
from ecq.event import Event
from ecq.kernel.make import KeyViewer, key_views
from ecq.language.ast import Query, to_json
from ecq.language.partition import DEFAULT_KEY, describe_key
from ecq.match import Match
from ecq.matching.emission import Emission
from ecq.network import Network, check_depends
from ecq.ops import OpClock
from ecq.partitions import key_value, output_src, placeholder, view
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
        # Partitions (docs/semantics.md, "Partitions"): ``network`` holds the queries
        # partitioned by source (the default, on the kernel's event loop); each other key
        # in use has a network of its own, which sees every event as a view whose ``src``
        # is the key's value. Keys of the registered queries, and the next registration
        # order: one order across networks, as the emission order needs.
        self._settings = (level, profile, compiled)
        self.keyed: dict[tuple[str, ...], Network] = {}
        self.key_of: dict[str, tuple[str, ...]] = {}
        self._next_order = 0
        # Keys some of whose queries read ``src`` in a condition or RETURN.
        self._reads_src: dict[tuple[str, ...], set[str]] = {}
        # One shard of several (docs/architecture.md, "A cluster"): whether this engine
        # owns a key's value (the key, and the value as a network sees it). A network
        # takes an event whose value it does not own as a placeholder that only moves
        # the clock: the shard that owns the value gives that value's matches, so each
        # match comes from exactly one shard. None: every value is owned.
        self.owns: Callable[[tuple[str, ...], Any], bool] | None = None

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
        if name in self.key_of:
            raise DuplicateQueryError(f"a query named {name!r} is already registered")
        # The collector paused, as for register_many: a query's objects all stay alive,
        # and a full collection set off while registering one by one walks every object
        # of the engine (half the time of registering 10,000 demo queries in a loop).
        with collector_paused():
            return self._register(name, query)

    def _register(self, name: str, query: str | Query | CompiledQuery) -> CompiledQuery:
        """:meth:`register` once ``name`` is checked."""
        if isinstance(query, CompiledQuery) and query.name == name and query.top:
            key = query.partition
            net = self._network_for(key)
            cq = retag(query, f"#{net.seen}")
        else:
            # Compiled for the source's network, as nearly every query is: then not retagged.
            cq = self.compile(name, query, self._tag_for(DEFAULT_KEY))
            key = cq.partition
            net = self._network_for(key)
            cq = retag(cq, f"#{net.seen}")
        self.ops += 1  # a rejected @name takes an op, as it always has
        try:
            self._check_keys(cq)
            net._order = self._next_order
            net.register(cq, 2 * self.ops + 1, self.clock)
        except BaseException:
            self._drop_if_empty(key)
            raise
        self._next_order = net._order
        self.key_of[name] = key
        if key != DEFAULT_KEY and _reads_src(cq):
            self._reads_src.setdefault(key, set()).add(name)
        return cq

    def register_many(self, items: Iterable[tuple[str, str | Query | CompiledQuery]]) -> list[CompiledQuery]:
        """Register several queries as one call: the same as :meth:`register` of each in
        order (the same ops, bits, order and so the same matches), but every query is
        compiled and checked before any is installed, and then all are installed in one
        pass (what depends on the whole set of queries, such as the window masks and
        each class's derived tables, is remade once, not once per query).

        All or nothing: when a query is refused the engine is left exactly as it was
        and a :class:`~ecq.errors.BatchQueryError` names it (its position and name; its
        own error is ``inner``). Returns the compiled queries, in order."""
        batch = list(items)
        with collector_paused():
            planned = self._plan(batch)
            return self._install(planned)

    def _plan(
        self, batch: list[tuple[str, str | Query | CompiledQuery]]
    ) -> list[tuple[CompiledQuery, tuple[str, ...]]]:
        """Compile and check every query of a batch against the engine and the queries
        before it in the batch, changing nothing; raises :class:`BatchQueryError`."""
        planned: list[tuple[CompiledQuery, tuple[str, ...]]] = []
        # Within the batch: each query's key and, per key, its names and their @name reads.
        keys: dict[str, tuple[str, ...]] = {}
        depends: dict[tuple[str, ...], dict[str, frozenset[str]]] = {}
        # Per key, the tag its queries are registered with: found once, as nothing is
        # processed during the batch.
        tags: dict[tuple[str, ...], str] = {}
        registered = self.key_of
        for index, item in enumerate(batch):
            name = item[0] if isinstance(item, (tuple, list)) and len(item) == 2 else None
            try:
                if name is None:
                    raise SemanticError("a batch holds (name, query) pairs")
                query = item[1]
                if not isinstance(name, str) or not name:
                    raise SemanticError("a query needs a non-empty name")
                if name in registered or name in keys:
                    raise DuplicateQueryError(f"a query named {name!r} is already registered")
                if isinstance(query, CompiledQuery) and query.name == name and query.top:
                    cq = query
                else:
                    cq = self.compile(name, query, self._tag_for(DEFAULT_KEY))
                key = cq.partition
                tag = tags.get(key)
                if tag is None:
                    tag = tags[key] = self._tag_for(key)
                cq = retag(cq, tag)
                if cq.depends:
                    self._check_keys(
                        cq,
                        {
                            dep: self.key_of[dep] if dep in self.key_of else keys.get(dep)
                            for dep in cq.depends
                        },
                    )
                    check_depends(cq, _Reads(self._network_of(key), depends.get(key, {})))
            except QueryError as err:
                raise BatchQueryError(err, index, str(name)) from None
            keys[name] = key
            names = depends.get(key)
            if names is None:
                names = depends[key] = {}
            names[name] = cq.depends
            planned.append((cq, key))
        return planned

    def _install(self, planned: list[tuple[CompiledQuery, tuple[str, ...]]]) -> list[CompiledQuery]:
        """Install checked queries, in order, each network in one bulk pass."""
        nets: dict[tuple[str, ...], Network] = {}
        ops, order = self.ops, self._next_order
        bits: dict[tuple[str, ...], tuple[int, list[tuple[int, int]]]] = {}
        done: list[CompiledQuery] = []
        try:
            for cq, key in planned:
                net = nets.get(key)
                if net is None:
                    net = nets[key] = self._network_for(key)
                    bits[key] = (net._next_bit, list(net._free))
                    net.begin_bulk()
                self.ops += 1
                net._order = self._next_order
                net.register(cq, 2 * self.ops + 1, self.clock)
                self._next_order = net._order
                self.key_of[cq.name] = key
                done.append(cq)
                if key != DEFAULT_KEY and _reads_src(cq):
                    self._reads_src.setdefault(key, set()).add(cq.name)
        except BaseException:
            # Checked queries install without error; should one not (a bug, or out of
            # memory), the ones installed go again, so the engine holds none of the batch.
            for net in nets.values():
                net.end_bulk()
            for cq in reversed(done):
                self.unregister(cq.name)
            self.ops, self._next_order = ops, order
            for key, (next_bit, free) in bits.items():
                nets[key]._next_bit, nets[key]._free = next_bit, free
            for key in nets:
                self._drop_if_empty(key)
            raise
        for net in nets.values():
            net.end_bulk()
        return done

    def _tag_for(self, key: tuple[str, ...]) -> str:
        """The tag a query of ``key`` is registered with now (see :func:`retag`)."""
        net = self._network_of(key)
        return f"#{net.seen if net is not None else 0}"

    def _network_of(self, key: tuple[str, ...]) -> Network | None:
        """The network of the queries partitioned by ``key``, if there is one."""
        return self.network if key == DEFAULT_KEY else self.keyed.get(key)

    def _network_for(self, key: tuple[str, ...]) -> Network:
        """The network of the queries partitioned by ``key`` (made when first needed)."""
        net = self._network_of(key)
        if net is None:
            net = self.keyed[key] = Network(*self._settings)
        return net

    def _drop_if_empty(self, key: tuple[str, ...]) -> None:
        net = self.keyed.get(key)
        if net is not None and not net.queries and not net.subs:
            del self.keyed[key]

    def _check_keys(self, cq: CompiledQuery, keys: dict[str, tuple[str, ...] | None] | None = None) -> None:
        """``@name`` reads the matches of a query with the same key only (they live in
        one network). ``keys``: the keys of the names read (default: the registered
        queries')."""
        for dep in sorted(cq.depends):
            other = (self.key_of if keys is None else keys).get(dep)
            if other is not None and other != cq.partition:
                raise SemanticError(
                    f"@{dep} is partitioned by {describe_key(other)} but query {cq.name!r} by "
                    f"{describe_key(cq.partition)}: a query reads @name only from a query with the same key"
                )

    @staticmethod
    def compile(name: str, query: str | Query | CompiledQuery, tag: str = "", tree: bool = False) -> CompiledQuery:
        """Check and compile without registering (same errors as :meth:`register`).

        ``tag`` names the point of the stream the query is registered at: sub-patterns
        are shared by queries registered at the same point (they see the same events).
        A text of a shape compiled before is compiled from its tokens, its syntax tree
        parsed when first read (``ecq.compiler.query.compile_text``); ``tree=True``
        parses it first all the same, for a caller that reads it at once."""
        if isinstance(query, CompiledQuery):
            query = query.ast
        if isinstance(query, str):
            if not tree:
                return compile_text(name, query, tag)
            from ecq.language import parse_query

            return compile_query(name, parse_query(query), query, tag)
        if isinstance(query, Query):
            return compile_query(name, query, None, tag)
        raise SemanticError(f"cannot register a {type(query).__name__} as a query")

    def unregister(self, name: str) -> None:
        """Remove a query at any point of the stream (its pending matches go with it)."""
        key = self.key_of.get(name)
        if key is None:
            raise UnknownQueryError(f"no query named {name!r} is registered")
        self.ops += 1
        self._network_for(key).unregister(name, 2 * self.ops + 1, self.clock)
        del self.key_of[name]
        readers = self._reads_src.get(key)
        if readers is not None:
            readers.discard(name)
            if not readers:
                del self._reads_src[key]
        self._drop_if_empty(key)

    def networks(self) -> list[tuple[tuple[str, ...], Network]]:
        """The networks in use, by key: the source's first (always there), then the
        others in the order their keys were first used."""
        return [(DEFAULT_KEY, self.network), *self.keyed.items()]

    def queries(self) -> list[CompiledQuery]:
        """Registered queries in registration order."""
        states = [qs for _, net in self.networks() for qs in net.queries.values()]
        return [qs.cq for qs in sorted(states, key=lambda q: q.order)]

    def query_state(self, name: str) -> QState:
        key = self.key_of.get(name)
        if key is None:
            raise UnknownQueryError(f"no query named {name!r} is registered")
        return self._network_for(key).queries[name]

    # ------------------------------------------------------------------- events

    def process(self, events: Iterable[Event]) -> list[Match]:
        """Process events in order; returns the matches they release, in emission order.
        Events are stamped with their arrival index and moment. (The kernel's event
        loop, compiled when the kernel is: same results; profiled runs time the
        phases from the Python loop.)"""
        net = self.network
        log = net.source_log
        if log is not None and (net.timers is not None or not net.kernel.notes_sources):
            # A strategy reads the events between a match's (ecq.matching.policy); a
            # compiled kernel's own event loop notes them as it stamps them.
            events = list(events)
            log.note(events, self.arrivals)
        if net.timers is not None:
            return self.step_events(events)
        if self.keyed or self.owns is not None:
            return self._process_keyed(events)
        return net.kernel.run_events(self, events)

    def consuming_since(self) -> float | None:
        """The earliest clock at which a query that uses events up (``CONSUME
        EXCLUSIVE``, ``AFTER MATCH SKIP``) still registered was registered; None when
        there is none. What such a query used up depends on every op since, so whoever
        rebuilds the engine by replay must keep them (docs/semantics.md §12)."""
        return min(
            (st.since for _, net in self.networks() for st in net.policies.values() if st.policy.consumes),
            default=None,
        )

    def _process_keyed(self, events: Iterable[Event]) -> list[Match]:
        """:meth:`process` with several keys in use: each network runs the whole batch
        through its kernel's event loop (a keyed one on views of the events, an event it
        cannot see standing in as a placeholder that only moves the clock), from the
        engine's counters; their matches are then merged into the one emission order
        and numbered. Networks share nothing, so running them one after the other gives
        what running them op by op would."""
        batch = [
            e if e.arrival < 0 else Event(e.src, e.type, e.start, e.end, e.attrs, e.prob, e.id)
            for e in events
        ]
        merged: list[Match] = []
        hosts: list[_NetHost] = []
        owns = self.owns
        # A network without classes (the source's, when every query has another key)
        # has nothing to store, match or fire: it is skipped, unless none has classes
        # (one network must run to move the counters).
        running = [(key, net) for key, net in self.networks() if net.ecqs] or [(DEFAULT_KEY, self.network)]
        # Every keyed network's views, made natively in one pass over the batch when the
        # kernel is compiled: the events a network does not see are given as themselves,
        # marked.
        keyed = [(key, net.ecqs, key in self._reads_src) for key, net in running if key != DEFAULT_KEY]
        native = _native_views()
        made = iter(native(batch, keyed, owns)) if native is not None and keyed else None
        for key, net in running:
            host = _NetHost(self, net)
            hosts.append(host)
            if key == DEFAULT_KEY:
                if owns is None:
                    got = net.kernel.run_events(host, batch)
                else:
                    unseen = bytes([not owns(key, e.src) for e in batch])
                    got = net.kernel.run_events(host, batch, unseen)
            else:
                if made is not None:
                    views, unseen = next(made)
                    got = net.kernel.run_events(host, views, unseen)
                else:
                    views = self._key_views(batch, key, net.ecqs, key in self._reads_src)
                    got = net.kernel.run_events(host, views)
                for m in got:
                    m.src = output_src(m.src)
            merged.extend(got)
        first = hosts[0]
        self.ops, self.arrivals, self.clock = first.ops, first.arrivals, first.clock
        self.since_clean = first.since_clean
        if len(merged) > 1:
            # The registration order of the queries that matched (not of every query: a
            # batch of a few matches in an engine of 100,000 queries reads a few).
            order = {name: self.query_state(name).order for name in {m.query for m in merged}}
            merged.sort(key=lambda m: _emission_key(m, order))
        for m in merged:
            m.seq = self.next_seq
            self.next_seq += 1
        return merged

    def _key_views(
        self, batch: list[Event], key: tuple[str, ...], ecqs: dict[str, Any], keep: bool
    ) -> list[Event]:
        """The batch as the network of ``key`` sees it: per event its view, or a
        placeholder that only moves the clock (no class of the network, no key, or a
        key value this engine does not own). When the kernel is compiled it makes the
        same views natively, the events the network does not see given as themselves
        and marked instead (``ecq.kernel.make.key_views``)."""
        owns = self.owns
        views = []
        for e in batch:
            value = key_value(e, key, keep) if e.type in ecqs else None
            if value is None or (owns is not None and not owns(key, value[0])):
                views.append(placeholder(e))
            else:
                views.append(view(e, value[0], e.type, value[1]))
        return views

    def _on_event(self, e: Event, clock_before: float, clock: float) -> list[Emission] | None:
        owns = self.owns
        if owns is None or owns(DEFAULT_KEY, e.src):
            out = self.network.on_event(e, clock_before, clock)
        else:
            out = _unseen(self.network, e, clock_before, clock, None)
        if not self.keyed:
            return out
        # Every keyed network takes the op too: a view of the event when it has the
        # key's attributes and a class the network uses, else phase 0 alone.
        for key, net in self.keyed.items():
            value = key_value(e, key, key in self._reads_src) if e.type in net.ecqs else None
            if value is not None and owns is not None and not owns(key, value[0]):
                value = None
            if value is None:
                out = _unseen(net, e, clock_before, clock, out)
                continue
            seen = view(e, value[0], e.type, value[1])
            seen.arrival = e.arrival
            seen.moment = e.moment
            more = net.on_event(seen, clock_before, clock)
            if more:
                out = more if out is None else out + more
        return out or None

    def _fire(
        self, moment: int, clock_before: float, clock: float, arrival: int, out: list[Emission]
    ) -> None:
        for _, net in self.networks():
            net.fire(moment, clock_before, clock, arrival, out)

    def emit(self, emitted: list[Emission], trigger: int, out: list[Match]) -> None:
        """As :meth:`OpClock.emit`; a keyed query's match carries its key's value as
        ``src`` (docs/semantics.md, "Partitions")."""
        first = len(out)
        super().emit(emitted, trigger, out)
        if self.keyed:
            for m in out[first:]:
                m.src = output_src(m.src)

    # -------------------------------------------------------------------- stats

    def clean(self) -> int:
        """Run physical cleaning now; returns the number of dropped instances."""
        self.since_clean = 0
        timers = self.network.timers
        if timers is None:
            return sum(net.clean(self.clock, self.arrivals) for _, net in self.networks())
        began = time.perf_counter()
        dropped = sum(net.clean(self.clock, self.arrivals) for _, net in self.networks())
        timers["clean"] += time.perf_counter() - began
        return dropped

    def stats(self, per_query: bool = True) -> dict[str, Any]:
        """ECQs, stored instances, PMB entries, pending matches, matches per query (unless
        not ``per_query``: a dict of every query, which a service holding 100,000 of them
        keeps its own counts of), and the kernel the network runs (``"compiled"`` or
        ``"pure"``)."""
        nets = [net for _, net in self.networks()]
        out = {
            "kernel": self.network.kernel.name,
            "ecqs": sum(len(net.ecqs) for net in nets),
            "queries": sum(len(net.queries) for net in nets),
            "derived_classes": sum(len(net.subs) for net in nets),
            "stored_instances": sum(net.stored() for net in nets),
            "pmb_entries": sum(net.pmb_entries() for net in nets),
            "pending_matches": sum(net.pending() for net in nets),
            "events": self.arrivals,
            "matches": self.next_seq,
            "clock": self.clock,
            # Per key in use: its queries and stored instances (the cost of many keys).
            "partitions": {
                describe_key(key): {"queries": len(net.queries), "stored_instances": net.stored()}
                for key, net in self.networks()
                if net.queries or key != DEFAULT_KEY
            },
        }
        if per_query:
            out["matches_per_query"] = {qs.name: qs.matches for net in nets for qs in net.queries.values()}
        return out

    def _check(self) -> None:
        for key, net in self.networks():
            net._check()
            assert key == DEFAULT_KEY or net.queries or net.subs, "an empty keyed network must go"
            for qs in net.queries.values():
                assert self.key_of[qs.name] == key
        assert len(self.key_of) == sum(len(net.queries) for _, net in self.networks())


class _Reads:
    """What ``check_depends`` asks of a batch's query: the ``@name`` reads of a query of
    its network, registered or earlier in the batch (None: no such query)."""

    def __init__(self, net: Network | None, batch: dict[str, frozenset[str]]) -> None:
        self.net = net
        self.batch = batch

    def __call__(self, name: str) -> frozenset[str] | None:
        found = self.net._depends(name) if self.net is not None else None
        return found if found is not None else self.batch.get(name)


def _reads_src(cq: CompiledQuery) -> bool:
    """Whether the query reads an event's ``src`` (its conditions or RETURN)."""
    return '"attr": "src"' in json.dumps(to_json(cq.ast))


def _unseen(
    net: Network, e: Event, clock_before: float, clock: float, out: list[Emission] | None
) -> list[Emission] | None:
    """An event ``net`` does not see (another key's, or a value another shard owns): it
    counts and moves the clock, which may pass a deadline; ``out`` gains what fires."""
    net.seen += 1
    if clock > net.next_deadline:
        out = out or []
        net.fire(e.moment - 1, clock_before, clock, e.arrival, out)
    return out


_VIEWS: list[KeyViewer | None] = []


def _native_views() -> KeyViewer | None:
    """``ecq.kernel.make.key_views``, made once (the compiled kernel is chosen once per
    process)."""
    if not _VIEWS:
        _VIEWS.append(key_views())
    return _VIEWS[0]


class _NetHost(OpClock):
    """One network's event loop host during :meth:`Engine._process_keyed`: the
    engine's counters at the start of the batch, that network's phases and cleaning."""

    def __init__(self, engine: Engine, net: Network) -> None:
        super().__init__(engine.clean_every)
        self.net = net
        self.ops, self.arrivals, self.clock = engine.ops, engine.arrivals, engine.clock
        self.next_seq = engine.next_seq
        self.since_clean = engine.since_clean

    def _on_event(self, e: Event, clock_before: float, clock: float) -> list[Emission] | None:
        return self.net.on_event(e, clock_before, clock)

    def _fire(
        self, moment: int, clock_before: float, clock: float, arrival: int, out: list[Emission]
    ) -> None:
        self.net.fire(moment, clock_before, clock, arrival, out)

    def clean(self) -> int:
        self.since_clean = 0
        return self.net.clean(self.clock, self.arrivals)


def _holds(items: Sequence[Any], trigger: int) -> bool:
    """Whether a match's ``events`` (groups as lists, a derived instance by its parts,
    as :func:`ecq.match.event_ids` walks them) hold the event of arrival ``trigger``.
    From the last: the event of the op, when there, is most often the last one."""
    for x in reversed(items):
        if type(x) is list:
            if _holds(x, trigger):
                return True
        elif x.parts is not None:
            if _holds(x.parts, trigger):
                return True
        elif x.arrival == trigger:
            return True
    return False


def _emission_key(m: Match, order: dict[str, int]) -> tuple[int, int, int]:
    """The emission order of a match in a batch: its op (the trigger), its phase (a
    match of phase 1 holds the event of its op; one of phase 0 only earlier events),
    the query's registration order. Matches equal in all three are one query's, from
    one network, which emitted them in order already: a stable sort keeps it."""
    return (m.trigger, 1 if _holds(m.events, m.trigger) else 0, order.get(m.query, -1))
