"""The Spark Structured Streaming job: files (or a synthetic rate) → events → service shards.

    source folder ──binaryFile──► parse + validate (Python tasks, service.pipeline.rows)
        │                              │ bad rows ─► dead-letter folder, counted
        ▼ foreachBatch(df, batch id)   ▼ good rows
    sort by time, route by crc32(key value) mod shards, Arrow ─► POST /v1/events on each shard
        refused events (422) and late ones ─► dead-letter folder, with the reason

Event time: each micro-batch is sorted by ``(end, start)`` before it is cut into posts,
so disorder between the files of one micro-batch never reaches the service. Disorder
*across* micro-batches (a file that arrives after later ones, two sources whose files
overlap) is the service's to absorb: its reorder buffer holds events for its allowed
lateness (``scemon serve --lateness``) and releases them in time order, across posts,
micro-batches and producers. ``scemon stream --lateness L`` says how much disorder the
job's input has: the job checks at start that every shard holds events at least that
long. An event later than the service's lateness is still applied, and written to the
dead-letter folder with the reason (``late by 12.5 s``); one too far ahead of the clock
is refused by the service and dead-lettered, and the rest of its batch posted.

Spark's file source records in its checkpoint which files make up each micro-batch,
and Spark's batch id comes back with them when a crashed job restarts: the sink posts
every batch under ``(producer, batch id)``, so the service applies it once however often
Spark runs it. The producer name is Spark's query id, also kept in the checkpoint, so a
restart is the same producer and a fresh checkpoint a new one.

Micro-batches are sized by events (``batch_events``, 100,000 by default: Spark's file
source reads about that many events' bytes per trigger), and batch N is posted by a
thread of the driver while Spark commits N and prepares N+1 — lists the files, writes
its offset log, runs the parsing tasks, collects the rows — and the job sorts and routes
them; N+1 is posted when N's answers are in, so the services see the batches in order.
Since Spark's commit of N no longer means N was delivered, the job keeps N in the
checkpoint until its answers are in (:mod:`service.pipeline.pending`), and a restart
posts what is kept there before the query starts. With a checkpoint on another
filesystem (``hdfs:``, ``s3a:``), or ``overlap=False``, each batch is posted before
Spark commits it.

Whole files go to the parser (one file is one unit of work) because the event ids the
job derives for id-less rows, ``<file name>:<line>``, need each row's place in its file.
Keep files small enough for one task (tens of MB), and write them elsewhere and move
them into the folder when complete: Spark skips names that start with ``.`` or ``_``.

pyspark is imported only by this module (and the sink), so the rest of ``scemon`` works
without the ``spark`` extra.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from api.spark_sink import BatchReport, PreparedBatch, ServiceSink, SinkError
from ecq.errors import ScemonError
from service.pipeline.checks import check_job
from service.pipeline.dead_letters import DeadLetters
from service.pipeline.options import JobError, JobOptions, local_path
from service.pipeline.pending import PendingBatches
from service.pipeline.rows import unpack
from service.pipeline.sources import event_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = ["JobProgress", "Pipeline"]


@dataclass
class JobProgress:
    """Running totals over the job's batches (read by progress bars; written by the job)."""

    batches: int = 0
    events: int = 0
    bad_rows: int = 0
    posts: int = 0
    duplicates: int = 0
    matches: int = 0
    late: int = 0
    last: BatchReport | None = None


class Pipeline:
    """One run of the job: check the options, start the stream, deliver each batch.

    ``on_batch`` is called on the driver after each delivered batch with the running
    totals (the demo's progress bar). :meth:`run` blocks until the stream ends (``once``)
    or is stopped, and raises :class:`JobError` for anything that stopped it early.
    """

    def __init__(
        self, spark: SparkSession, options: JobOptions, on_batch: Callable[[JobProgress], None] | None = None
    ) -> None:
        self.spark = spark
        self.options = options
        self.progress = JobProgress()
        self.on_batch = on_batch
        self._failure: BaseException | None = None
        self._producer_ready = threading.Event()
        self._query: StreamingQuery | None = None
        self._sink = ServiceSink(
            options.services,
            producer=options.producer or "",
            policy=options.retry,
            max_events=options.max_batch_events,
            token=options.token,
        )
        checkpoint = local_path(options.checkpoint)
        self._pending = PendingBatches(Path(checkpoint)) if options.overlap and checkpoint else None
        # One thread posts, so batches reach the services in Spark's order.
        self._poster = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scemon-post")
        self._posting: Future[None] | None = None
        # The batches a killed run had left undelivered, posted again at start.
        self.redelivered: list[int] = []

    # -------------------------------------------------------------------- lifecycle

    def start(self) -> StreamingQuery:
        """Start the streaming query (after :func:`check_job`)."""
        opts = self.options
        writer = (
            event_rows(self.spark, opts)
            .writeStream.foreachBatch(self._deliver)
            .option("checkpointLocation", opts.checkpoint)
        )
        writer = (
            writer.trigger(availableNow=True)
            if opts.once
            else writer.trigger(processingTime=f"{opts.trigger_seconds} seconds")
        )
        query = writer.start()
        if not opts.producer:
            # Spark's query id is kept in the checkpoint: the same across restarts of
            # this job, new for a new checkpoint (whose batch ids start again at 0).
            self._sink.producer = f"scemon-stream-{query.id}"
        self._query = query
        try:
            self._redeliver()
        except BaseException as err:
            self._failure = err
            self._producer_ready.set()  # a batch Spark started fails at once
            query.stop()
            raise
        self._producer_ready.set()
        return query

    def run(self) -> JobProgress:
        """:func:`check_job`, :meth:`start`, then wait for the end.

        Ctrl-C stops the stream and then raises KeyboardInterrupt; the checkpoint resumes
        it. The signal only sets a flag that the wait loop reads: a KeyboardInterrupt
        raised inside a py4j call would break the JVM connection the stop needs."""
        check_job(self.options)
        try:
            query = self.start()
        except Exception as err:
            self._close()
            raise self._job_error(err) from None
        interrupted = threading.Event()
        previous = _catch_sigint(interrupted)
        try:
            while not query.awaitTermination(1):
                if interrupted.is_set():
                    query.stop()
                    raise KeyboardInterrupt
                if self._failure is not None:  # a post failed after its batch's commit
                    query.stop()
            self._wait_posted()
        except Exception as err:  # StreamingQueryException, or py4j's on shutdown
            raise self._job_error(err) from None
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
            self._close()
        if self._failure is not None:
            raise self._job_error(self._failure)
        return self.progress

    def spark_progress(self) -> list[dict[str, Any]]:
        """Spark's own progress reports of the latest micro-batches, oldest first (as many
        as ``spark.sql.streaming.numRecentProgressUpdates``, 100 by default): per batch
        its rows and ``durationMs`` per phase (``addBatch`` is the foreachBatch
        delivery, the rest is Spark's own: listing files, planning, the offset log).
        Where a micro-batch's time goes, for ``scemon stream --progress-log``."""
        if self._query is None:
            return []
        return [orjson.loads(report.json) for report in self._query.recentProgress]

    def stop(self) -> None:
        """Stop the stream (from another thread), let the post in flight finish, and
        release the sink; safe to call twice."""
        if self._query is not None and self._query.isActive:
            self._query.stop()
        self._close()

    def _close(self) -> None:
        self._poster.shutdown(wait=True)
        self._sink.close()

    def _job_error(self, err: BaseException) -> JobError:
        cause = self._failure or err
        if isinstance(cause, (SinkError, ScemonError)):
            return JobError(str(cause))
        text = str(cause).strip().splitlines()
        return JobError(f"the stream stopped: {text[0] if text else type(cause).__name__}")

    # ----------------------------------------------------------------------- delivery

    def _deliver(self, df: DataFrame, batch_id: int) -> None:
        """The ``foreachBatch`` function: dead letters, then the events, then progress.
        An exception here stops the query and leaves the batch to be re-run on restart.

        With ``overlap`` it collects and prepares this batch while the previous one is
        still posting, waits for that post, hands this one to the poster thread and
        returns: Spark commits it and prepares the next while it posts."""
        try:
            self._producer_ready.wait()
            if self._failure is not None:
                raise self._failure
            began = time.monotonic()
            table = unpack(df.toArrow())
            collected = time.monotonic() - began
            bad = table.filter(pc.is_valid(table.column("error")))
            good = table.filter(pc.is_null(table.column("error")))
            dead = DeadLetters(self.options.dead_letter)
            dead.write(batch_id, bad)
            prepared = self._sink.prepare(
                good.append_column("_row", pa.array(range(good.num_rows), pa.int64())),
                tie_break=("path", "index"),
            )
            if self._pending is not None:
                self._pending.write(batch_id, prepared)
            self._wait_posted()
            post = _Post(batch_id, good, prepared, dead, bad.num_rows, collected)
            if self._pending is None:
                self._post(post)
            else:
                self._posting = self._poster.submit(self._post, post)
        except BaseException as err:
            self._failure = self._failure or err
            raise

    def _redeliver(self) -> None:
        """Post the batches a killed run handed to its poster and did not see answered,
        oldest first, before Spark runs anything: the services see batches in order, and
        apply each once (a batch they had taken comes back "duplicate")."""
        if self._pending is None:
            return
        dead = DeadLetters(self.options.dead_letter)
        for batch_id, prepared in self._pending.pending():
            if len(prepared.shards) != len(self._sink.urls):
                raise JobError(
                    f"the checkpoint holds batch {batch_id} routed to {len(prepared.shards)} services, not yet "
                    f"delivered: restart with the same --service list ({len(self._sink.urls)} given)"
                )
            good = self._pending.rows(prepared)
            self._post(_Post(batch_id, good, prepared, dead, 0, 0.0))
            self.redelivered.append(batch_id)

    def _wait_posted(self) -> None:
        """Wait for the batch in flight; raise what stopped it."""
        if self._posting is not None:
            posting, self._posting = self._posting, None
            posting.result()
        if self._failure is not None:
            raise self._failure

    def _post(self, post: _Post) -> None:
        """Post one prepared batch, dead-letter what the services refused or took late,
        drop its pending copy, count it."""
        try:
            report = self._sink.post_prepared(post.prepared, post.batch_id)
            report.collect_seconds = post.collect_seconds
            if report.rejected:
                post.dead.write_rejected(post.batch_id, post.good, report.rejected)
            if report.late:
                post.dead.write_late(post.batch_id, post.good, report.late)
            if self._pending is not None:
                self._pending.done(post.batch_id)
        except BaseException as err:
            self._failure = self._failure or err
            raise
        p = self.progress
        p.batches += 1
        p.events += report.events
        p.bad_rows += post.bad_rows + len(report.rejected)
        p.posts += report.posts
        p.duplicates += report.duplicates
        p.matches += report.matches
        p.late += len(report.late)
        p.last = report
        if self.on_batch is not None:
            self.on_batch(p)


@dataclass(frozen=True)
class _Post:
    """A batch collected and prepared, handed to the poster."""

    batch_id: int
    good: pa.Table
    prepared: PreparedBatch
    dead: DeadLetters
    bad_rows: int
    collect_seconds: float


def _catch_sigint(flag: threading.Event) -> Any:
    """Make SIGINT set ``flag``; return the handler it replaced (None off the main
    thread, where Python cannot install one)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, lambda signum, frame: flag.set())
