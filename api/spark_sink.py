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

Routing: all matches are within one source, so each source belongs to one shard —
``crc32(utf-8 text of src) mod number of shards`` (an integer source's text is its
decimal form) — and shards never need each other.

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
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import httpx
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "ARROW_STREAM",
    "EVENT_COLUMNS",
    "BatchReport",
    "PostResult",
    "RejectedEvent",
    "RetryPolicy",
    "ServiceSink",
    "SinkError",
    "encode_events",
    "shard_of",
    "sort_events",
    "split_by_shard",
    "wait_until_ready",
]

ARROW_STREAM = "application/vnd.apache.arrow.stream"
# What a post carries, in this order; the service's Arrow contract.
EVENT_COLUMNS = ("src", "type", "start", "end", "prob", "id", "attrs")
_INT_LITERAL = r"^[+-]?[0-9]+$"


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


@dataclass(frozen=True)
class RejectedEvent:
    """An event the service answered 422 for (it names the event's index in the post)."""

    row: int
    reason: str


@dataclass
class PostResult:
    """The service's answer to one post."""

    accepted: int = 0
    matches: int = 0
    duplicate: bool = False


@dataclass
class BatchReport:
    """What one Spark micro-batch did, for progress bars and logs."""

    batch_id: int
    events: int = 0
    posts: int = 0
    duplicates: int = 0
    matches: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


# ------------------------------------------------------------------------------ arrow


def shard_of(src: str | int, shards: int) -> int:
    """The shard a source belongs to: stable across processes, restarts and machines
    (unlike ``hash()``), and cheap. O(len(src))."""
    return zlib.crc32(str(src).encode()) % shards if shards > 1 else 0


def sort_events(table: pa.Table, tie_break: Sequence[str] = ()) -> pa.Table:
    """Rows by ``(end, start, *tie_break)``: each source's events in time order, which is
    the order the service applies them in. Arrow's sort is stable. O(n log n)."""
    keys = [(name, "ascending") for name in ("end", "start", *tie_break) if name in table.column_names]
    return table.take(pc.sort_indices(table, sort_keys=keys)) if table.num_rows > 1 else table


def split_by_shard(table: pa.Table, shards: int) -> list[pa.Table]:
    """The rows of each shard, order kept. Hashes each distinct source once."""
    if shards <= 1 or table.num_rows == 0:
        return [table] + [table.slice(0, 0)] * (shards - 1)
    src = _wire_ids(table.column("src"))
    distinct = pc.unique(src)
    owner = pa.array([shard_of(value, shards) for value in distinct.to_pylist()], pa.int32())
    row_owner = pc.take(owner, pc.index_in(src, value_set=distinct))
    return [table.filter(pc.equal(row_owner, k)) for k in range(shards)]


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
            return pc.cast(column, pa.int64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return column  # an integer literal beyond 64 bits: text, like replay does
    return column


# ------------------------------------------------------------------------------- http


def wait_until_ready(urls: Sequence[str], policy: RetryPolicy, client: httpx.Client | None = None) -> None:
    """Block until every service answers ``GET /healthz``; :class:`SinkError` naming the
    first that does not within the retry budget. Called before the job starts, so a
    service that is down fails the command at once with a clear message."""
    own = client is None
    client = client or httpx.Client(timeout=5.0)
    try:
        for url in urls:
            _retrying(partial(client.get, f"{url}/healthz"), url, policy, "is not ready")
    finally:
        if own:
            client.close()


def _retrying(send: Callable[[], httpx.Response], url: str, policy: RetryPolicy, what: str) -> httpx.Response:
    started = time.monotonic()
    wait, attempts = policy.first, 0
    while True:
        attempts += 1
        try:
            response = send()
            if response.status_code < 500 and response.status_code != 429:
                return response
            problem = f"HTTP {response.status_code} {response.text[:200]}"
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
        headers: dict[str, str] | None = None,
        on_batch: Callable[[BatchReport], None] | None = None,
    ) -> None:
        if not urls:
            raise ValueError("at least one service URL is needed")
        self.urls = [url.rstrip("/") for url in urls]
        self.producer = producer
        self.policy = policy or RetryPolicy()
        self.max_events = max_events
        self.on_batch = on_batch
        self._client = httpx.Client(timeout=self.policy.timeout, headers=headers or {})
        self._pool = ThreadPoolExecutor(max_workers=len(self.urls), thread_name_prefix="scemon-sink")

    def close(self) -> None:
        """Release the HTTP connections and threads."""
        self._pool.shutdown(wait=True)
        self._client.close()

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """The ``foreachBatch`` entry point."""
        self.post_table(df.toArrow(), batch_id)

    def post_table(self, table: pa.Table, batch_id: int, tie_break: Sequence[str] = ()) -> BatchReport:
        """Sort, route, encode and post one micro-batch; return what happened. Events the
        service rejects (422) are left out of the post and listed in the report's
        ``rejected`` with the row they came from (a column ``_row`` of ``table`` if it has
        one, else the row number), so the caller can dead-letter them."""
        started = time.monotonic()
        if "_row" not in table.column_names:
            table = table.append_column("_row", pa.array(range(table.num_rows), pa.int64()))
        shards = split_by_shard(sort_events(table, tie_break), len(self.urls))
        jobs = [
            self._pool.submit(self._post_shard, url, part, batch_id)
            for url, part in zip(self.urls, shards, strict=True)
            if part.num_rows
        ]
        report = BatchReport(batch_id=batch_id, events=table.num_rows)
        for job in jobs:
            posts, duplicates, matches, rejected = job.result()
            report.posts += posts
            report.duplicates += duplicates
            report.matches += matches
            report.rejected.extend(rejected)
        report.events -= len(report.rejected)
        report.seconds = time.monotonic() - started
        if self.on_batch is not None:
            self.on_batch(report)
        return report

    def _post_shard(
        self, url: str, part: pa.Table, batch_id: int
    ) -> tuple[int, int, int, list[dict[str, Any]]]:
        posts = duplicates = matches = 0
        rejected: list[dict[str, Any]] = []
        for k, begin in enumerate(range(0, part.num_rows, self.max_events)):
            chunk = part.slice(begin, self.max_events)
            result = self._post_chunk(url, chunk, f"{batch_id}.{k}", rejected)
            posts += 1
            duplicates += result.duplicate
            matches += result.matches
        return posts, duplicates, matches, rejected

    def _post_chunk(
        self, url: str, chunk: pa.Table, batch_key: str, rejected: list[dict[str, Any]]
    ) -> PostResult:
        headers = {
            "Content-Type": ARROW_STREAM,
            "X-Scemon-Producer": self.producer,
            "X-Scemon-Batch-Id": batch_key,
        }
        while True:
            if chunk.num_rows == 0:
                return PostResult()
            body = encode_events(chunk)
            response = _retrying(
                partial(self._client.post, f"{url}/v1/events", content=body, headers=headers),
                url,
                self.policy,
                f"did not take batch {batch_key}",
            )
            if response.status_code == 200:
                data = response.json()
                return PostResult(
                    int(data.get("accepted", 0)), int(data.get("matches", 0)), bool(data.get("duplicate"))
                )
            if response.status_code == 422:
                bad = _rejected_index(response)
                if bad is not None and 0 <= bad.row < chunk.num_rows:
                    # The 422 changed nothing; drop the one event and post the rest under
                    # the same id. A re-run meets the same rejection, so the id keeps
                    # naming the same events.
                    rejected.append({"row": chunk.column("_row")[bad.row].as_py(), "reason": bad.reason})
                    keep = pc.not_equal(pa.array(range(chunk.num_rows), pa.int64()), bad.row)
                    chunk = chunk.filter(keep)
                    continue
            if response.status_code == 413:
                raise SinkError(
                    f"{url} refused batch {batch_key} of {chunk.num_rows} events as too large (413): "
                    "lower --max-batch-events"
                )
            raise SinkError(
                f"{url} refused batch {batch_key}: HTTP {response.status_code} {response.text[:300]}"
            )


def _rejected_index(response: httpx.Response) -> RejectedEvent | None:
    """The event a 422 names: ``{"detail": {"index": i, "field": f, "message": m}}`` (or a
    list of such, or FastAPI's ``loc`` form ``["body", "events", i, field]``)."""
    try:
        detail = response.json().get("detail")
    except ValueError:
        return None
    for item in detail if isinstance(detail, list) else [detail]:
        if not isinstance(item, dict):
            continue
        index = item.get("index")
        loc = item.get("loc")
        if index is None and isinstance(loc, list):
            index = next((part for part in loc if isinstance(part, int)), None)
        if isinstance(index, int):
            field_name = item.get("field") or (loc[-1] if isinstance(loc, list) and loc else None)
            message = item.get("message") or item.get("msg") or "rejected"
            where = f"field {field_name!r}: " if field_name else ""
            return RejectedEvent(index, f"rejected by the service: {where}{message}")
    return None
