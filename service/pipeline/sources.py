"""Where the job's rows come from: a watched folder of event files (each file parsed
whole in a Python task, :mod:`service.pipeline.rows`) or Spark's ``rate`` source as
synthetic card payments."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from service.pipeline.options import JobOptions, local_path
from service.pipeline.rows import PACKED_SCHEMA, file_format, parse_batches

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["bytes_per_event", "event_rows"]

# Bytes an event takes in a file when no file is there to measure yet: a JSON line of
# the demo's card payments (id, card, class, time, three attributes) is about this long.
DEFAULT_EVENT_BYTES = 160
# How much of the folder bytes_per_event reads: enough for a steady mean, cheap at start.
_SAMPLE_FILES = 8
_SAMPLE_BYTES = 1 << 20
_SPARE = 1.05


def event_rows(spark: SparkSession, opts: JobOptions) -> DataFrame:
    """The stream of parsed rows, good and bad: for files, one row per file holding its
    rows packed (:data:`~service.pipeline.rows.PACKED_SCHEMA`); for the ``rate``
    source, the rows themselves (:data:`~service.pipeline.rows.ROW_SCHEMA`).
    :func:`~service.pipeline.rows.unpack` makes either the rows."""
    from pyspark.sql.pandas.types import from_arrow_schema

    rate = opts.rate
    if rate is not None:
        return _rate_rows(spark, *rate)
    # binaryFile's own columns; a file source needs its schema declared.
    schema = "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY"
    reader = spark.readStream.format("binaryFile").schema(schema)
    if opts.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", opts.max_files_per_trigger)
    else:
        # Micro-batches sized by events, not files: Spark's fixed cost per micro-batch
        # (offset and commit logs, planning, the collect; ~0.2-0.4 s) is then spread over
        # about batch_events events however small the files are. Spark takes files while
        # their total stays within the limit (a bigger file is still one batch, and a
        # trigger takes what has arrived); the 5% spare keeps files of equal size that
        # make up batch_events together from each falling one short by a few bytes.
        limit = max(1, round(opts.batch_events * bytes_per_event(opts) * _SPARE))
        reader = reader.option("maxBytesPerTrigger", limit)
    files = reader.load(opts.source).select("path", "content")
    parse = partial(parse_batches, fmt=opts.fmt, mapping=opts.mapping)
    return files.mapInArrow(parse, from_arrow_schema(PACKED_SCHEMA))


def bytes_per_event(opts: JobOptions) -> float:
    """Mean bytes per event of the files in a local source folder (the first MB of up to
    8 of them: lines for JSON Lines and CSV, rows for Parquet); DEFAULT_EVENT_BYTES for
    an empty folder or another filesystem, whose files Spark alone reads."""
    local = local_path(opts.source)
    folder = Path(local) if local is not None else None
    if folder is None or not folder.is_dir():
        return DEFAULT_EVENT_BYTES
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith((".", "_")))
    size = events = 0
    for path in files[:_SAMPLE_FILES]:
        if file_format(path.name, opts.fmt) == "parquet":
            import pyarrow.parquet as pq

            try:
                rows = pq.read_metadata(path).num_rows
            except (OSError, ValueError):
                continue  # Spark's task dead-letters it
            size, events = size + path.stat().st_size, events + rows
        else:
            with path.open("rb") as stream:
                head = stream.read(_SAMPLE_BYTES)
            lines = head.count(b"\n") + (bool(head) and not head.endswith(b"\n"))  # a last line unended
            size, events = size + len(head), events + lines
    return size / events if events else DEFAULT_EVENT_BYTES


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
