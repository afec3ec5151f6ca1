"""The EngineHost: the one thread that owns the engine.

Why a single writer: ``ecq.Engine`` is pure, synchronous and not thread-safe, and its
results depend on the order of operations. Every mutation — register, unregister, a
batch, a time advance — is queued to one worker thread (a one-thread executor), so the
order is the queue's order, the store logs exactly that order, and the asyncio loop only
awaits futures: HTTP and WebSocket traffic stay responsive while a large batch runs.

For each operation the thread applies it to the engine, then commits its effects to the
store in one transaction, then hands the committed matches to the hub. If the commit
fails the engine is ahead of the store, so it is rebuilt from the store before anything
else runs. On start the engine is rebuilt by replaying the store's op log into a fresh
engine (matches discarded: they are in the match log already); requests queue behind
the rebuild and ``/readyz`` says when it is done.

Readers never touch the engine: query summaries and stats are snapshots the thread
publishes, and matches are read from the store.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import orjson

from ecq.engine import Engine
from ecq.errors import DuplicateQueryError, QueryError, ScemonError, SemanticError, UnknownQueryError
from ecq.event import Event
from ecq.kernel.make import match_writer
from ecq.language import format_query
from ecq.language.ast import Query, from_json
from ecq.match import Match
from ecq.network import check_depends
from ecq.query import CompiledQuery
from service.server.errors import InBulkError, UnavailableError
from service.server.hub import Published
from service.server.metrics import Metrics
from service.server.rates import MatchRates
from service.server.store import BATCH, REGISTER, TIME, UNREGISTER, MatchRow, Store

__all__ = ["BatchOutcome", "EngineHost", "QueryInfo", "QuerySpec", "spec_query"]

log = logging.getLogger("scemon.host")

T = TypeVar("T")

# A query as the store keeps it: {"text": ...} or {"pattern": <AST JSON>}.
QuerySpec = dict[str, Any]

# Stats are recomputed at most this often (seconds): walking the network costs ~25 ms
# with a thousand queries.
_STATS_EVERY = 1.0


@dataclass
class QueryInfo:
    """A registered query as ``GET /v1/queries`` shows it."""

    name: str
    text: str
    kind: str
    classes: list[str]
    window: float | None
    mode: str
    matches: int = 0
    last_match: float | None = None
    # The queries it reads through @name: a query checked before registering is held
    # against these (no unknown name, no cycle) without asking the writer thread.
    depends: frozenset[str] = frozenset()

    @classmethod
    def of(cls, name: str, cq: CompiledQuery) -> QueryInfo:
        ast = replace(cq.ast, name=None)
        return cls(
            name=name,
            text=format_query(ast).strip(),
            kind=cq.kind,
            classes=sorted(cq.classes()),
            window=cq.window,
            mode="all" if cq.mode_all else "recent",
            depends=frozenset(cq.depends),
        )


@dataclass(frozen=True)
class BatchOutcome:
    accepted: int
    duplicate: bool
    matches: int


def spec_query(spec: QuerySpec) -> str | Query:
    """What ``Engine.register`` takes for a stored spec. Raises QueryError subclasses."""
    if "text" in spec:
        return str(spec["text"])
    return from_json(spec["pattern"])


# The name a query is checked under when the caller gave none: not a valid query name,
# so it can be neither taken nor part of an @name cycle.
_UNNAMED = "-"


def _compile(name: str, spec: QuerySpec) -> CompiledQuery:
    """Parse and compile a stored spec, without an engine. Raises QueryError subclasses."""
    try:
        return Engine.compile(name, spec_query(spec))
    except RecursionError:  # nested so deep the parser ran out of stack
        raise SemanticError("the query is nested too deeply") from None


def _arrival_key(e: Event) -> tuple[float, float]:
    return (e.end, e.start)


class EngineHost:
    """Owns the engine, the op order and ``seq``; see the module docstring."""

    def __init__(
        self,
        store: Store,
        metrics: Metrics,
        publish: Callable[[list[Published]], None],
        trim_every: int = 64,
        match_log_max: int = 5_000_000,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self._publish = publish
        self.trim_every = trim_every
        self.match_log_max = match_log_max
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scemon-engine")
        self._loop: asyncio.AbstractEventLoop | None = None
        self.engine = Engine()
        # Replaced wholesale (never mutated in place) so readers can iterate a snapshot.
        self._infos: dict[str, QueryInfo] = {}
        self.next_seq = 0
        self.state = "starting"
        self.failure: str | None = None
        self._batches_since_trim = 0
        self._stats: dict[str, Any] = {}
        self._stats_at = -math.inf
        self._stats_ops = -1
        self._ops = 0
        self._startup: asyncio.Future[None] | None = None
        self.rates = MatchRates()

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Begin rebuilding on the writer thread; returns at once."""
        self._loop = asyncio.get_running_loop()
        self._startup = self._loop.run_in_executor(self._executor, self._startup_job)

    async def wait_ready(self) -> None:
        if self._startup is not None:
            await asyncio.shield(self._startup)

    def stop(self) -> None:
        """Let queued operations finish, then end the thread."""
        self._executor.shutdown(wait=True, cancel_futures=False)

    @property
    def ready(self) -> bool:
        return self.state == "ok"

    # ----------------------------------------------------------- async interface

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self.state == "failed":
            raise UnavailableError(f"the engine failed: {self.failure}")
        assert self._loop is not None, "EngineHost.start() was not called"
        return await self._loop.run_in_executor(self._executor, fn, *args)

    async def register(self, entries: Sequence[tuple[str, QuerySpec]]) -> list[QueryInfo]:
        """Register queries in order, all or none (raises the first refusal)."""
        return await self._run(self._register, list(entries))

    async def check(self, name: str | None, spec: QuerySpec) -> QueryInfo:
        """What :meth:`register` would answer for one query, without registering it
        (its ``matches`` are 0). Compiled in a worker thread, not the writer: checking
        never delays ingestion; the registered names it is held against are a snapshot."""
        self._require_ok()
        if name is not None and name in self._infos:
            raise DuplicateQueryError(f"a query named {name!r} is already registered")
        cq = await asyncio.to_thread(_compile, name or _UNNAMED, spec)
        infos = self._infos
        check_depends(cq, lambda n: infos[n].depends if n in infos else None)
        return QueryInfo.of(cq.name, cq)

    async def unregister(self, name: str) -> None:
        await self._run(self._unregister, name)

    async def ingest(self, producer: str, batch_id: str, events: list[Event]) -> BatchOutcome:
        """Apply one batch unless ``(producer, batch_id)`` was applied before."""
        return await self._run(self._ingest, producer, batch_id, events)

    async def advance(self, t: float) -> tuple[float, int]:
        """Advance the clock; returns ``(clock, matches released)``."""
        return await self._run(self._advance, t)

    async def stats(self, wait: float = 1.0) -> dict[str, Any]:
        """Engine stats, fresh if the writer can compute them within ``wait`` seconds."""
        if self.state == "ok" and self._stats_ops != self._ops and self._loop is not None:
            job = self._loop.run_in_executor(self._executor, self._refresh_stats, True)
            try:
                await asyncio.wait_for(asyncio.shield(job), wait)
            except TimeoutError:
                pass
        return self._stats

    @property
    def kernel(self) -> str:
        """The kernel the engine runs: "compiled", or "pure" when that could not load."""
        return self.engine.network.kernel.name

    def stats_snapshot(self) -> dict[str, Any]:
        return self._stats

    def queries(self) -> list[QueryInfo]:
        """Registered queries in registration order (a snapshot; any thread)."""
        self._require_ok()
        return list(self._infos.values())

    def query(self, name: str) -> QueryInfo:
        self._require_ok()
        info = self._infos.get(name)
        if info is None:
            raise UnknownQueryError(f"no query named {name!r} is registered")
        return info

    # --------------------------------------------------------- the writer thread

    def _require_ok(self) -> None:
        if self.state != "ok":
            raise UnavailableError(f"the engine is not ready ({self.state}: {self.failure or 'rebuilding'})")

    def _startup_job(self) -> None:
        try:
            started = time.perf_counter()
            self._rebuild()
            log.info(
                "engine rebuilt from the store in %.2f s: %d queries, next seq %d",
                time.perf_counter() - started,
                len(self._infos),
                self.next_seq,
            )
        except Exception as err:  # a store we cannot replay: say so on /readyz
            log.exception("cannot rebuild the engine from the store")
            self.state = "failed"
            self.failure = f"{type(err).__name__}: {err}"

    def _rebuild(self) -> None:
        """A fresh engine fed the op log in its original order; matches are discarded."""
        self.state = "starting"
        self.metrics.up.set(0)
        engine = Engine()
        for op in self.store.ops():
            if op.kind == REGISTER:
                assert op.name is not None and op.body is not None
                engine.register(op.name, spec_query(orjson.loads(op.body)))
            elif op.kind == UNREGISTER:
                assert op.name is not None
                engine.unregister(op.name)
            elif op.kind == BATCH:
                assert op.body is not None
                engine.process(_events_from_log(op.body))
            elif op.kind == TIME:
                assert op.time is not None
                engine.advance_time(op.time)
        next_seq, clock = self.store.meta()
        if clock > engine.clock:  # the advance that set it was trimmed with old batches
            engine.advance_time(clock)
        infos: dict[str, QueryInfo] = {}
        compiled = {cq.name: cq for cq in engine.queries()}
        for stored in self.store.queries():
            cq = compiled.get(stored.name)
            if cq is None:
                raise RuntimeError(
                    f"query {stored.name!r} is in the store but its registration is not in the log"
                )
            info = QueryInfo.of(stored.name, cq)
            info.matches, info.last_match = stored.matches, stored.last_match
            infos[stored.name] = info
        self.engine = engine
        self._infos = infos
        self.next_seq = next_seq
        self._ops += 1
        self._refresh_stats(True)
        self.state = "ok"
        self.failure = None
        self.metrics.up.set(1)

    def _recover(self, err: BaseException) -> UnavailableError:
        """The engine may be ahead of the store: rebuild it from the store."""
        log.error("operation failed after touching the engine (%s); rebuilding from the store", err)
        try:
            self._rebuild()
        except Exception as again:
            self.state = "failed"
            self.failure = f"{type(again).__name__}: {again}"
        return UnavailableError(f"the operation failed and was not applied: {type(err).__name__}: {err}")

    def _register(self, entries: list[tuple[str, QuerySpec]]) -> list[QueryInfo]:
        self._require_ok()
        engine = self.engine
        seen: set[str] = set()
        for index, (name, _) in enumerate(entries):
            if name in self._infos or name in seen:
                err = DuplicateQueryError(f"a query named {name!r} is already registered")
                raise err if len(entries) == 1 else InBulkError(err, index, name)
            seen.add(name)
        # Compile first, off the engine: a query that cannot compile (or that nests so
        # deep the parser runs out of stack) is refused without touching the engine.
        compiled: list[CompiledQuery] = []
        for index, (name, spec) in enumerate(entries):
            try:
                compiled.append(_compile(name, spec))
            except QueryError as err:
                raise err if len(entries) == 1 else InBulkError(err, index, name) from None
        done: list[tuple[str, CompiledQuery]] = []
        try:
            for index, (name, _) in enumerate(entries):
                try:
                    done.append((name, engine.register(name, compiled[index])))
                except QueryError as err:
                    raise err if len(entries) == 1 else InBulkError(err, index, name) from None
        except ScemonError:
            for name, _ in reversed(done):  # all or nothing
                engine.unregister(name)
            raise
        except Exception as err:  # a bug in the engine: do not trust its state
            raise self._recover(err) from err
        try:
            self.store.commit_register(entries)
        except Exception as err:
            raise self._recover(err) from err
        infos = dict(self._infos)
        out = []
        for name, cq in done:
            infos[name] = QueryInfo.of(name, cq)
            out.append(infos[name])
        self._infos = infos
        self._after_op()
        return out

    def _unregister(self, name: str) -> None:
        self._require_ok()
        if name not in self._infos:
            raise UnknownQueryError(f"no query named {name!r} is registered")
        try:
            self.engine.unregister(name)
            self.store.commit_unregister(name)
        except Exception as err:
            raise self._recover(err) from err
        infos = dict(self._infos)
        del infos[name]
        self._infos = infos
        self._after_op()

    def _ingest(self, producer: str, batch_id: str, events: list[Event]) -> BatchOutcome:
        self._require_ok()
        if self.store.is_applied(producer, batch_id):
            self.metrics.duplicates.inc()
            return BatchOutcome(0, True, 0)
        events.sort(key=_arrival_key)  # stable: equal (end, start) keep their posted order
        try:
            matches = self.engine.process(events)
            rows, counts, published = self._number(matches)
            log_body = orjson.dumps([e.to_dict() for e in events])
            max_end = max((e.end for e in events), default=-math.inf)
            next_seq = self.next_seq + len(rows)
            self.store.commit_batch(
                producer, batch_id, log_body, len(events), max_end, rows, counts, next_seq, self.engine.clock
            )
        except Exception as err:
            raise self._recover(err) from err
        self._committed(next_seq, counts, published)
        self.metrics.events.inc(len(events))
        self.metrics.batches.inc()
        self._batches_since_trim += 1
        if self._batches_since_trim >= self.trim_every:
            self._trim()
        self._after_op()
        return BatchOutcome(len(events), False, len(rows))

    def _advance(self, t: float) -> tuple[float, int]:
        self._require_ok()
        try:
            matches = self.engine.advance_time(t)
            rows, counts, published = self._number(matches)
            next_seq = self.next_seq + len(rows)
            self.store.commit_time(t, rows, counts, next_seq, self.engine.clock)
        except Exception as err:
            raise self._recover(err) from err
        self._committed(next_seq, counts, published)
        self._after_op()
        return self.engine.clock, len(rows)

    def _number(
        self, matches: list[Match]
    ) -> tuple[list[MatchRow], dict[str, tuple[int, float]], list[Published]]:
        """Give matches the service's ``seq`` and their wire form."""
        rows: list[MatchRow] = []
        published: list[Published] = []
        counts: dict[str, tuple[int, float]] = {}
        seq = self.next_seq
        dumps = orjson.dumps
        to_dict = match_writer()
        for m in matches:
            wire = to_dict(m)
            wire["seq"] = seq
            body = dumps(wire)
            rows.append((seq, m.query, body))
            published.append((seq, m.query, body.decode()))
            n, _ = counts.get(m.query, (0, m.end))
            counts[m.query] = (n + 1, m.end)
            seq += 1
        return rows, counts, published

    def _committed(
        self, next_seq: int, counts: dict[str, tuple[int, float]], published: list[Published]
    ) -> None:
        self.next_seq = next_seq
        if counts:
            self.rates.add({name: n for name, (n, _) in counts.items()})
        for name, (n, last) in counts.items():
            info = self._infos.get(name)
            if info is not None:
                info.matches += n
                info.last_match = last
            self.metrics.matches.labels(name).inc(n)
        if published and self._loop is not None:
            self._loop.call_soon_threadsafe(self._publish, published)

    def _after_op(self) -> None:
        self._ops += 1
        self._refresh_stats(False)

    def _refresh_stats(self, force: bool) -> None:
        now = time.monotonic()
        if force or now - self._stats_at >= _STATS_EVERY:
            stats = self.engine.stats()
            stats.pop("matches_per_query", None)
            stats["next_seq"] = self.next_seq
            self._stats = stats
            self._stats_at = now
            self._stats_ops = self._ops

    def _trim(self) -> None:
        """Drop old batches from the log: none can still take part in a match."""
        self._batches_since_trim = 0
        queries = {cq.name: cq for cq in self.engine.queries()}
        spans: dict[str, float] = {}

        def span(name: str, depth: int = 0) -> float:
            # A query's reach back in time: its window plus that of the queries it reads
            # through @name (their matches started that much earlier).
            if name in spans:
                return spans[name]
            cq = queries.get(name)
            if cq is None or depth > len(queries):
                return 0.0
            reach = (cq.window or 0.0) + max((span(d, depth + 1) for d in cq.depends), default=0.0)
            spans[name] = reach
            return reach

        retain = max((span(name) for name in queries), default=0.0)
        keep: set[str] = set()
        for cq in queries.values():
            keep |= cq.depends
        # Twice the reach and a second of margin: trimming later than needed costs only
        # replay time, trimming early would change results.
        horizon = self.engine.clock - 2.0 * retain - 1.0
        if math.isfinite(horizon):
            self.store.trim(horizon, keep, self.match_log_max, self.next_seq)


def _events_from_log(body: bytes) -> list[Event]:
    out = []
    for d in orjson.loads(body):
        out.append(
            Event(d["src"], d["type"], d["start"], d["end"], d.get("attrs"), d.get("prob", 1.0), d.get("id"))
        )
    return out
