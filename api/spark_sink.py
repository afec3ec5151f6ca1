"""The Spark job's sink: a micro-batch of events → Arrow → ``POST /v1/events`` on its shard.

Exactly once, end to end, rests on three things here:

* every post carries ``(producer, batch_id)`` where ``batch_id`` is Spark's own batch id
  (plus a chunk number), which Spark keeps in its checkpoint: a batch that Spark re-runs
  after a crash is posted again under the same ids, and the service answers
  ``duplicate: true`` and changes nothing;
* what goes into each post is a function of the batch's rows only — sorted by time,
  routed by a stable hash of ``src``, cut into chunks of a fixed size — so the re-run
  sends each shard the same chunks under the same ids;
* a post is retried with exponential backoff on connection errors, timeouts, 429 and
  5xx (safe, since the service de-duplicates), until the retry budget is spent; then
  :class:`SinkError` stops the job, which leaves the batch uncommitted in the checkpoint
  so that the next start sends it again. Nothing is skipped.

Events the service refuses (422: an event it cannot take, such as one far ahead of its
clock) are left out and the rest posted under the same id; events it reports late are
applied all the same. Both come back in the :class:`BatchReport` with the row they came
from and a reason, for the job's dead-letter folder. A re-sent batch is told its late
events again, so a re-run writes the same dead letters.

Routing: every match is within one value of its query's partition key, so each value
belongs to one shard — ``crc32(utf-8 text of the value) mod number of shards`` (an
integer's text is its decimal form; see :func:`value_text`) — and shards never need
each other. An event goes to the shard of its ``src`` and, for each other key in use
whose queries read its class (:class:`api.models.ClusterRouting`, asked of the shards
before each batch), to the shard of its value of that key; a shard evaluates a key's
queries only on the values it owns (``SCEMON_SHARD``), so each match comes from one
shard. PARTITION BY NONE has one value, whose text is empty: shard 0.

Sources and ids travel as text in the job; a value that is an integer literal is sent as
an integer. An Arrow column has one type, so a batch in which some value is not an
integer literal sends the whole column as text.

This module is the only one in ``api/`` that touches Spark, and only through the
DataFrame handed to :meth:`ServiceSink.__call__`; everything else works on pyarrow tables,
so it is tested without a JVM.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from api.client import ApiError, Client
from api.models import BatchResult, LateEvent
from api.routing import ONLY_SHARD, SlotMap, owner_of, shard_of
from ecq.partitions import FIELDS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "ARROW_STREAM",
    "EVENT_COLUMNS",
    "BatchReport",
    "PreparedBatch",
    "RetryPolicy",
    "ServiceSink",
    "SinkError",
    "encode_events",
    "shard_of",
    "sort_events",
    "split_by_keys",
    "split_by_shard",
    "wait_until_ready",
]

ARROW_STREAM = "application/vnd.apache.arrow.stream"
# What a post carries, in this order; the service's Arrow contract.
EVENT_COLUMNS = ("src", "type", "start", "end", "prob", "id", "attrs")
# Seconds a batch being prepared while another posts waits for the shards' routing
# answer before the last route stands in (ServiceSink._route_for_prepare).
ROUTE_WAIT = 1.0
_INT_LITERAL = r"^[+-]?[0-9]+$"
_T = TypeVar("_T")


class SinkError(Exception):
    """A batch could not be delivered: the service stayed unreachable or failing for the
    whole retry budget, or refused the batch as a whole (413). The job stops; its
    checkpoint still holds the batch."""


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: ``first`` seconds, doubling up to ``longest``, with jitter,
    until ``budget`` seconds have gone by since the first attempt."""

    budget: float = 60.0
    first: float = 0.25
    longest: float = 8.0
    timeout: float = 300.0  # one request: a big batch over thousands of queries takes a while


@dataclass
class BatchReport:
    """What one Spark micro-batch did, for progress bars and logs."""

    batch_id: int
    events: int = 0
    posts: int = 0
    duplicates: int = 0
    matches: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)
    late: list[dict[str, Any]] = field(default_factory=list)
    # Sorting, routing, encoding and posting (the sink's part).
    seconds: float = 0.0
    # Before the sink: Spark running the batch's tasks and handing its rows to the driver
    # (set by the job that collected them; 0 when the table came from elsewhere).
    collect_seconds: float = 0.0


@dataclass(frozen=True)
class PreparedBatch:
    """A micro-batch sorted and routed, not yet posted (:meth:`ServiceSink.prepare`)."""

    events: int
    shards: list[pa.Table]  # one per service, in the order of ``urls``
    seconds: float  # spent preparing
    # The shards it was routed to (the slot map's, else the sink's), the map's epoch on
    # each (None: the shard holds no map), and the sorted batch (routed again if the map
    # changed before any shard took it).
    urls: list[str] = field(default_factory=list)
    epochs: list[int | None] = field(default_factory=list)
    table: pa.Table | None = None
    # The shards hold a slot map: every share is posted, an empty one too.
    mapped: bool = False


@dataclass(frozen=True)
class Route:
    """What a batch is routed by: the shards (in map order), the slot map (None: the
    default map of that many shards), each shard's epoch, and the keys in use."""

    urls: list[str]
    slots: SlotMap | None
    epochs: list[int | None]
    keys: list[tuple[tuple[str, ...], frozenset[str]]]


class _Stale(Exception):
    """A shard holds another slot map than the batch was routed by (409)."""


# ------------------------------------------------------------------------------ arrow


def split_by_keys(
    table: pa.Table, shards: int | SlotMap, keys: Sequence[tuple[Sequence[str], frozenset[str]]]
) -> list[pa.Table]:
    """The rows of each shard, order kept, when partition keys other than ``src`` are in
    use (``keys``: each with the classes its queries read): a row goes to its source's
    shard and to the owner of its value of each key whose classes hold its type (a row
    without one of the key's attributes is not seen by that key). ``shards``: the slot
    map, or a shard count for its default map. O(rows × keys)."""
    count = shards.count if isinstance(shards, SlotMap) else shards
    if count <= 1 or table.num_rows == 0 or not keys:
        return split_by_shard(table, shards)
    names = table.column_names
    src = _wire_ids(table.column("src")).to_pylist()
    types = table.column("type").to_pylist()
    texts = table.column("attrs").to_pylist() if "attrs" in names else [None] * table.num_rows
    # A key's name the attributes lack is read from the event's own fields, as the engine does.
    fields = {name: table.column(name).to_pylist() for name in FIELDS if name in names and name != "src"}
    fields["src"] = src
    takes = [bytearray(table.num_rows) for _ in range(count)]
    for row, kind in enumerate(types):
        takes[shard_of(src[row], shards)][row] = 1
        attrs: dict[str, Any] | None = None
        for key, classes in keys:
            if kind not in classes:
                continue
            if attrs is None:
                text = texts[row]
                attrs = orjson.loads(text) if text else {}
            values = []
            for name in key:
                if name in attrs:
                    values.append(attrs[name])
                elif name in fields:
                    values.append(fields[name][row])
                else:
                    break
            else:
                takes[owner_of(key, values[0] if len(key) == 1 else values, shards)][row] = 1
    return [
        table.filter(pa.array(take, pa.uint8()).cast(pa.bool_())) if any(take) else table.slice(0, 0)
        for take in takes
    ]


def sort_events(table: pa.Table, tie_break: Sequence[str] = ()) -> pa.Table:
    """Rows by ``(end, start, *tie_break)``: each source's events in time order, which is
    the order the service applies them in. Arrow's sort is stable. O(n log n)."""
    keys = [(name, "ascending") for name in ("end", "start", *tie_break) if name in table.column_names]
    return table.take(pc.sort_indices(table, sort_keys=keys)) if table.num_rows > 1 else table


def split_by_shard(table: pa.Table, shards: int | SlotMap) -> list[pa.Table]:
    """The rows of each shard (by the slot map, or the default map of a shard count),
    order kept. Hashes each distinct source once."""
    count = shards.count if isinstance(shards, SlotMap) else shards
    if count <= 1 or table.num_rows == 0:
        return [table] + [table.slice(0, 0)] * (count - 1)
    src = _wire_ids(table.column("src"))
    distinct = pc.unique(src)
    owner = pa.array([shard_of(value, shards) for value in distinct.to_pylist()], pa.int32())
    row_owner = pc.take(owner, pc.index_in(src, value_set=distinct))
    return [table.filter(pc.equal(row_owner, k)) for k in range(count)]


def encode_events(table: pa.Table) -> bytes:
    """One post's body: an Arrow IPC stream with :data:`EVENT_COLUMNS` (those present),
    ``src`` and ``id`` as int64 when every value is an integer literal."""
    columns, names = [], []
    for name in EVENT_COLUMNS:
        if name not in table.column_names:
            continue
        column = table.column(name)
        columns.append(_wire_ids(column) if name in ("src", "id") else column)
        names.append(name)
    out = pa.Table.from_arrays(columns, names=names).combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, out.schema) as writer:
        writer.write_table(out)
    return bytes(sink.getvalue().to_pybytes())


def _wire_ids(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    if not pa.types.is_string(column.type) and not pa.types.is_large_string(column.type):
        return column
    values = column.drop_null()
    if len(values) and pc.all(pc.match_substring_regex(values, _INT_LITERAL)).as_py():
        try:
            return pc.cast(pc.replace_substring_regex(column, r"^\+", ""), pa.int64())  # Arrow refuses "+4"
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return column  # an integer literal beyond 64 bits: text, like replay does
    return column


def name_events(table: pa.Table, batch_id: int) -> pa.Table:
    """``table`` with every event named: an event without an ``id`` gets
    ``"<batch_id>:<row>"``, its row in the micro-batch (``_row``). Named here, before
    the post, rather than by each shard (which would name it by its place in the share
    it was posted), so that an event copied to several shards (its source's and a
    key's owner) has one name on all of them: a slot move that brings both copies to
    one shard then splices it once, and its matches name it as one service would."""
    names = table.column_names
    if "_row" not in names or not table.num_rows:
        return table
    if "id" in names and not table.column("id").null_count:
        return table
    generated = pa.array([f"{batch_id}:{row}" for row in table.column("_row").to_pylist()], pa.string())
    if "id" not in names:
        return table.append_column("id", generated)
    given = table.column("id")
    if not pa.types.is_string(given.type):
        given = pc.cast(given, pa.string())
    return table.set_column(names.index("id"), "id", pc.coalesce(given, generated))


def _refused(err: ApiError, rows: int) -> list[int]:
    """The rows of a chunk a 422 refused (``indexes``, else ``index``); [] when the
    answer names none, or is not a 422."""
    if err.status != 422:
        return []
    named = err.detail.get("indexes")
    if not isinstance(named, list):
        index = err.detail.get("index")
        named = [index] if isinstance(index, int) else []
    out = sorted({i for i in named if isinstance(i, int) and 0 <= i < rows})
    return out if len(out) == len(named) else []


def _late_rows(posted: pa.Table, late: Sequence[LateEvent]) -> list[dict[str, Any]]:
    """The rows of the late events a post's answer lists, with the reason. An event is
    found by its index in the post, checked against its id: a re-sent batch that the
    service had taken without some refused events is told indexes into what it took."""
    rows = posted.column("_row").to_pylist()
    ids = [str(v) for v in posted.column("id").to_pylist()] if "id" in posted.column_names else None
    where = None
    out = []
    for x in late:
        at: int | None = x.index if x.index < len(rows) else None
        if ids is not None and (at is None or ids[at] != str(x.id)):
            where = where if where is not None else {v: i for i, v in enumerate(ids)}
            at = where.get(str(x.id))
        if at is not None:
            out.append({"row": rows[at], "reason": f"late by {x.by:g} s"})
    return out


# ------------------------------------------------------------------------------- http


def wait_until_ready(urls: Sequence[str], policy: RetryPolicy, token: str | None = None) -> None:
    """Block until every service answers ``GET /readyz`` with 200; :class:`SinkError`
    naming the first that does not within the retry budget. Called before the job starts,
    so a service that is down fails the command at once with a clear message."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    for url in urls:
        try:
            _retrying(partial(_ready, url.rstrip("/"), headers), url, policy, "is not ready")
        except ApiError as err:
            raise SinkError(f"{url}: GET /readyz answered {err.status}; is it a scemon service?") from None


def _ready(url: str, headers: dict[str, str]) -> None:
    response = httpx.get(f"{url}/readyz", headers=headers, timeout=5.0)
    if response.status_code != 200:
        raise ApiError(response.status_code, {"message": response.text[:200]})


def _retrying(send: Callable[[], _T], url: str, policy: RetryPolicy, what: str) -> _T:
    """``send()`` until it answers, retrying what may pass: connection errors, timeouts,
    429 and 5xx. Any other :class:`ApiError` is the caller's to handle."""
    started = time.monotonic()
    wait, attempts = policy.first, 0
    while True:
        attempts += 1
        try:
            return send()
        except ApiError as err:
            if err.status < 500 and err.status != 429:
                raise
            problem = f"HTTP {err.status} {err.message[:200]}"
        except httpx.TransportError as err:
            problem = f"{type(err).__name__}: {err or 'no answer'}"
        spent = time.monotonic() - started
        if spent + wait > policy.budget:
            raise SinkError(f"{url} {what}: gave up after {attempts} attempts in {spent:.0f}s ({problem})")
        time.sleep(wait * random.uniform(0.8, 1.2))
        wait = min(wait * 2, policy.longest)


class ServiceSink:
    """Posts micro-batches of events to one or more service shards.

    Usable directly as a ``foreachBatch`` function over a DataFrame of event columns
    (:data:`EVENT_COLUMNS`; ``src`` and ``id`` text or integers), or through
    :meth:`post_table` by a job that has the batch as Arrow already.
    ``max_events`` cuts a shard's share of a batch into posts of at most that many events:
    keep it the same across restarts, since it decides the chunks' ids.
    """

    def __init__(
        self,
        urls: Sequence[str],
        producer: str,
        policy: RetryPolicy | None = None,
        max_events: int = 50_000,
        token: str | None = None,
        on_batch: Callable[[BatchReport], None] | None = None,
    ) -> None:
        if not urls:
            raise ValueError("at least one service URL is needed")
        self.urls = [url.rstrip("/") for url in urls]
        self.producer = producer
        self.policy = policy or RetryPolicy()
        self.max_events = max_events
        self.on_batch = on_batch
        self._token = token
        self._clients = {url: Client(url, token=token, timeout=self.policy.timeout) for url in self.urls}
        self._pool = ThreadPoolExecutor(max_workers=max(8, len(self.urls)), thread_name_prefix="scemon-sink")
        # The job's overlap (service.pipeline.pending) prepares a batch while the one
        # before it posts: the routing ask then goes through its own thread, and the
        # last route stands in when the shards do not answer it soon (:meth:`prepare`).
        self._router = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scemon-route")
        self._closed = False
        self._routing: Future[Route] | None = None
        self._last_route: Route | None = None

    def _client(self, url: str) -> Client:
        client = self._clients.get(url)
        if client is None and self._closed:
            # The router's thread may still be at work after close(): a client made now
            # would never be closed (its connections left to the collector).
            raise RuntimeError("the sink is closed")
        if client is None:  # a shard the slot map named since
            client = self._clients[url] = Client(url, token=self._token, timeout=self.policy.timeout)
        return client

    def close(self) -> None:
        """Release the HTTP connections and threads."""
        self._closed = True
        self._pool.shutdown(wait=True)
        self._router.shutdown(wait=False, cancel_futures=True)
        for client in list(self._clients.values()):
            client.close()

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """The ``foreachBatch`` entry point."""
        self.post_table(df.toArrow(), batch_id)

    def post_table(self, table: pa.Table, batch_id: int, tie_break: Sequence[str] = ()) -> BatchReport:
        """Sort, route, encode and post one micro-batch; return what happened. Events the
        service rejects (422) are left out of the post and listed in the report's
        ``rejected``, events it took late in ``late`` (``"late by 12.5 s"``), each with
        the row it came from (a column ``_row`` of ``table`` if it has one, else the row
        number), so the caller can dead-letter them."""
        return self.post_prepared(self.prepare(table, tie_break), batch_id)

    def prepare(self, table: pa.Table, tie_break: Sequence[str] = ()) -> PreparedBatch:
        """The first half of :meth:`post_table`: sort the batch and route it to its
        shards (a job overlaps it with the previous batch's post). It first asks the
        shards what to route by (:meth:`route`): the slot map, and the partition keys
        in use."""
        started = time.monotonic()
        if "_row" not in table.column_names:
            table = table.append_column("_row", pa.array(range(table.num_rows), pa.int64()))
        table = sort_events(table, tie_break)
        if not table.num_rows:
            return PreparedBatch(0, [table] * len(self.urls), time.monotonic() - started, list(self.urls))
        route = self._route_for_prepare()
        shards = split_by_keys(table, route.slots or len(route.urls), route.keys)
        return PreparedBatch(
            table.num_rows,
            shards,
            time.monotonic() - started,
            route.urls,
            route.epochs,
            table,
            route.slots is not None,
        )

    def routing_keys(self) -> list[tuple[tuple[str, ...], frozenset[str]]]:
        """The partition keys other than ``src`` the shards' queries use (:meth:`route`)."""
        return self.route().keys

    def route(self) -> Route:
        """What to route by, asked of every shard (``GET /v1/cluster/routing``, retried
        as a post is): the slot map they hold — whose shard list, once a move named it,
        replaces the sink's own, so shards added by a move are found — and the partition
        keys other than ``src`` their queries use, each with the classes read under it.
        Shards holding maps of different epochs are in the middle of a move: asked again
        until they agree (within the retry budget). When keys other than ``src`` are in
        use, every shard must know its place (``K/N`` matching its place in the list):
        otherwise two shards could both give a value's matches, and :class:`SinkError`
        stops the job instead."""
        urls = list(self.urls)
        started = time.monotonic()
        while True:
            # Not on the posting pool: a job prepares a batch while the previous one posts.
            answers = [_retrying(self._client(url).routing, url, self.policy, "routing") for url in urls]
            placed = [a for a in answers if a.slots is not None]
            slots: SlotMap | None = None
            if placed:
                if len({a.epoch for a in placed}) > 1:
                    if time.monotonic() - started > self.policy.budget:
                        raise SinkError(
                            "the shards hold slot maps of different epochs "
                            f"({', '.join(f'{u}: {a.epoch}' for u, a in zip(urls, answers, strict=True))}) "
                            "for longer than the retry budget: a move broke off"
                        )
                    time.sleep(self.policy.first)
                    continue
                body = placed[0].slots
                assert body is not None
                slots = SlotMap.from_json(body.model_dump())
                if slots.shards and list(slots.shards) != urls:
                    urls = list(slots.shards)  # a move named the shards: ask those
                    continue
                if not slots.shards:
                    if slots.count != len(urls):
                        raise SinkError(
                            f"the shards were told a cluster of {slots.count} (SCEMON_SHARD) but the job "
                            f"posts to {len(urls)}: give every shard's URL, in their order"
                        )
                    slots = SlotMap(slots.epoch, slots.owners, tuple(urls))
            break
        n = len(urls)
        classes: dict[tuple[str, ...], set[str]] = {}
        for answer in answers:
            for entry in answer.keys:
                classes.setdefault(tuple(entry.key), set()).update(entry.classes)
        if classes and n > 1:
            for k, (url, answer) in enumerate(zip(urls, answers, strict=True)):
                if answer.shard != f"{k}/{n}":
                    told = f"SCEMON_SHARD={answer.shard}" if answer.shard else "no SCEMON_SHARD"
                    raise SinkError(
                        f"{url} is shard {k} of {n} in the job's list but was told {told}: queries "
                        "partitioned by a key other than src need each shard to know its place"
                    )
        self.urls = urls
        # Every shard's epoch goes with its posts, 0 for one told of no map: a move
        # that gives it one then refuses what was routed before.
        epochs: list[int | None] = [a.epoch for a in answers]
        keys = [(key, frozenset(names)) for key, names in sorted(classes.items())]
        return Route(urls, slots, epochs, keys)

    def _route_for_prepare(self) -> Route:
        """:meth:`route`, asked in its own thread: the job's overlap prepares a batch
        while the one before it posts, and shards busy with that post (or stopped) must
        not hold up the preparing. When they do not answer within ``ROUTE_WAIT`` seconds
        the last route is used — safe: a slot map changed since makes the shards refuse
        the batch (409) and it is routed again; partition keys registered meanwhile
        reach the job at a later batch, as a registration does anyway — or, before any
        answer, a job of one shard routes everything to it marked ``ONLY_SHARD`` (a shard
        holding a slot map of several refuses that: no event goes where it is not
        owned). A job of several shards waits for its first answer."""
        if self._routing is None:
            self._routing = self._router.submit(self.route)
        try:
            route = self._routing.result(timeout=ROUTE_WAIT)
        except FutureTimeout:
            if self._last_route is not None:
                return self._last_route
            if len(self.urls) == 1:
                return Route(list(self.urls), None, [ONLY_SHARD], [])
            route = self._routing.result()
        self._routing = None
        self._last_route = route
        return route

    def post_prepared(self, prepared: PreparedBatch, batch_id: int) -> BatchReport:
        """The second half of :meth:`post_table`: post each shard's share and report.
        A shard holding another slot map than the batch was routed by (a move came in
        between) has it routed again by the new map, when no shard took any of it yet;
        when some did, :class:`SinkError` stops the job (docs/architecture.md)."""
        started = time.monotonic()
        if not prepared.urls and len(prepared.shards) != len(self.urls):
            # A batch kept from before a restart (service.pipeline.pending), routed to the
            # shards a slot map named then: they are the map's, in its order.
            self.route()
            if len(prepared.shards) != len(self.urls):
                raise SinkError(
                    f"batch {batch_id} was routed to {len(prepared.shards)} shards but the cluster has "
                    f"{len(self.urls)} now: give the job the shards it had, in their order"
                )
        for _ in range(5):
            urls = prepared.urls or self.urls
            epochs = prepared.epochs or [None] * len(urls)
            # In a cluster with a slot map every shard gets its share, an empty one too,
            # so that every shard has every batch id: a slot move waits for a batch
            # boundary by comparing them.
            jobs = [
                self._pool.submit(self._post_shard, self._client(url), part, batch_id, epoch)
                for url, part, epoch in zip(urls, prepared.shards, epochs, strict=True)
                if part.num_rows or prepared.mapped
            ]
            results = []
            stale: list[str] = []
            for job in jobs:
                try:
                    results.append(job.result())
                except _Stale as err:
                    stale.append(str(err))
            if not stale:
                break
            if results or prepared.table is None:
                raise SinkError(
                    f"the slot map changed while batch {batch_id} was half delivered ({stale[0]}): stop the "
                    "stream before moving slots, or move them while no batch is being posted"
                )
            prepared = self.prepare(prepared.table)
        else:
            raise SinkError(f"batch {batch_id}: the slot map kept changing while it was posted")
        report = BatchReport(batch_id=batch_id, events=prepared.events)
        for posts, duplicates, matches, rejected, late in results:
            report.posts += posts
            report.duplicates += duplicates
            report.matches += matches
            report.rejected.extend(rejected)
            report.late.extend(late)
        report.events -= len(report.rejected)
        report.seconds = prepared.seconds + time.monotonic() - started
        if self.on_batch is not None:
            self.on_batch(report)
        return report

    def _post_shard(
        self, client: Client, part: pa.Table, batch_id: int, epoch: int | None = None
    ) -> tuple[int, int, int, list[dict[str, Any]], list[dict[str, Any]]]:
        posts = duplicates = matches = 0
        rejected: list[dict[str, Any]] = []
        late: list[dict[str, Any]] = []
        part = name_events(part, batch_id)
        if not part.num_rows:  # an empty share, posted for its id alone (not counted)
            self._post_chunk(client, part, f"{batch_id}.0", rejected, epoch, empty=True)
            return posts, duplicates, matches, rejected, late
        for k, begin in enumerate(range(0, part.num_rows, self.max_events)):
            chunk = part.slice(begin, self.max_events)
            result, posted = self._post_chunk(client, chunk, f"{batch_id}.{k}", rejected, epoch)
            posts += 1
            duplicates += result.duplicate
            matches += result.matches
            late += _late_rows(posted, result.late_events)
        return posts, duplicates, matches, rejected, late

    def _post_chunk(
        self,
        client: Client,
        chunk: pa.Table,
        batch_key: str,
        rejected: list[dict[str, Any]],
        epoch: int | None = None,
        empty: bool = False,
    ) -> tuple[BatchResult, pa.Table]:
        """Post one chunk, leaving out the events the service refuses; the answer and
        the rows it took. ``empty``: post it even with no events (for its id)."""
        url = client.base_url
        while True:
            if chunk.num_rows == 0 and not empty:
                return BatchResult(accepted=0, duplicate=False, matches=0), chunk
            # Every late event listed (not only the first few): each is dead-lettered.
            send = partial(
                client.post_arrow,
                self.producer,
                batch_key,
                encode_events(chunk),
                late_events=chunk.num_rows,
                epoch=epoch,
            )
            try:
                return _retrying(send, url, self.policy, f"did not take batch {batch_key}"), chunk
            except ApiError as err:
                if err.status == 409 and err.detail.get("field") == "epoch":
                    raise _Stale(f"{url}: {err.message}") from None
                refused = _refused(err, chunk.num_rows)
                if refused:
                    # The 422 changed nothing; drop the refused events (one, or every one
                    # the service named) and post the rest under the same id. A re-run
                    # meets the same refusal, so the id keeps naming the same events.
                    field_name = err.detail.get("field")
                    where = f"field {field_name!r}: " if field_name else ""
                    reason = f"rejected by the service: {where}{err.message}"
                    rows = chunk.column("_row")
                    rejected += [{"row": rows[i].as_py(), "reason": reason} for i in refused]
                    keep = pc.invert(pc.is_in(pa.array(range(chunk.num_rows), pa.int64()), pa.array(refused)))
                    chunk = chunk.filter(keep)
                    continue
                if err.status == 413:
                    raise SinkError(
                        f"{url} refused batch {batch_key} of {chunk.num_rows} events as too large (413): "
                        "lower --max-batch-events"
                    ) from None
                raise SinkError(f"{url} refused batch {batch_key}: HTTP {err.status} {err.message}") from None
