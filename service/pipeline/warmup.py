"""Start Spark's parts before the data comes: :func:`warm_up` runs the job's own plan on
a sample of a few one-event files, with nothing posted.

Why: without it a local job's first micro-batch pays Spark's start-up on top of its
events — the Python workers forked and importing pyarrow and scemon (one per core), the
JVM loading and compiling the file source, ``mapInArrow`` and the streaming classes:
several seconds before the first delivery of ``scemon demo``, where a warm micro-batch
of 100,000 events takes about one. A job that runs for hours pays that once and never
sees it again; a demo of 120,000 events would spend most of its streaming time on it.
The warm-up pays it before the events arrive, and says how long it took, so a rate
measured afterwards is the job's rate and the start-up is reported as what it is.

The sample goes through the same :func:`~service.pipeline.sources.event_rows` plan, in
a streaming query of its own (its own folder, checkpoint and query id, deleted after),
into a ``foreachBatch`` that reads the rows back as the job does; nothing reaches a
service. Spark reuses its Python workers (``spark.python.worker.reuse``, on by
default), so the job's tasks find them started, their imports done.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from service.pipeline.options import JobError, JobOptions
from service.pipeline.rows import unpack
from service.pipeline.sources import event_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["warm_up"]

# The sample's one event (each file holds it once).
_SAMPLE_EVENT = {"src": "warm-up", "type": "W", "start": 0.0, "end": 0.0, "attrs": {"x": 1}}


def warm_up(spark: SparkSession, batches: int = 3) -> float:
    """Run the job's plan on a tiny sample, ``batches`` micro-batches of one file per
    worker (so every Python worker starts); return the seconds it took. More than one
    micro-batch: the JVM compiles the per-batch paths (planning, the offset and commit
    logs) only after a few runs, and three took its CPU on the demo's 120,000 events
    from 2.2-2.3 s to 1.7-2.0 s against one. Raises :class:`JobError` when the
    sample's rows do not come back whole: a Spark that cannot run the job should say so
    before the job starts."""
    began = time.monotonic()
    n = spark.sparkContext.defaultParallelism
    root = Path(tempfile.mkdtemp(prefix="scemon-warm-up-"))
    try:
        source = root / "in"
        source.mkdir()
        for k in range(n * batches):
            (source / f"sample-{k}.jsonl").write_bytes(orjson.dumps(_SAMPLE_EVENT) + b"\n")
        options = JobOptions(
            source=str(source),
            services=[],
            checkpoint=str(root / "checkpoint"),
            dead_letter=str(root / "dead-letter"),
            once=True,
            max_files_per_trigger=n,
        )
        seen: list[tuple[int, int]] = []  # (rows, bad rows) per micro-batch

        def read_back(df: DataFrame, batch_id: int) -> None:
            table = unpack(df.toArrow())
            seen.append((table.num_rows, table.num_rows - table.column("error").null_count))

        query = (
            event_rows(spark, options)
            .writeStream.foreachBatch(read_back)
            .option("checkpointLocation", options.checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        if sum(rows for rows, _ in seen) != n * batches or any(bad for _, bad in seen):
            raise JobError(
                f"Spark's warm-up run did not parse its {n * batches} sample events as expected: "
                f"(rows, bad rows) per micro-batch {seen}"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return time.monotonic() - began
