"""Where the job's rows come from: a watched folder of event files (each file parsed
whole in a Python task, :mod:`service.pipeline.rows`) or Spark's ``rate`` source as
synthetic card payments."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from service.pipeline.options import JobOptions
from service.pipeline.rows import ROW_SCHEMA, parse_batches

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["event_rows"]


def event_rows(spark: SparkSession, opts: JobOptions) -> DataFrame:
    """The stream of parsed rows (:data:`ROW_SCHEMA`), good and bad."""
    from pyspark.sql.pandas.types import from_arrow_schema

    rate = opts.rate
    if rate is not None:
        return _rate_rows(spark, *rate)
    # binaryFile's own columns; a file source needs its schema declared.
    schema = "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY"
    reader = spark.readStream.format("binaryFile").schema(schema)
    if opts.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", opts.max_files_per_trigger)
    files = reader.load(opts.source).select("path", "content")
    parse = partial(parse_batches, fmt=opts.fmt, mapping=opts.mapping)
    return files.mapInArrow(parse, from_arrow_schema(ROW_SCHEMA))


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
