"""The Spark Structured Streaming job: files (or a synthetic rate) → events → service shards.

    source folder ──binaryFile──► parse + validate (Python tasks, service.file_events)
        │                              │ bad rows ─► dead-letter folder, counted
        ▼ foreachBatch(df, batch id)   ▼ good rows
    sort by time, route by crc32(src) mod shards, Arrow ─► POST /v1/events on each shard

Spark's file source records in its checkpoint which files make up each micro-batch,
and Spark's batch id comes back with them when a crashed job restarts: the sink posts
every batch under ``(producer, batch id)``, so the service applies it once however often
Spark runs it. The producer name is Spark's query id, also kept in the checkpoint, so a
restart is the same producer and a fresh checkpoint a new one.

Whole files go to the parser (one file is one unit of work) because the event ids the
job derives for id-less rows, ``<file name>:<line>``, need each row's place in its file.
Keep files small enough for one task (tens of MB), and write them elsewhere and move
them into the folder when complete: Spark skips names that start with ``.`` or ``_``.

pyspark is imported only by this module (and the sink), so the rest of ``scemon`` works
without the ``spark`` extra.
"""

from __future__ import annotations

import csv
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from api.spark_sink import BatchReport, RetryPolicy, ServiceSink, SinkError, wait_until_ready
from ecq.errors import ScemonError
from service import file_events
from service.file_events import FIELDS, FORMATS, ROW_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = [
    "DeadLetters",
    "JobError",
    "JobOptions",
    "JobProgress",
    "Pipeline",
    "check_job",
    "check_source",
    "parse_mapping",
    "spark_session",
]

# The synthetic source: ``rate:<rows per second>[:<sources>]``.
RATE_PREFIX = "rate:"


class JobError(ScemonError):
    """A job that cannot start or had to stop: the message says why, on one line."""


@dataclass(frozen=True)
class JobOptions:
    """Everything ``scemon stream`` is told."""

    source: str
    services: Sequence[str]
    checkpoint: str
    dead_letter: str
    fmt: str | None = None
    mapping: Mapping[str, str] | None = None
    once: bool = False
    producer: str | None = None
    max_files_per_trigger: int | None = None
    max_batch_events: int = 50_000
    trigger_seconds: float = 2.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    token: str | None = None

    @property
    def rate(self) -> tuple[int, int] | None:
        """``(rows per second, sources)`` for the synthetic source, else None."""
        if not self.source.startswith(RATE_PREFIX):
            return None
        parts = self.source[len(RATE_PREFIX) :].split(":")
        try:
            rows = int(parts[0])
            sources = int(parts[1]) if len(parts) > 1 else 1000
        except (ValueError, IndexError):
            rows = sources = 0
        if len(parts) > 2 or rows <= 0 or sources <= 0:
            raise JobError(
                f"bad synthetic source {self.source!r}: expected rate:<rows per second>[:<sources>]"
            )
        return rows, sources


@dataclass
class JobProgress:
    """Running totals over the job's batches (read by progress bars; written by the job)."""

    batches: int = 0
    events: int = 0
    bad_rows: int = 0
    posts: int = 0
    duplicates: int = 0
    matches: int = 0
    last: BatchReport | None = None


def parse_mapping(text: str | None) -> dict[str, str] | None:
    """``src=card,start=ts`` → ``{"src": "card", "start": "ts"}``; a clear error for a
    field that is not an event field, a field named twice or a column used twice."""
    if not text:
        return None
    out: dict[str, str] = {}
    for item in text.split(","):
        name, eq, column = item.partition("=")
        name, column = name.strip(), column.strip()
        if not eq or not name or not column:
            raise JobError(f"--map {text!r}: expected field=column pairs separated by commas, got {item!r}")
        if name not in FIELDS:
            raise JobError(f"--map: unknown event field {name!r} (expected one of {', '.join(FIELDS)})")
        if name in out:
            raise JobError(f"--map: field {name!r} is mapped twice")
        if column in out.values():
            raise JobError(f"--map: column {column!r} is mapped to two fields")
        out[name] = column
    return out


def spark_session(master: str | None = None, app_name: str = "scemon-stream") -> SparkSession:
    """The job's session. Under ``spark-submit`` the master and resources come from it;
    run directly, Spark runs in this process with ``master`` (default ``local[2]``)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not started by spark-submit
        _quiet_local_jvm()
        builder = (
            builder.master(master or "local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if threading.current_thread() is threading.main_thread():
        # pyspark's own SIGINT handler cancels jobs through py4j from inside the signal,
        # which breaks a py4j call in progress; the job handles Ctrl-C itself (Pipeline.run).
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return spark


_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark %p %c{1}: %m%n
"""


def _quiet_local_jvm() -> None:
    """Settings that must reach the JVM before it starts: the Python workers run this
    interpreter (they import scemon and pyarrow too), Spark binds to loopback, and it
    logs errors only — a terminal running ``scemon demo`` shows the demo, not Spark's
    start-up chatter."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if "PYSPARK_SUBMIT_ARGS" not in os.environ:
        config = Path(tempfile.gettempdir()) / "scemon-spark-log4j2.properties"
        config.write_text(_LOG4J2)
        os.environ["PYSPARK_SUBMIT_ARGS"] = (
            f"--driver-java-options -Dlog4j2.configurationFile=file:{config} pyspark-shell"
        )


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

    # -------------------------------------------------------------------- lifecycle

    def start(self) -> StreamingQuery:
        """Start the streaming query (after :func:`check_job`)."""
        opts = self.options
        writer = (
            self._rows().writeStream.foreachBatch(self._deliver).option("checkpointLocation", opts.checkpoint)
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
        self._producer_ready.set()
        self._query = query
        return query

    def run(self) -> JobProgress:
        """:func:`check_job`, :meth:`start`, then wait for the end.

        Ctrl-C stops the stream and then raises KeyboardInterrupt; the checkpoint resumes
        it. The signal only sets a flag that the wait loop reads: a KeyboardInterrupt
        raised inside a py4j call would break the JVM connection the stop needs."""
        check_job(self.options)
        query = self.start()
        interrupted = threading.Event()
        previous = _catch_sigint(interrupted)
        try:
            while not query.awaitTermination(1):
                if interrupted.is_set():
                    query.stop()
                    raise KeyboardInterrupt
        except Exception as err:  # StreamingQueryException, or py4j's on shutdown
            raise self._job_error(err) from None
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
            self._sink.close()
        if self._failure is not None:
            raise self._job_error(self._failure)
        return self.progress

    def stop(self) -> None:
        """Stop the stream (from another thread) and release the sink; safe to call twice."""
        if self._query is not None and self._query.isActive:
            self._query.stop()
        self._sink.close()

    def _job_error(self, err: BaseException) -> JobError:
        cause = self._failure or err
        if isinstance(cause, (SinkError, ScemonError)):
            return JobError(str(cause))
        text = str(cause).strip().splitlines()
        return JobError(f"the stream stopped: {text[0] if text else type(cause).__name__}")

    # ------------------------------------------------------------------------ reading

    def _rows(self) -> DataFrame:
        """The stream of parsed rows (:data:`ROW_SCHEMA`), good and bad."""
        from pyspark.sql.pandas.types import from_arrow_schema

        opts = self.options
        rate = opts.rate
        if rate is not None:
            return _rate_rows(self.spark, *rate)
        # binaryFile's own columns; a file source needs its schema declared.
        schema = "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY"
        reader = self.spark.readStream.format("binaryFile").schema(schema)
        if opts.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", opts.max_files_per_trigger)
        files = reader.load(opts.source).select("path", "content")
        parse = partial(file_events.parse_batches, fmt=opts.fmt, mapping=opts.mapping)
        return files.mapInArrow(parse, from_arrow_schema(ROW_SCHEMA))

    # ----------------------------------------------------------------------- delivery

    def _deliver(self, df: DataFrame, batch_id: int) -> None:
        """The ``foreachBatch`` function: dead letters, then the events, then progress.
        An exception here stops the query and leaves the batch to be re-run on restart."""
        try:
            self._producer_ready.wait()
            table = df.toArrow()
            bad = table.filter(pc.is_valid(table.column("error")))
            good = table.filter(pc.is_null(table.column("error")))
            dead = DeadLetters(self.options.dead_letter)
            dead.write(batch_id, bad)
            report = self._sink.post_table(
                good.append_column("_row", pa.array(range(good.num_rows), pa.int64())),
                batch_id,
                tie_break=("path", "index"),
            )
            if report.rejected:
                dead.write_rejected(batch_id, good, report.rejected)
        except BaseException as err:
            self._failure = err
            raise
        p = self.progress
        p.batches += 1
        p.events += report.events
        p.bad_rows += bad.num_rows + len(report.rejected)
        p.posts += report.posts
        p.duplicates += report.duplicates
        p.matches += report.matches
        p.last = report
        if self.on_batch is not None:
            self.on_batch(p)


def _catch_sigint(flag: threading.Event) -> Any:
    """Make SIGINT set ``flag``; return the handler it replaced (None off the main
    thread, where Python cannot install one)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, lambda signum, frame: flag.set())


class DeadLetters:
    """The dead-letter folder: one JSON Lines file per batch that had bad rows,
    ``batch-<id>.jsonl``, each line ``{"batch", "file", "line", "reason", "raw"}``.

    Written before the batch's events are posted, and replaced whole (write, then rename),
    so a batch that Spark re-runs leaves exactly one copy. The folder is the driver's:
    on a cluster, a volume the driver mounts.
    """

    def __init__(self, folder: str) -> None:
        local = _local_path(folder)
        if local is None:
            raise JobError(f"--dead-letter {folder}: must be a folder on the driver's filesystem")
        self.folder = Path(local)

    def write(self, batch_id: int, bad: pa.Table) -> None:
        """Dead-letter the rows the job's validation rejected."""
        if bad.num_rows:
            rows = bad.select(["path", "line", "error", "raw"]).to_pylist()
            self._write(
                f"batch-{batch_id:08d}.jsonl",
                batch_id,
                [(r["path"], r["line"], r["error"], r["raw"]) for r in rows],
            )

    def write_rejected(self, batch_id: int, good: pa.Table, rejected: list[dict[str, object]]) -> None:
        """Dead-letter the events the service refused (422): the job checks events as the
        service does, so this is for a service with stricter limits."""
        lines = []
        for item in rejected:
            row = good.slice(int(str(item["row"])), 1).to_pylist()[0]
            raw = {k: row[k] for k in ("id", "src", "type", "start", "end", "prob", "attrs")}
            lines.append((row["path"], row["line"], str(item["reason"]), orjson.dumps(raw).decode()))
        self._write(f"batch-{batch_id:08d}-rejected.jsonl", batch_id, lines)

    def _write(self, name: str, batch_id: int, rows: Sequence[tuple[object, object, object, object]]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        body = b"".join(
            orjson.dumps({"batch": batch_id, "file": path, "line": line, "reason": reason, "raw": raw})
            + b"\n"
            for path, line, reason, raw in rows
        )
        temp = self.folder / f".{name}.tmp"
        temp.write_bytes(body)
        os.replace(temp, self.folder / name)


# -------------------------------------------------------------------------- sources


def _rate_rows(spark: SparkSession, rows_per_second: int, sources: int) -> DataFrame:
    """Spark's ``rate`` source as card payments: ``value`` n is event ``r<n>`` of source
    ``n mod sources``, class ``C00..C49`` and payment from a hash of n (the same on a
    re-run), at the rate source's timestamp."""
    from pyspark.sql import functions as F

    value = F.col("value")
    return (
        spark.readStream.format("rate")
        .option("rowsPerSecond", rows_per_second)
        .load()
        .select(
            F.lit("rate").alias("path"),
            value.alias("index"),
            (value + 1).alias("line"),
            F.concat(F.lit("r"), value.cast("string")).alias("id"),
            (value % sources).cast("string").alias("src"),
            F.concat(F.lit("C"), F.lpad((F.abs(F.hash(value)) % 50).cast("string"), 2, "0")).alias("type"),
            F.col("timestamp").cast("double").alias("start"),
            F.col("timestamp").cast("double").alias("end"),
            F.lit(1.0).alias("prob"),
            F.to_json(F.struct(((F.abs(F.hash(value, F.lit(7))) % 50000) / 100.0).alias("payment"))).alias(
                "attrs"
            ),
            F.lit(None).cast("string").alias("error"),
            F.lit(None).cast("string").alias("raw"),
        )
    )


def check_job(options: JobOptions) -> None:
    """Fail fast, before Spark starts anything, on what would only fail later: a source
    folder that does not exist, a ``--map`` column the files do not have, a dead-letter
    folder the driver cannot write, a service that does not answer within the retry
    budget (retried with backoff until then)."""
    check_source(options)
    try:
        wait_until_ready(options.services, options.retry, options.token)
    except SinkError as err:
        raise JobError(f"service not reachable: {err}") from None


def check_source(options: JobOptions) -> None:
    """The source exists and, for a mapping, the files already there have its columns."""
    if options.rate is not None:
        if options.mapping or options.fmt:
            raise JobError("--map and --format do not apply to the synthetic rate source")
        return
    if options.fmt is not None and options.fmt not in FORMATS:
        raise JobError(f"unknown --format {options.fmt!r} (expected {', '.join(FORMATS)})")
    DeadLetters(options.dead_letter)  # a folder the driver can write
    local = _local_path(options.source)
    if local is None:
        return  # a cluster filesystem: Spark reports what it cannot read
    folder = Path(local)
    if not folder.exists():
        raise JobError(f"source folder {options.source} does not exist")
    if not folder.is_dir():
        raise JobError(f"source {options.source} is not a folder")
    if options.mapping:
        sample = next(
            (p for p in sorted(folder.iterdir()) if p.is_file() and not p.name.startswith((".", "_"))), None
        )
        if sample is not None:
            _check_mapping(sample, options.fmt, options.mapping)


def _check_mapping(sample: Path, fmt: str | None, mapping: Mapping[str, str]) -> None:
    kind = file_events.file_format(sample.name, fmt)
    columns = _sample_columns(sample, kind)
    for name, column in mapping.items():
        if column not in columns:
            shown = ", ".join(sorted(columns)[:20]) or "none"
            raise JobError(f"--map {name}={column}: no column {column!r} in {sample} (it has: {shown})")


def _sample_columns(path: Path, kind: str) -> set[str]:
    if kind == "parquet":
        import pyarrow.parquet as pq

        try:
            return set(pq.read_schema(path).names)
        except (pa.ArrowException, OSError) as err:
            raise JobError(f"{path}: not a readable Parquet file ({err})") from None
    with path.open("rb") as stream:
        if kind == "csv":
            header = stream.readline().decode("utf-8-sig", "replace")
            return {name.strip() for name in next(csv.reader([header]), [])}
        keys: set[str] = set()
        for _, raw in zip(range(1000), stream, strict=False):
            try:
                data = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(data, dict):
                keys.update(data)
        return keys


def _local_path(location: str) -> str | None:
    """A plain or ``file:`` path as a local path; None for another filesystem (hdfs:, s3a:)."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file") or len(parsed.scheme) == 1:  # len 1: a Windows drive
        return parsed.path if parsed.scheme == "file" else location
    return None
