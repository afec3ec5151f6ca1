"""The EngineHost: the one thread that owns the engine.

Why a single writer: ``ecq.Engine`` is pure, synchronous and not thread-safe, and its
results depend on the order of operations. Every mutation — register, unregister, a
batch, a time advance — is queued to one worker thread (a one-thread executor), so the
order is the queue's order, the store logs exactly that order, and the asyncio loop only
awaits futures: HTTP and WebSocket traffic stay responsive while a large batch runs.

The engine sits behind a :class:`~ecq.time.timekeeper.TimeKeeper`: events go through its
reorder buffer (allowed lateness), late events are counted and reported, and events too
far ahead of the clock are refused before anything changes. The buffer is part of the
logged state: batches are logged as posted (sorted), so replaying the log refills it.

Registration compiles first, on a thread of its own, and only then queues the install
(a re-tag and the network's bookkeeping, linear in the query) to the writer, so a query
of ten thousand classes does not hold up other producers' batches while it compiles.

For each operation the writer applies it to the engine, then commits its effects to the
store in one transaction, then hands the committed matches to the hub.

States (``/readyz``):

- ``starting``: the engine is rebuilt by replaying the store's op log into a fresh
  engine (each stored query compiled once; matches discarded: they are in the match log
  already). The log's head — its registrations before any batch — is read from the
  snapshot of the queries instead when one stands for it (service.server.snapshot).
  Writes are answered 503 with ``Retry-After`` at once, never queued behind the rebuild.
- ``ok``: serving.
- ``unwritable``: the store refused a write (disk full, read-only, I/O error: a
  :class:`~service.server.faults.StoreFault`). Writes are answered 503 saying so; reads
  go on. The store is probed every few seconds; when it writes again the engine — which
  may hold an operation the store lost — is rebuilt once, and serving resumes. So a
  full disk costs one rebuild however many batches are refused meanwhile.
- ``failed``: the store cannot be replayed or is corrupt; a restart checks it.

If an operation fails for any other reason after touching the engine (a bug), the
engine is rebuilt from the store at once.

Readers never touch the engine: query summaries and stats are snapshots the thread
publishes, and matches are read from the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import orjson

from api.routing import ONLY_SHARD
from ecq import collector
from ecq.collector import collector_paused, full_collections_held
from ecq.compiler.query import CompiledQuery
from ecq.engine import Engine
from ecq.errors import (
    AheadError,
    BatchQueryError,
    DuplicateQueryError,
    ScemonError,
    SemanticError,
    UnknownQueryError,
)
from ecq.event import Event
from ecq.kernel.make import block_writer
from ecq.language import format_query
from ecq.language.ast import Query, from_json
from ecq.language.partition import describe_key
from ecq.match import Match
from ecq.network import check_depends
from ecq.time.timekeeper import IDLE, MAX_AHEAD, Late
from service.server import sharding, snapshot
from service.server.blocks import Block
from service.server.errors import (
    BufferFullError,
    ConflictError,
    InBulkError,
    InvalidInputError,
    UnavailableError,
)
from service.server.faults import StoreFault
from service.server.limits import check_pattern_size, check_query_bounds
from service.server.metrics import Metrics
from service.server.pending import PendingKeeper
from service.server.rates import MatchRates
from service.server.snapshot import SNAPSHOT_FILE, HeadDigest, ops_head
from service.server.store import (
    BATCH,
    LATENESS,
    REGISTER,
    TIME,
    UNREGISTER,
    Clocks,
    Op,
    Store,
    arrival_key,
    arrow_log,
    events_body,
    events_of,
)
from service.server.versions import language_version

__all__ = ["BatchOutcome", "EngineHost", "LateRow", "Prepared", "QueryInfo", "QuerySpec", "spec_query"]

log = logging.getLogger("scemon.host")

T = TypeVar("T")

# A query as the store keeps it: {"text": ...} or {"pattern": <AST JSON>}.
QuerySpec = dict[str, Any]

# A late event of a batch: (its index in the batch as posted, its id, seconds late).
LateRow = tuple[int, str | int, float]

STARTING, OK, UNWRITABLE, FAILED = "starting", "ok", "unwritable", "failed"

# The ops of the log's head, which a snapshot may stand for: before the first batch or
# time advance no event has reached the engine, and a lateness change touches only the
# time keeper's (empty) buffer.
HEAD_KINDS = frozenset({REGISTER, UNREGISTER, LATENESS})

# Events per call of the engine (see EngineHost._process): a few milliseconds of work.
SLICE = 2048

# Seconds between checks of every row's checksum while serving (the store is checked
# whole at start): an hour, as a check reads the whole store.
SCRUB_EVERY = 3600.0

# Seconds a client is told to wait (Retry-After) while the engine rebuilds.
REBUILD_RETRY = 1
# Seconds between probes of a store that cannot write: the first, and the most after
# backing off (a store that fails again right after resuming is probed less often, so a
# disk that frees a little space now and then cannot cause a rebuild every second).
PROBE_FIRST = 1.0
PROBE_MAX = 30.0


@dataclass
class QueryInfo:
    """A registered query as ``GET /v1/queries`` shows it."""

    name: str
    text: str
    kind: str
    # Sorted; a tuple, shared by the queries of the same classes (a listing of 100,000).
    classes: tuple[str, ...]
    window: float | None
    mode: str
    matches: int = 0
    last_match: float | None = None
    # The queries it reads through @name: a query checked before registering is held
    # against these (no unknown name, no cycle) without asking the writer thread.
    depends: frozenset[str] = frozenset()
    # The partition key (docs/semantics.md, "Partitions"): [] for PARTITION BY NONE.
    partition: tuple[str, ...] = ("src",)
    # Registered to be installed where the stream reaches this event time (or None:
    # at once); ``pending`` while the stream has not reached it (service.server.pending).
    at: float | None = None
    pending: bool = False
    # Deleted where the stream reaches this event time (a held delete; service.server.pending).
    deleting_at: float | None = None

    @classmethod
    def of(
        cls,
        name: str,
        cq: CompiledQuery,
        text: str | None = None,
        ordered: dict[frozenset[str], tuple[str, ...]] | None = None,
    ) -> QueryInfo:
        """``text``: the canonical text when already printed (else printed here).
        ``ordered``: the sorted classes of the sets met so far, to share (a rebuild lists
        every query: queries of the same classes hold the same set)."""
        classes = cq.classes()
        got = None if ordered is None else ordered.get(classes)
        if got is None:
            got = tuple(sorted(classes))
            if ordered is not None:
                ordered[classes] = got
        return cls(
            name,
            text if text is not None else canonical_text(cq),
            cq.kind,
            got,
            cq.window,
            cq.mode,
            depends=frozenset(cq.depends),
            partition=cq.partition,
        )


def canonical_text(cq: CompiledQuery) -> str:
    return format_query(replace(cq.ast, name=None)).strip()


@dataclass(frozen=True)
class Prepared:
    """A query compiled off the writer thread, ready to install."""

    name: str
    spec: QuerySpec
    cq: CompiledQuery
    text: str


@dataclass(frozen=True)
class BatchOutcome:
    accepted: int
    duplicate: bool
    matches: int
    late: list[LateRow]
    # Matches dropped over the per-event cap (see EngineHost._cap).
    capped: int = 0


def spec_query(spec: QuerySpec) -> str | Query:
    """What ``Engine.register`` takes for a stored spec. Raises QueryError subclasses."""
    if "text" in spec:
        return str(spec["text"])
    return from_json(spec["pattern"])


# The name a query is checked under when the caller gave none: not a valid query name,
# so it can be neither taken nor part of an @name cycle.
_UNNAMED = "-"


def _dumps(value: Any) -> str:
    # The wire's JSON encoder for the block writer: orjson's compact text.
    return orjson.dumps(value).decode()


def _compile(name: str, spec: QuerySpec) -> CompiledQuery:
    """Check a spec's size, parse and compile it, without an engine. Raises
    QueryError subclasses, and 413/422 for a pattern over its size limits."""
    if "pattern" in spec:
        check_pattern_size(spec["pattern"])
    try:
        # (Its tree is read at once below: parsed first.)
        cq = Engine.compile(name, spec_query(spec), tree=True)
    except RecursionError:  # nested so deep the parser ran out of stack
        raise SemanticError("the query is nested too deeply") from None
    check_query_bounds(cq.ast)
    return cq


def prepare(entries: Sequence[tuple[str, QuerySpec]]) -> list[Prepared]:
    """Compile queries and print their canonical text, without an engine (any thread).
    Raises the first refusal; in a bulk call wrapped with its index and name."""
    out = []
    bulk = len(entries) > 1
    with collector_paused():
        for index, (name, spec) in enumerate(entries):
            try:
                cq = _compile(name, spec)
            except ScemonError as err:
                raise InBulkError(err, index, name) if bulk else err from None
            out.append(Prepared(name, spec, cq, canonical_text(cq)))
    return out


class EngineHost:
    """Owns the engine, the op order and ``seq``; see the module docstring."""

    def __init__(
        self,
        store: Store,
        metrics: Metrics,
        publish: Callable[[list[Block]], None],
        trim_every: int = 64,
        match_log_max: int = 5_000_000,
        lateness: float = 0.0,
        max_ahead: float = MAX_AHEAD,
        buffer_max: int = 1_000_000,
        wall: Callable[[], float] = time.time,
        idle: float = IDLE,
        scrub_every: float = SCRUB_EVERY,
        match_cap: int = 0,
        shard: str = "",
        cluster: str = "",
        snapshots: bool = True,
    ) -> None:
        """``lateness`` is applied once the engine is rebuilt (a change is logged as an
        op); ``wall`` is the wall clock that guards an engine without a clock yet and
        tells when a producer has gone ``idle`` (seconds without a batch); every
        ``scrub_every`` seconds (0: never) the store's checksums are all checked;
        ``match_cap``: the matches one event may complete for one query (0: no cap);
        ``shard``: this shard's place ``"K/N"`` (service.server.sharding), or empty;
        ``cluster``: the shard URLs, for its default slot map. A slot map kept in the
        store's folder (a move wrote it) takes the place of both."""
        self.store = store
        self.metrics = metrics
        self._publish = publish
        self.trim_every = trim_every
        self.match_log_max = match_log_max
        self.lateness = lateness
        self.max_ahead = max_ahead
        self.buffer_max = buffer_max
        self.match_cap = match_cap
        self._wall = wall
        self.idle = idle
        self.scrub_every = scrub_every
        self._scrub: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scemon-engine")
        # One thread: a big compile competes with the writer for the interpreter, so
        # two of them would only slow ingestion down more.
        self._compiler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scemon-compile")
        self._loop: asyncio.AbstractEventLoop | None = None
        self.slots = sharding.ShardSlots.open(store.path.parent, shard, cluster)
        self.owns = self.slots.owns()
        self.shard = shard
        # Whether the rebuild reads and writes the snapshot of the log's head.
        self.snapshots = snapshots
        self.keeper = PendingKeeper(Engine(), 0.0, max_ahead, idle)
        self.keeper.engine.owns = self.owns
        # Since this process started: late events applied, events and time advances
        # refused as too far ahead, batches refused for a full buffer.
        self.counts = {"late_events": 0, "refused_ahead": 0, "buffer_full": 0, "matches_capped": 0}
        # Replaced wholesale (never mutated in place) so readers can iterate a snapshot.
        self._infos: dict[str, QueryInfo] = {}
        self.next_seq = 0
        self.state = STARTING
        self.failure: str | None = None
        # The store fault while unwritable, and whether the engine ran ahead of the store.
        self.fault: StoreFault | None = None
        self._stale = False
        self._probe_every = PROBE_FIRST
        self._resumed_at = -math.inf
        # Replay progress while starting: (ops replayed, ops in the log).
        self.progress = (0, 0)
        self._batches_since_trim = 0
        self._stats: dict[str, Any] = {}
        self._stats_ops = -1
        self._stats_job: asyncio.Future[None] | None = None
        self._ops = 0
        self._write_block = block_writer()
        self._startup: asyncio.Future[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self.rates = MatchRates()
        # Canonical texts the last rebuild printed (not kept in the store for this build).
        self._printed: list[tuple[int, str]] = []
        # scemon_matches_total's child of each query that matched (see _committed).
        self._match_counters: dict[str, Any] = {}

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Begin rebuilding on the writer thread; returns at once."""
        self._loop = asyncio.get_running_loop()
        self._startup = self._loop.run_in_executor(self._executor, self._startup_job)
        self._watch = self._loop.create_task(self._watch_store())
        if self.scrub_every > 0:
            self._scrub = self._loop.create_task(self._scrub_store())

    async def wait_ready(self) -> None:
        if self._startup is not None:
            await asyncio.shield(self._startup)

    def stop(self) -> None:
        """Let queued operations finish, then end the threads."""
        if self._watch is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._watch.cancel)
        if self._scrub is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._scrub.cancel)
        self._compiler.shutdown(wait=True, cancel_futures=True)
        self._executor.shutdown(wait=True, cancel_futures=False)

    @property
    def ready(self) -> bool:
        return self.state == OK

    @property
    def engine(self) -> Engine:
        return self.keeper.engine

    def status(self) -> str:
        """What ``/readyz`` says besides the state: the rebuild's progress, the store's
        fault, or why the engine failed."""
        if self.state == STARTING:
            done, total = self.progress
            return f"rebuilding the engine from the store: {done} of {total} logged operations replayed"
        if self.state == UNWRITABLE and self.fault is not None:
            return str(self.fault)
        return self.failure or ""

    # ----------------------------------------------------------- async interface

    def _admit(self) -> None:
        """Refuse a write at once unless serving: never leave it queued behind a
        rebuild or a store that cannot write."""
        if self.state == STARTING:
            raise UnavailableError(f"the engine is not ready ({self.status()})", retry_after=REBUILD_RETRY)
        if self.state == UNWRITABLE:
            raise UnavailableError(f"not applied: {self.status()}", retry_after=math.ceil(self._probe_every))
        if self.state == FAILED:
            raise UnavailableError(f"the engine failed: {self.failure}")

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        self._admit()
        assert self._loop is not None, "EngineHost.start() was not called"
        return await self._loop.run_in_executor(self._executor, fn, *args)

    async def register(
        self, entries: Sequence[tuple[str, QuerySpec]], at: float | None = None
    ) -> list[QueryInfo]:
        """Register queries in order, all or none (raises the first refusal). They are
        compiled off the writer thread, then installed together by it: at once, or, with
        ``at``, where the released stream reaches that event time (service.server.pending;
        409 when it is there already)."""
        self._admit()
        entries = list(entries)
        self._check_names(entries)  # before compiling: a taken name fails fast
        if at is not None and not math.isfinite(at):
            raise InvalidInputError(f"at must be a finite event time, not {at}", field="at")
        assert self._loop is not None, "EngineHost.start() was not called"
        prepared = await self._loop.run_in_executor(self._compiler, prepare, entries)
        if at is not None:
            return await self._run(self._hold, prepared, at)
        return await self._run(self._install, prepared)

    async def check(self, name: str | None, spec: QuerySpec) -> QueryInfo:
        """What :meth:`register` would answer for one query, without registering it
        (its ``matches`` are 0). Compiled on the compiling thread, not the writer:
        checking never delays ingestion; the registered names it is held against are a
        snapshot."""
        self._require_readable()
        if name is not None and name in self._infos:
            raise DuplicateQueryError(f"a query named {name!r} is already registered")
        assert self._loop is not None, "EngineHost.start() was not called"
        cq = await self._loop.run_in_executor(self._compiler, _compile, name or _UNNAMED, spec)
        infos = self._infos
        check_depends(cq, lambda n: infos[n].depends if n in infos else None)
        _not_deleting(cq, infos)
        _check_keys(cq, infos)
        return QueryInfo.of(cq.name, cq)

    async def unregister(self, name: str, at: float | None = None) -> QueryInfo | None:
        """Delete a query: at once, or, with ``at``, where the released stream reaches
        that event time (service.server.pending; 409 when it is there already). Returns
        the query as listed while its delete is held (None when deleted at once)."""
        if at is None:
            await self._run(self._unregister, name)
            return None
        if not math.isfinite(at):
            raise InvalidInputError(f"at must be a finite event time, not {at}", field="at")
        return await self._run(self._hold_delete, name, at)

    async def keep(self, name: str) -> QueryInfo:
        """Cancel the held delete of a query (409 when none is held)."""
        return await self._run(self._keep, name)

    async def ingest(
        self,
        producer: str,
        batch_id: str,
        events: list[Event],
        arrow: bytes | None = None,
        ordered: bool = False,
        epoch: int | None = None,
    ) -> BatchOutcome:
        """Apply one batch unless ``(producer, batch_id)`` was applied before. ``arrow``:
        the Arrow body the events came in, which the op log then keeps as it came;
        ``ordered``: the events already come by ``(end, start)`` (no sort needed);
        ``epoch``: the slot map the batch was routed by (refused if not this shard's)."""
        return await self._run(self._ingest, producer, batch_id, events, arrow, ordered, epoch)

    # The slot map (service.server.sharding): each call on the writer, in queue order.
    async def slot_fence(self, on: bool) -> None:
        await self._run(sharding.fence, self, on)

    async def slot_export(self, slots: set[int]) -> list[Event]:
        return await self._run(sharding.export, self, slots)

    async def slot_apply(
        self, new: Any, me: int | None, imported: list[Event], batches: dict[str, int] | None = None
    ) -> dict[str, Any]:
        return await self._run(sharding.apply_map, self, new, me, imported, batches)

    async def slot_batches(self) -> dict[str, int]:
        return await self._run(sharding.last_batches, self)

    def rebuild_for_slots(self) -> None:
        """Rebuild the engine from the store under the slot map just taken (on the
        writer): the moved values' state goes to the map's owners."""
        try:
            self._rebuild("slots")
        except Exception as err:
            self._fail(err)
            raise

    async def advance(self, t: float) -> tuple[Clocks, int]:
        """Advance the clock; returns the clocks after it and the matches released."""
        return await self._run(self._advance, t)

    async def stats(self, wait: float = 1.0) -> dict[str, Any]:
        """Engine stats, fresh if the writer can compute them within ``wait`` seconds.

        Computed only when asked (``/v1/stats``, ``/metrics``), never after every
        operation: walking the network costs ~25 ms with a thousand queries, which at
        once a second was 0.6-1.2 µs an event of the writer's time with nobody reading
        it. Askers while a walk is queued share it."""
        if self.state == OK and self._stats_ops != self._ops and self._loop is not None:
            job = self._stats_job
            if job is None or job.done():
                job = self._stats_job = self._loop.run_in_executor(self._executor, self._refresh_stats)
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
        self._require_readable()
        return list(self._infos.values())

    def query(self, name: str) -> QueryInfo:
        self._require_readable()
        info = self._infos.get(name)
        if info is None:
            raise UnknownQueryError(f"no query named {name!r} is registered")
        return info

    async def _watch_store(self) -> None:
        """While the store cannot write, probe it now and then (on the writer thread)."""
        assert self._loop is not None
        while True:
            await asyncio.sleep(self._probe_every if self.state == UNWRITABLE else PROBE_FIRST)
            if self.state == UNWRITABLE:
                with contextlib.suppress(RuntimeError):  # the executor shut down
                    await self._loop.run_in_executor(self._executor, self._probe)

    async def _scrub_store(self) -> None:
        """Now and then, check every row's checksum on a thread of its own (a reader:
        the writer goes on): damage found is logged and reported on ``/readyz``
        (``Store.damage``). The store was checked whole at start (``store.check``)."""
        while True:
            await asyncio.sleep(self.scrub_every)
            if self.state in (OK, UNWRITABLE):
                started = time.perf_counter()
                try:
                    damage = await asyncio.to_thread(self.store.scrub)
                except StoreFault as fault:  # a read the store refused: the next scrub tries again
                    log.error("the periodic check of the store's checksums failed: %s", fault)
                    continue
                log.info(
                    "the store's checksums checked in %.2f s: %s",
                    time.perf_counter() - started,
                    f"{len(damage)} damaged rows" if damage else "all intact",
                )

    # --------------------------------------------------------- the writer thread

    def _require_ok(self) -> None:
        if self.state != OK:
            self._admit()

    def _require_readable(self) -> None:
        # Unwritable: the snapshots still say what the store holds.
        if self.state not in (OK, UNWRITABLE):
            raise UnavailableError(f"the engine is not ready ({self.state}: {self.status()})")

    def _check_names(self, entries: Sequence[tuple[str, Any]]) -> None:
        seen: set[str] = set()
        for index, (name, _) in enumerate(entries):
            if name in self._infos or name in seen:
                err = DuplicateQueryError(f"a query named {name!r} is already registered")
                raise err if len(entries) == 1 else InBulkError(err, index, name)
            seen.add(name)

    def _startup_job(self) -> None:
        try:
            started = time.perf_counter()
            self._rebuild("start")
            try:
                self._apply_lateness()
            except StoreFault as fault:
                self._store_failed(fault, stale=True)
            if self.state == OK:
                try:
                    # Ready only if the store takes writes: a read-only file opens and
                    # reads well, and would otherwise be found by the first write only.
                    self.store.probe()
                except StoreFault as fault:
                    self._store_failed(fault, stale=False)
                else:
                    self._keep_printed()
            log.info(
                "engine rebuilt from the store in %.2f s: %d queries, next seq %d",
                time.perf_counter() - started,
                len(self._infos),
                self.next_seq,
            )
        except Exception as err:  # a store we cannot replay: say so on /readyz
            self._fail(err)

    def _keep_printed(self) -> None:
        """Keep the texts the rebuild printed (the store had none of this build) for the
        next start. A cache: if the store refuses them, the next start prints them again."""
        printed, self._printed = self._printed, []
        if not printed:
            return
        try:
            self.store.keep_texts(printed, language_version())
        except StoreFault as fault:
            log.warning("the printed query texts were not kept (%s): the next start prints them again", fault)

    def _fail(self, err: BaseException) -> None:
        log.critical(
            "cannot rebuild the engine from the store %s (%s: %s); restart the server, which "
            "checks the store and says how to repair it",
            self.store.path,
            type(err).__name__,
            err,
            exc_info=not isinstance(err, StoreFault),
        )
        self.state = FAILED
        self.failure = f"{type(err).__name__}: {err}"
        self.metrics.up.set(0)

    def _rebuild(self, reason: str) -> None:
        """A fresh engine fed the op log in its original order; matches are discarded.
        A query registered again under the same text is compiled once. The log's head
        (its registrations before any batch) comes from the snapshot when one stands
        for it (service.server.snapshot), and a snapshot is written when none did."""
        self.state = STARTING
        self.metrics.up.set(0)
        self.metrics.rebuilds.labels(reason).inc()
        # The engine being replaced (frozen by the rebuild that made it, below) is
        # garbage once this one is in place: the collector may take its cycles again.
        collector.unfreeze()
        total = self.store.op_count()
        self.progress = (0, total)
        ops = self.store.ops()
        # The head only registers queries: everything it makes stays, and the collector
        # would walk it again and again (all of a snapshot's objects, the first time).
        with collector_paused():
            head, after = ops_head(ops, HEAD_KINDS)
            # A registration or deletion held for an event time ends the head a snapshot may stand for:
            # a snapshot holds an engine, not what waits in front of it.
            held = next(
                (i for i, op in enumerate(head) if op.kind in (REGISTER, UNREGISTER) and op.time is not None),
                None,
            )
            tail = head[held:] if held is not None else []
            head = head[:held] if held is not None else head
            engine, covered, digest = self._from_snapshot(head)
            keeper = PendingKeeper(engine or Engine(), 0.0, self.max_ahead, self.idle)
            engine = keeper.engine
            engine.owns = self.owns
            compiled: dict[tuple[str, bytes], CompiledQuery] = {}
            # A run of registrations goes in one Engine.register_many (the same ops as one
            # by one, with what depends on the whole set of queries made once per run).
            run: list[tuple[str, CompiledQuery]] = []
            done = 0
            # Each query registered for an event time: that time (installed or still held).
            ats: dict[str, float] = {}

            def replay(op: Op) -> None:
                nonlocal run, done
                done += 1
                if op.kind == REGISTER:
                    assert op.name is not None and op.body is not None
                    key = (op.name, op.body)
                    cq = compiled.get(key)
                    if cq is None:
                        with collector_paused():
                            cq = compiled[key] = Engine.compile(op.name, spec_query(orjson.loads(op.body)))
                    if op.time is None:
                        ats.pop(op.name, None)
                        run.append((op.name, cq))
                        if len(run) < 4096:
                            return
                    else:
                        ats[op.name] = op.time
                if run:
                    engine.register_many(run)
                    run = []
                if op.kind == REGISTER:
                    if op.time is not None:  # held for its event time, as it was live
                        assert op.name is not None and op.body is not None
                        keeper.hold(op.time, [(op.name, compiled[(op.name, op.body)])])
                elif op.kind == UNREGISTER:
                    assert op.name is not None
                    if op.time is not None:  # held for its event time, as it was live
                        keeper.hold_delete(op.time, op.name)
                    else:
                        keeper.drop_delete(op.name)
                        # A registration trimmed with a held delete that removed it leaves
                        # a later deletion of the name alone in the log: nothing to do.
                        if not keeper.drop(op.name) and op.name in engine.key_of:
                            engine.unregister(op.name)
                elif op.kind == BATCH:
                    assert op.body is not None
                    # At the clock logged with it (the slowest producer's then); a batch of
                    # an older build has none: the largest end, as it was.
                    keeper.process(events_of(op.body), clock=op.clock)
                elif op.kind == TIME:
                    assert op.time is not None
                    keeper.advance_time(op.time)
                elif op.kind == LATENESS:
                    assert op.time is not None
                    keeper.set_lateness(op.time)
                if done % 64 == 0:
                    self.progress = (done, total)

            for op in head[:covered]:
                done += 1
                if op.kind == LATENESS:  # no event yet: a lateness change touches no engine
                    assert op.time is not None
                    keeper.set_lateness(op.time)
            for op in head[covered:]:
                digest.add(op.pos, op.kind, op.name, op.body, op.time)
                replay(op)
            if run:
                engine.register_many(run)
                run = []
            if covered < len(head) and self.snapshots:
                self._write_snapshot(engine, digest)
            del head
            # The queries' millions of objects stay as long as the engine: moved out of the
            # collector's generations, so that it does not walk them all again (the first
            # full collections after reading the snapshot of 100,000 queries took 9 and 17 s,
            # one of them while serving). Only a frozen object's cycles are never collected
            # (those of a query unregistered later): at most what the head held, once; the
            # next rebuild unfreezes them.
            collector.freeze()
        # The retained window: its events make short-lived objects among the kernel's
        # tables and the stored instances, which full collections would walk again and again.
        with full_collections_held():
            for op in tail:
                replay(op)
            if after is not None:
                replay(after)
                for op in ops:
                    replay(op)
            if run:
                engine.register_many(run)
            meta = self.store.meta()
            next_seq = meta.next_seq
            # The advance that set a clock may have been trimmed with old batches.
            keeper.catch_up(meta.observed, meta.clock)
            keeper.producers = self.store.producers()
            infos: dict[str, QueryInfo] = {}
            # (Not engine.queries(): the listing's order is the store's, not a sort of 100,000 nodes.)
            registered = {name: qs.cq for _, net in engine.networks() for name, qs in net.queries.items()}
            # Canonical texts kept at registration (by this build's printer): printing
            # every query again was a tenth of a rebuild.
            version = language_version()
            texts = self.store.query_texts(version)
            printed: list[tuple[int, str]] = []
            keeper.installed()  # the list below says which are installed
            # Removed by a held delete: the store forgot them with the op that did, unless
            # a slot move's replay reached the time sooner than the live stream did.
            gone = set(keeper.deleted())
            deleting = keeper.deleting()
            forget: list[str] = []
            waiting = {name: cq for group in keeper.waiting for name, cq in group.queries}
            # A listing entry per query, all kept: the collector paused meanwhile (its
            # collections walked the replay's and the kernel's objects again and again, half a
            # second of a start at 100,000 queries). Then what the rebuild made, all alive, is
            # moved out of the collector's generations as the head was (above): the first full
            # collection after it would walk all of it (a third of a second at 100,000 queries),
            # and so would every one after it while serving. A cycle among these objects that
            # later becomes garbage (none is made on purpose; replaying a window of the demo
            # made none) is freed by the next rebuild: at most what this one made, once.
            ordered: dict[frozenset[str], tuple[str, ...]] = {}
            with collector_paused():
                for name, pos, matches, last_match in self.store.query_counts():
                    cq = registered.get(name) or waiting.get(name)
                    if cq is None and name in gone:
                        forget.append(name)
                        continue
                    if cq is None:
                        raise RuntimeError(f"query {name!r} is in the store but its registration is not in the log")
                    text = texts.get(pos)
                    if text is None:
                        text = canonical_text(cq)
                        printed.append((pos, text))
                    info = QueryInfo.of(name, cq, text, ordered)
                    info.matches, info.last_match = matches, last_match
                    info.at, info.pending = ats.get(name), name in waiting
                    info.deleting_at = deleting.get(name)
                    infos[name] = info
                collector.freeze()
        if forget:
            self.store.forget_queries(forget)
        self._printed = printed
        self.keeper = keeper
        self._infos = infos
        self.next_seq = next_seq
        self._stale = False
        self._ops += 1
        self._refresh_stats()
        self.state = OK
        self.failure = None
        self.fault = None
        self.metrics.up.set(1)

    @property
    def snapshot_path(self) -> Path:
        return self.store.path.with_name(SNAPSHOT_FILE)

    def _from_snapshot(self, head: list[Op]) -> tuple[Engine | None, int, HeadDigest]:
        """The engine of the snapshot, how many ops of ``head`` it stands for and their
        digest; or ``(None, 0, an empty digest)``, logging why, when none does."""
        digest = HeadDigest()
        if not self.snapshots or not any(op.kind == REGISTER for op in head):
            return None, 0, digest
        path = self.snapshot_path
        began = time.perf_counter()
        try:
            header, start = snapshot.read_header(path)
            why = header.stands_for(snapshot.code_version(), self.engine.network.kernel.name, self.shard)
            if why is not None:
                raise snapshot.Stale(why)
            if header.ops > len(head):
                raise snapshot.Stale(
                    f"it stands for {header.ops} ops, the log's head has {len(head)} (some were trimmed)"
                )
            for op in head[: header.ops]:
                digest.add(op.pos, op.kind, op.name, op.body, op.time)
            if digest.last_pos != header.last_pos or digest.hexdigest() != header.digest:
                raise snapshot.Stale(
                    "the log's first ops are not the ones it stands for (changed or trimmed since)"
                )
            engine = snapshot.read(path, header, start, None)
        except snapshot.Stale as stale:
            level = logging.INFO if not path.exists() else logging.WARNING
            log.log(
                level, "the snapshot %s is not used (%s): every stored query is compiled again", path, stale
            )
            return None, 0, HeadDigest()
        log.info(
            "the snapshot %s read in %.2f s: %d queries, for %d of the %d ops before the first batch",
            path,
            time.perf_counter() - began,
            header.queries,
            header.ops,
            len(head),
        )
        return engine, header.ops, digest

    def _write_snapshot(self, engine: Engine, digest: HeadDigest) -> None:
        """Write the snapshot of ``engine`` (no event has reached it). A cache: if it
        cannot be written, the next start compiles every query again, and says so."""
        if not engine.key_of:
            self.snapshot_path.unlink(missing_ok=True)
            return
        began = time.perf_counter()
        try:
            header = snapshot.write(self.snapshot_path, engine, digest, self.shard)
        except Exception as err:  # noqa: BLE001 - a cache: the engine is unharmed
            log.warning(
                "the snapshot %s was not written (%s: %s)", self.snapshot_path, type(err).__name__, err
            )
            return
        log.info(
            "the snapshot %s written in %.2f s: %d queries, %.1f MB",
            self.snapshot_path,
            time.perf_counter() - began,
            header.queries,
            header.size / 1e6,
        )

    def _recover(self, err: BaseException) -> UnavailableError:
        """The engine may be ahead of the store after a bug: rebuild it from the store."""
        log.error("operation failed after touching the engine (%s); rebuilding from the store", err)
        try:
            self._rebuild("error")
        except StoreFault as fault:
            self._store_failed(fault, stale=True)
        except Exception as again:
            self._fail(again)
        return UnavailableError(f"the operation failed and was not applied: {type(err).__name__}: {err}")

    def _store_failed(self, fault: StoreFault, stale: bool) -> UnavailableError:
        """The store refused a write: stop writing until it writes again (see the
        module docstring). ``stale``: the engine holds what the store lost."""
        self.metrics.store_faults.labels(fault.kind).inc()
        self._stale = self._stale or stale
        if not fault.passes:
            self._fail(fault)
            return UnavailableError(f"not applied: {fault}")
        if self.state != UNWRITABLE:
            log.error("%s; refusing writes until it writes again (probing every %.0f s)", fault, PROBE_FIRST)
            # Failing again soon after resuming: back off, so such a disk cannot make
            # the engine rebuild every second.
            recent = time.monotonic() - self._resumed_at < 2 * PROBE_MAX
            self._probe_every = min(PROBE_MAX, self._probe_every * 2) if recent else PROBE_FIRST
        self.state = UNWRITABLE
        self.fault = fault
        self.metrics.up.set(0)
        return UnavailableError(f"not applied: {fault}", retry_after=math.ceil(self._probe_every))

    def _probe(self) -> None:
        """Resume if the store writes again: rebuild once if the engine ran ahead."""
        if self.state != UNWRITABLE:
            return
        try:
            # On a new connection: one opened while the file was read-only stays so.
            self.store.probe(reopen=True)
        except StoreFault as fault:
            if fault.kind != getattr(self.fault, "kind", None):
                log.error("%s", fault)
            self.fault = fault
            if not fault.passes:
                self._fail(fault)
            return
        started = time.perf_counter()
        try:
            if self._stale:
                self._rebuild("store")
            else:
                self.state, self.fault = OK, None
                self.metrics.up.set(1)
        except StoreFault as fault:
            self._store_failed(fault, stale=True)
            return
        except Exception as err:
            self._fail(err)
            return
        self._resumed_at = time.monotonic()
        log.warning(
            "the store %s writes again: serving resumed (engine rebuilt in %.2f s)",
            self.store.path,
            time.perf_counter() - started,
        )

    def _unfenced(self, what: str) -> None:
        """Refuse a change of the queries while a slot move is under way: the keys in
        use decide which events a move exports, and a registration landing on some shards
        before the move and on others after would not be at one point of the stream."""
        if self.slots.fenced:
            raise ConflictError(
                f"a slot move is under way on this shard: {what} again once it ends (a move takes seconds)",
                field="fence",
            )

    def _install(self, prepared: list[Prepared]) -> list[QueryInfo]:
        self._require_ok()
        self._unfenced("register")
        engine = self.engine
        self._check_names([(p.name, p) for p in prepared])  # taken while compiling?
        for p in prepared:
            _not_waiting(p.cq, self._infos)
            _not_deleting(p.cq, self._infos)
        done: list[tuple[Prepared, CompiledQuery]] = []
        try:
            if len(prepared) > 1:
                # One pass for the whole batch (the engine's tables are made once, not
                # once per query), all or nothing.
                try:
                    got = engine.register_many([(p.name, p.cq) for p in prepared])
                except BatchQueryError as err:
                    raise InBulkError(err.inner, err.index, err.name) from None
                done = list(zip(prepared, got, strict=True))
            else:
                done.append((prepared[0], engine.register(prepared[0].name, prepared[0].cq)))
        except ScemonError:
            self._undo(done)  # all or nothing
            raise
        except Exception as err:  # a bug in the engine: do not trust its state
            raise self._recover(err) from err
        try:
            self.store.commit_register(
                [(p.name, p.spec) for p in prepared], [p.text for p in prepared], language_version()
            )
        except StoreFault as fault:
            # Registration can be undone exactly, so the engine stays in step with the
            # store and needs no rebuild when it writes again.
            self._undo(done)
            raise self._store_failed(fault, stale=False) from None
        except Exception as err:
            raise self._recover(err) from err
        infos = dict(self._infos)
        out = []
        for p, cq in done:
            infos[p.name] = QueryInfo.of(p.name, cq, p.text)
            out.append(infos[p.name])
        self._infos = infos
        self._after_op()
        return out

    def _hold(self, prepared: list[Prepared], at: float) -> list[QueryInfo]:
        """Log queries to be installed where the released stream reaches ``at``, and
        hold them (service.server.pending). Refused (409) when the released clock is at
        ``at`` or past it: the point is gone on this stream."""
        self._require_ok()
        self._unfenced("register")
        self._check_names([(p.name, p) for p in prepared])
        clock = self.keeper.released
        if clock >= at:
            raise ConflictError(
                f"the stream is past event time {at:g} here (its released clock is {clock:g}): "
                "register at a later time",
                field="at",
            )
        infos = dict(self._infos)
        together = {p.name: p for p in prepared}
        for p in prepared:
            check_depends(
                p.cq,
                lambda n: (
                    together[n].cq.depends if n in together else infos[n].depends if n in infos else None
                ),
            )
            _not_waiting(p.cq, {n: i for n, i in infos.items() if n not in together})
            _not_deleting(p.cq, infos)
            _check_keys(p.cq, {**infos, **{q.name: QueryInfo.of(q.name, q.cq, q.text) for q in prepared}})
        try:
            self.store.commit_register(
                [(p.name, p.spec) for p in prepared], [p.text for p in prepared], language_version(), at=at
            )
        except StoreFault as fault:
            raise self._store_failed(fault, stale=False) from None
        self.keeper.hold(at, [(p.name, p.cq) for p in prepared])
        out = []
        for p in prepared:
            info = QueryInfo.of(p.name, p.cq, p.text)
            info.at, info.pending = at, True
            infos[p.name] = info
            out.append(info)
        self._infos = infos
        self._after_op()
        return out

    def _undo(self, done: list[tuple[Prepared, CompiledQuery]]) -> None:
        for p, _ in reversed(done):
            self.engine.unregister(p.name)

    def _unregister(self, name: str) -> None:
        self._require_ok()
        if name not in self._infos:
            raise UnknownQueryError(f"no query named {name!r} is registered")
        if not self._infos[name].pending:  # one still waiting never ran: it may go
            self._unfenced("delete it")
        # A query read through @name would otherwise read, from then on, whatever query
        # is registered under that name next: refuse, naming the readers.
        readers = [other for other, info in self._infos.items() if name in info.depends]
        if readers:
            listed = ", ".join(repr(r) for r in readers)
            raise ConflictError(
                f"query {name!r} is read as @{name} by {listed}: delete "
                f"{'that query' if len(readers) == 1 else 'those queries'} first",
                query=name,
                dependents=readers,
            )
        try:
            if not self._infos[name].pending:
                self.engine.unregister(name)
            elif not self.keeper.drop(name):
                raise RuntimeError(f"query {name!r} is listed as waiting but is not held")
            self.keeper.drop_delete(name)  # deleting at once overtakes a held delete
            self.store.commit_unregister(name)
        except StoreFault as fault:
            raise self._store_failed(fault, stale=True) from None
        except Exception as err:
            raise self._recover(err) from err
        infos = dict(self._infos)
        del infos[name]
        self._infos = infos
        self._after_op()

    def _hold_delete(self, name: str, at: float) -> QueryInfo:
        """Log a query's deletion where the released stream reaches ``at``, and hold it
        (service.server.pending): the query matches every released event with
        ``end < at`` and none after. Refused (409) when the released clock is at ``at``
        or past it, when a delete is held already, or while a query reads it as
        ``@name`` and is not itself deleted by then."""
        self._require_ok()
        info = self._infos.get(name)
        if info is None:
            raise UnknownQueryError(f"no query named {name!r} is registered")
        self._unfenced("delete it")
        clock = self.keeper.released
        if clock >= at:
            raise ConflictError(
                f"the stream is past event time {at:g} here (its released clock is {clock:g}): "
                "delete at a later time",
                field="at",
            )
        if info.deleting_at is not None:
            raise ConflictError(
                f"query {name!r} is already being deleted at event time {info.deleting_at:g}: "
                "cancel that delete first",
                field="deleting_at",
                query=name,
            )
        readers = [
            other
            for other, reader in self._infos.items()
            if name in reader.depends and (reader.deleting_at is None or reader.deleting_at > at)
        ]
        if readers:
            listed = ", ".join(repr(r) for r in readers)
            raise ConflictError(
                f"query {name!r} is read as @{name} by {listed}: delete "
                f"{'that query' if len(readers) == 1 else 'those queries'} first, or at a time "
                f"up to {at:g}",
                query=name,
                dependents=readers,
            )
        try:
            self.store.commit_unregister(name, at=at)
        except StoreFault as fault:
            raise self._store_failed(fault, stale=False) from None
        self.keeper.hold_delete(at, name)
        held = replace(info, deleting_at=at)
        self._infos = {**self._infos, name: held}
        self._after_op()
        return held

    def _keep(self, name: str) -> QueryInfo:
        """Cancel a query's held delete: it is taken out of the log, having changed
        nothing yet. Refused (409) when none is held, or when the query reads a query
        whose own delete was accepted because this one was held."""
        self._require_ok()
        info = self._infos.get(name)
        if info is None:
            raise UnknownQueryError(f"no query named {name!r} is registered")
        if info.deleting_at is None:
            raise ConflictError(f"query {name!r} is not being deleted: no delete to cancel", query=name)
        self._unfenced("cancel its delete")
        going = sorted(d for d in info.depends if d in self._infos and self._infos[d].deleting_at is not None)
        if going:
            listed = ", ".join(repr(d) for d in going)
            raise ConflictError(
                f"query {name!r} reads {listed}, also being deleted: cancel "
                f"{'that delete' if len(going) == 1 else 'those deletes'} first",
                query=name,
            )
        try:
            if not self.store.cancel_unregister(name):
                raise RuntimeError(f"the held delete of {name!r} is not in the log")
        except StoreFault as fault:
            raise self._store_failed(fault, stale=False) from None
        except Exception as err:
            raise self._recover(err) from err
        self.keeper.drop_delete(name)
        kept = replace(info, deleting_at=None)
        self._infos = {**self._infos, name: kept}
        self._after_op()
        return kept

    def _ingest(
        self,
        producer: str,
        batch_id: str,
        events: list[Event],
        arrow: bytes | None = None,
        ordered: bool = False,
        epoch: int | None = None,
    ) -> BatchOutcome:
        self._require_ok()
        if self.slots.fenced:
            raise UnavailableError("a slot move is under way: send the batch again shortly", retry_after=1)
        if self.slots.retired:
            slot_map = self.slots.map
            assert slot_map is not None
            raise ConflictError(
                f"this shard owns no slot: slot map {slot_map.epoch} left it out (its shards: "
                f"{', '.join(slot_map.shards) or 'unnamed'}); read the map (GET /v1/cluster/routing) and send "
                "the batch to them",
                field="epoch",
            )
        if epoch == ONLY_SHARD:
            slot_map = self.slots.map
            if slot_map is not None and slot_map.count > 1:
                raise ConflictError(
                    f"the batch was routed as if this were the only shard, but this shard has slot map "
                    f"{self.slots.epoch} of {slot_map.count} shards: read the map (GET /v1/cluster/routing) "
                    "and route the batch by it",
                    field="epoch",
                )
        elif epoch is not None and epoch != self.slots.epoch:
            raise ConflictError(
                f"the batch was routed by slot map {epoch} but this shard has map {self.slots.epoch}: "
                "read the map again (GET /v1/cluster/routing) and route the batch by it",
                field="epoch",
            )
        try:
            if self.store.is_applied(producer, batch_id):
                self.metrics.duplicates.inc()
                return BatchOutcome(0, True, 0, _late_from_log(self.store.late_of(producer, batch_id)))
        except StoreFault as fault:
            raise self._store_failed(fault, stale=False) from None
        keeper = self.keeper
        now = self._wall()
        try:
            # A batch in (end, start) order ends with its latest event.
            keeper.check_ahead(events, now, latest=events[-1].end if ordered and events else None)
        except AheadError as err:
            self.counts["refused_ahead"] += len(err.indexes)
            self.metrics.refused_ahead.inc(len(err.indexes))
            raise InvalidInputError(
                str(err), index=err.index, field=err.field, indexes=list(err.indexes)
            ) from None
        posted = events
        if not ordered:
            posted = list(events)
            events.sort(key=arrival_key)  # stable: equal (end, start) keep their posted order
        held = keeper.held_after(events, producer, now)
        # Only a batch that adds to a full buffer is refused: one that releases (a slow
        # producer catching up) goes through, so a producer far ahead cannot lock the
        # others out by filling the buffer.
        if held > self.buffer_max and held > keeper.held:
            self.counts["buffer_full"] += 1
            self.metrics.buffer_full.inc()
            raise BufferFullError(
                f"the batch would leave {held} events held in the reorder buffer, over its cap of "
                f"{self.buffer_max} (--buffer-max); nothing was applied: send it again once time has moved on"
            )
        try:
            began = time.thread_time()
            matches, late = self._process(events, producer, now)
            self.metrics.engine_seconds.inc(time.thread_time() - began)
            matches, capped = self._cap(matches, "the batch")
            block, counts = self._number(matches)
            late_rows = _late_rows(late, posted)
            log_body = events_body(events) if arrow is None else arrow_log(batch_id, arrow)
            max_end = events[-1].end if events else -math.inf  # sorted by end
            found = len(block) if block is not None else 0
            next_seq = self.next_seq + found
            self.store.commit_batch(
                producer,
                batch_id,
                log_body,
                len(events),
                max_end,
                block,
                counts,
                next_seq,
                self._clocks(),
                orjson.dumps(late_rows) if late_rows else None,
                keeper.reorder.observed,
                orjson.dumps(keeper.producers),
                keeper.deleted(peek=True),
            )
        except StoreFault as fault:
            raise self._store_failed(fault, stale=True) from None
        except Exception as err:
            raise self._recover(err) from err
        self._committed(next_seq, counts, block)
        self.metrics.events.inc(len(events))
        self.metrics.batches.inc()
        if late_rows:
            self.counts["late_events"] += len(late_rows)
            self.metrics.late.inc(len(late_rows))
        self._batches_since_trim += 1
        if self._batches_since_trim >= self.trim_every:
            try:
                self._trim()
            except StoreFault as fault:  # the batch is committed: answer it
                self._store_failed(fault, stale=False)
        self._after_op()
        return BatchOutcome(len(events), False, found, late_rows, capped)

    def _process(self, events: list[Event], producer: str, now: float) -> tuple[list[Match], Late]:
        """``keeper.process`` in slices of SLICE events: the compiled loop holds the
        interpreter lock while it runs, so a large batch in one call would stop the event
        loop (every HTTP and WebSocket client) for as long. The same events reach the
        engine in the same order however a sorted batch is cut (the reorder buffer
        releases in ``(end, start)`` order, and later slices hold no smaller keys), so the
        matches and the late events are the same. A rebuild takes the batch at once at the
        clock logged after it: as each slice's clock is at most the next's and the batch
        is sorted, that releases the same events in the same order."""
        if len(events) <= SLICE:
            return self.keeper.process(events, producer, now)
        matches: list[Match] = []
        late = Late()
        for at in range(0, len(events), SLICE):
            found, behind = self.keeper.process(events[at : at + SLICE], producer, now)
            matches += found
            late.extend(behind)
        return matches, late

    def _advance(self, t: float) -> tuple[Clocks, int]:
        self._require_ok()
        try:
            self.keeper.check_time(t, self._wall())
        except AheadError as err:
            self.counts["refused_ahead"] += 1
            self.metrics.refused_ahead.inc()
            raise InvalidInputError(str(err), field="time") from None
        try:
            began = time.thread_time()
            matches = self.keeper.advance_time(t)
            self.metrics.engine_seconds.inc(time.thread_time() - began)
            matches, _ = self._cap(matches, "the time advance")
            block, counts = self._number(matches)
            found = len(block) if block is not None else 0
            next_seq = self.next_seq + found
            self.store.commit_time(
                t, block, counts, next_seq, self._clocks(), forget=self.keeper.deleted(peek=True)
            )
        except StoreFault as fault:
            raise self._store_failed(fault, stale=True) from None
        except Exception as err:
            raise self._recover(err) from err
        self._committed(next_seq, counts, block)
        self._after_op()
        return self._clocks(), found

    def _apply_lateness(self) -> None:
        """Make the allowed lateness the configured one: a change is an op of the log
        (the buffer's history depends on it), and a smaller lateness releases events."""
        if self.keeper.lateness == self.lateness:
            return
        before = self.keeper.lateness
        matches = self.keeper.set_lateness(self.lateness)
        block, counts = self._number(matches)
        found = len(block) if block is not None else 0
        next_seq = self.next_seq + found
        self.store.commit_time(
            self.lateness,
            block,
            counts,
            next_seq,
            self._clocks(),
            kind=LATENESS,
            forget=self.keeper.deleted(peek=True),
        )
        self._committed(next_seq, counts, block)
        self._after_op()
        log.info("allowed lateness %g s (was %g s); %d matches released", self.lateness, before, found)

    def _cap(self, matches: list[Match], what: str) -> tuple[list[Match], int]:
        """At most ``match_cap`` matches of each query completed by one event (its
        ``trigger``), the first the engine emitted; the rest are dropped, counted per
        query (``scemon_matches_capped_total``, the batch's answer) and logged.

        Why: ``SEQ(A, B, C, D) MODE ALL`` over 80 events of each class completes 512,000
        matches at the last D; every one would be stored and sent to every subscriber.
        The engine has made them by then: the cap bounds the store and the subscribers,
        not the engine's work. Deterministic (the engine's order), so what is stored
        does not depend on timing."""
        cap = self.match_cap
        if not cap or len(matches) <= cap:
            return matches, 0
        per_trigger: Counter[tuple[str, int]] = Counter()
        kept: list[Match] = []
        dropped: Counter[str] = Counter()
        for m in matches:
            key = (m.query, m.trigger)
            per_trigger[key] += 1
            if per_trigger[key] <= cap:
                kept.append(m)
            else:
                dropped[m.query] += 1
        if not dropped:
            return matches, 0
        total = sum(dropped.values())
        self.counts["matches_capped"] += total
        for name, n in dropped.items():
            self.metrics.matches_capped.labels(name).inc(n)
        worst = max(per_trigger.values())
        log.warning(
            "%s completed up to %d matches of one query with one event; kept %d per event "
            "(--max-matches-per-event) and dropped %d (%s)",
            what,
            worst,
            cap,
            total,
            ", ".join(f"{name}: {n}" for name, n in dropped.most_common(5)),
        )
        return kept, total

    def _clocks(self) -> Clocks:
        return Clocks(self.keeper.released, self.keeper.observed)

    def _number(self, matches: list[Match]) -> tuple[Block | None, dict[str, tuple[int, float]]]:
        """Give matches the service's ``seq`` and their wire form, as one block (None
        when there are none) that the store logs and the hub fans out as it is."""
        if not matches:
            return None, {}
        # One text for the whole block, written natively when the kernel is compiled:
        # a dict and a ``dumps`` per match would cost 2-3 µs each, more than the rest
        # of writing the match rows.
        text, starts = self._write_block(matches, self.next_seq, _dumps)
        queries = [m.query for m in matches]
        last: dict[str, float] = {}
        for m in matches:
            last[m.query] = m.end
        counts = {query: (n, last[query]) for query, n in Counter(queries).items()}
        return Block(self.next_seq, queries, text, starts), counts

    def _committed(self, next_seq: int, counts: dict[str, tuple[int, float]], block: Block | None) -> None:
        self.next_seq = next_seq
        if counts:
            self.rates.add({name: n for name, (n, _) in counts.items()})
        children = self._match_counters
        for name, (n, last) in counts.items():
            info = self._infos.get(name)
            if info is not None:
                info.matches += n
                info.last_match = last
            child = children.get(name)
            if child is None:  # labels() costs microseconds: once per query, not per batch
                child = children[name] = self.metrics.matches.labels(name)
            child.inc(n)
        if block is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._publish, [block])

    def _after_op(self) -> None:
        self._ops += 1
        installed = self.keeper.installed()
        if installed:
            # Queries held for an event time the stream has now reached.
            infos = dict(self._infos)
            for name in installed:
                if name in infos:
                    infos[name] = replace(infos[name], pending=False)
            self._infos = infos
            log.info("installed at their event time: %s", ", ".join(installed))
        deleted = self.keeper.deleted()
        if deleted:
            # Queries whose held delete the stream has now reached (the store forgot
            # them with the op that did).
            self._infos = {name: info for name, info in self._infos.items() if name not in deleted}
            log.info("deleted at their event time: %s", ", ".join(deleted))

    def _refresh_stats(self) -> None:
        keeper = self.keeper
        stats = self.engine.stats(per_query=False)  # the store keeps each query's count
        stats.pop("matches", None)  # the engine's own count restarts with every rebuild
        stats["next_seq"] = self.next_seq
        # The engine's own "clock" is the released one; the event time beside it.
        stats["time"] = {
            "clock": keeper.observed,
            "released_clock": keeper.released,
            "lateness": keeper.lateness,
            "max_ahead": keeper.max_ahead,
            "held": keeper.held,
            "held_max": self.buffer_max,
            "producer_idle": keeper.idle,
            "producers": {name: mark for name, (mark, _) in keeper.producers.items()},
        }
        self._stats = stats
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
        since = self.engine.consuming_since()
        if since is not None:
            # What a query used up depends on every op since its registration
            # (docs/semantics.md §12): replay must see them all.
            horizon = min(horizon, since - 2.0 * retain - 1.0)
        if math.isfinite(horizon):
            self.store.trim(horizon, keep, self.match_log_max, self.next_seq)


def _not_waiting(cq: CompiledQuery, infos: dict[str, QueryInfo]) -> None:
    """A query reads ``@name`` only once that query is installed, not while it waits for
    its event time (409)."""
    for dep in sorted(cq.depends):
        info = infos.get(dep)
        if info is not None and info.pending:
            raise ConflictError(
                f"@{dep} waits for event time {info.at:g}: a query reads it once it is installed", query=dep
            )


def _not_deleting(cq: CompiledQuery, infos: dict[str, QueryInfo]) -> None:
    """A query cannot read ``@name`` of a query whose delete is held (409): it would
    read nothing from that time on."""
    for dep in sorted(cq.depends):
        info = infos.get(dep)
        if info is not None and info.deleting_at is not None:
            raise ConflictError(
                f"query {dep!r} is being deleted at event time {info.deleting_at:g}: "
                f"a query cannot read @{dep}",
                query=dep,
            )


def _check_keys(cq: CompiledQuery, infos: dict[str, QueryInfo]) -> None:
    """A query reads @name only from a query of the same partition key."""
    for dep in sorted(cq.depends):
        if dep in infos and infos[dep].partition != cq.partition:
            raise SemanticError(
                f"@{dep} is partitioned by {describe_key(infos[dep].partition)} but this query by "
                f"{describe_key(cq.partition)}: a query reads @name only from a query with the same key"
            )


def _late_rows(late: Late, posted: list[Event]) -> list[LateRow]:
    """The late events as ``(index in the batch as posted, id, seconds)``, in batch order.
    Late events are always of the batch at hand: an event held in the buffer is never
    late when it is released (its end is at or above the watermark)."""
    if not late:
        return []
    where = {id(e): i for i, e in enumerate(posted)}
    rows: list[LateRow] = []
    for event, by in late:
        assert event.id is not None  # ingest names every event
        rows.append((where[id(event)], event.id, by))
    rows.sort()
    return rows


def _late_from_log(body: bytes | None) -> list[LateRow]:
    return [] if body is None else [(int(i), eid, float(by)) for i, eid, by in orjson.loads(body)]
