"""``scemon stream``: run the Spark job (:mod:`service.pipeline`) against one or more
service shards.

pyspark is imported only when the command runs, so every other command works without
the ``spark`` extra. Every mistake a user can make (a folder that does not exist, a column ``--map`` names
that the files do not have, a service that stays down) ends as one line on stderr and
exit status 1.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import orjson
import typer

from ecq.errors import ScemonError
from service.cli.collector import freeze_so_far, tuned_collector
from service.cli.errors import SPARK_MISSING, user_errors
from service.cli.options import ServiceOption, TokenOption

__all__ = ["stream"]


class StreamFormat(StrEnum):
    jsonl = "jsonl"
    csv = "csv"
    parquet = "parquet"


def stream(
    source: Annotated[
        str,
        typer.Option(
            help="Folder to watch for new event files (or a cluster path, hdfs:/..., s3a:/...), "
            "or rate:<rows per second>[:<sources>] for synthetic load.",
            show_default=False,
        ),
    ],
    service: ServiceOption,
    checkpoint: Annotated[
        str,
        typer.Option(
            help="Spark checkpoint folder: restart with the same one to resume.", show_default=False
        ),
    ],
    dead_letter: Annotated[
        str,
        typer.Option(
            "--dead-letter",
            help="Folder for rows that are not valid events, with reasons.",
            show_default=False,
        ),
    ],
    fmt: Annotated[
        StreamFormat | None,
        typer.Option(
            "--format", "-f", help="File format; default: by extension (.csv, .parquet, else jsonl)."
        ),
    ] = None,
    mapping: Annotated[
        str | None,
        typer.Option(
            "--map",
            help="Turn a flat table into events: src=COL,type=COL,start=COL[,end=COL,id=COL,prob=COL]. "
            "Fields not named are read from the column of their own name; other columns become attrs.",
            show_default=False,
        ),
    ] = None,
    once: Annotated[
        bool, typer.Option("--once", help="Process the files present now, in micro-batches, and exit 0.")
    ] = False,
    producer: Annotated[
        str | None,
        typer.Option(help="Producer name for the services' de-duplication; default: Spark's query id."),
    ] = None,
    max_files_per_trigger: Annotated[
        int | None,
        typer.Option(min=1, help="At most this many new files per micro-batch (instead of --batch-events)."),
    ] = None,
    batch_events: Annotated[
        int,
        typer.Option(
            min=1,
            help="About this many events per micro-batch: Spark reads that many events' bytes of new "
            "files per trigger, from the bytes per event of the files there at start (a bigger file is "
            "still one batch). Fewer, bigger batches spread Spark's fixed cost per batch.",
        ),
    ] = 100_000,
    overlap: Annotated[
        bool,
        typer.Option(
            help="Post each batch while Spark commits it and prepares the next (the checkpoint records "
            "what was delivered; a restart re-runs a batch committed but not delivered). --no-overlap "
            "posts each batch before Spark commits it. Needs a checkpoint on the driver's filesystem.",
        ),
    ] = True,
    max_batch_events: Annotated[
        int, typer.Option(min=1, help="At most this many events per post (keep it across restarts).")
    ] = 50_000,
    trigger_seconds: Annotated[float, typer.Option(min=0.1, help="Seconds between micro-batches.")] = 2.0,
    retry_seconds: Annotated[
        float, typer.Option(min=0, help="How long to retry a service that is down before giving up.")
    ] = 60.0,
    master: Annotated[
        str | None, typer.Option(help="Spark master when not run by spark-submit; default local[2].")
    ] = None,
    token: TokenOption = None,
    lateness: Annotated[
        float,
        typer.Option(
            min=0,
            help="How far out of order (seconds) events may come across micro-batches: every --service "
            "must hold events at least that long (its scemon serve --lateness); checked at start.",
        ),
    ] = 0.0,
    progress_log: Annotated[
        Path | None,
        typer.Option(
            "--progress-log",
            help="At the end, write Spark's progress report of each micro-batch (its durations per "
            "phase) to this file, one JSON object a line.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Stream event files (or synthetic events) into scemon services with Spark.

    Each micro-batch is validated (bad rows go to --dead-letter with the reason), sorted
    by time, routed by source to its --service shard and posted as Arrow under (producer,
    Spark batch id), so a batch that Spark re-runs after a crash is applied once. Source
    and id values that are integer literals are sent as integers. Disorder across
    micro-batches is put right by each service's reorder buffer (--lateness); events
    later than that are applied and also written to --dead-letter ("late by 12.5 s"),
    events too far ahead of a service's clock are refused and written there. Exits 1 with
    one line when the job cannot start or a service stays down for --retry-seconds.
    """
    from api.spark_sink import RetryPolicy
    from service.pipeline.checks import check_job
    from service.pipeline.job import Pipeline
    from service.pipeline.options import JobOptions, parse_mapping
    from service.pipeline.session import spark_session

    with user_errors(SPARK_MISSING):
        options = JobOptions(
            source=source,
            services=service,
            checkpoint=checkpoint,
            dead_letter=dead_letter,
            fmt=fmt.value if fmt else None,
            mapping=parse_mapping(mapping),
            once=once,
            producer=producer,
            max_files_per_trigger=max_files_per_trigger,
            batch_events=batch_events,
            max_batch_events=max_batch_events,
            trigger_seconds=trigger_seconds,
            retry=RetryPolicy(budget=retry_seconds),
            token=token,
            lateness=lateness,
            overlap=overlap,
        )
        _check_services(service)
        check_job(options)  # before the JVM starts: a mistake costs a second, not ten
        spark = spark_session(master)
        pipeline = Pipeline(spark, options, on_batch=_log_batch)
        try:
            with tuned_collector():
                freeze_so_far()  # the driver's modules and the session
                totals = pipeline.run()
        except KeyboardInterrupt:
            typer.echo("stopped; restart with the same --checkpoint to resume", err=True)
            raise typer.Exit(130) from None
        finally:
            if progress_log is not None:
                progress_log.write_bytes(b"".join(orjson.dumps(p) + b"\n" for p in pipeline.spark_progress()))
            spark.stop()
    typer.echo(
        f"{totals.events} events in {totals.batches} batches, {totals.bad_rows} bad rows, "
        f"{totals.late} late, {totals.matches} matches",
        err=True,
    )


def _log_batch(progress: object) -> None:
    from service.pipeline.job import JobProgress

    assert isinstance(progress, JobProgress) and progress.last is not None
    last = progress.last
    note = f", {last.duplicates} already applied" if last.duplicates else ""
    note += f", {len(last.late)} late" if last.late else ""
    typer.echo(
        f"batch {last.batch_id}: {last.events} events in {last.posts} posts{note}, {last.matches} matches, "
        f"{last.collect_seconds + last.seconds:.2f}s ({last.collect_seconds:.2f}s collecting, "
        f"{last.seconds:.2f}s posting; total {progress.events} events, {progress.bad_rows} bad rows)",
        err=True,
    )


def _check_services(urls: list[str]) -> None:
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise ScemonError(f"--service {url}: expected a URL like http://127.0.0.1:8080")
