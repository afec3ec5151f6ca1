"""``scemon stream``, ``scemon demo`` and ``scemon queries register``: the Spark side.

Kept apart from :mod:`service.cli` so that the commands that need the ``spark`` extra
import pyspark only when they run, and so that the CLI module stays a list of commands.
Every mistake a user can make (a folder that does not exist, a column ``--map`` names
that the files do not have, a service that stays down) ends as one line on stderr and
exit status 1.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from ecq.errors import ScemonError
from service.cli_errors import user_errors

# What to do when the Spark job's extra is not installed.
SPARK_MISSING = "pip install 'scemon[spark]' (and a Java 17 runtime)"

__all__ = ["demo", "queries_app", "stream"]


class StreamFormat(StrEnum):
    jsonl = "jsonl"
    csv = "csv"
    parquet = "parquet"


ServiceOption = Annotated[
    list[str],
    typer.Option(
        "--service",
        "-s",
        help="Base URL of a scemon service (http://host:port). Repeat for shards: each source goes to "
        "shard crc32(src) mod the number of --service options, in the order given.",
        show_default=False,
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option("--token", envvar="SCEMON_TOKEN", help="Bearer token for the services.", show_default=False),
]

queries_app = typer.Typer(
    name="queries", help="Manage the queries of one or more services.", no_args_is_help=True
)


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
        int | None, typer.Option(min=1, help="At most this many new files per micro-batch.")
    ] = None,
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
) -> None:
    """Stream event files (or synthetic events) into scemon services with Spark.

    Each micro-batch is validated (bad rows go to --dead-letter with the reason), sorted
    by time, routed by source to its --service shard and posted as Arrow under (producer,
    Spark batch id), so a batch that Spark re-runs after a crash is applied once. Source
    and id values that are integer literals are sent as integers. Exits 1 with one line
    when the job cannot start or a service stays down for --retry-seconds.
    """
    from api.spark_sink import RetryPolicy
    from service.pipeline import JobOptions, Pipeline, check_job, parse_mapping, spark_session

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
            max_batch_events=max_batch_events,
            trigger_seconds=trigger_seconds,
            retry=RetryPolicy(budget=retry_seconds),
            token=token,
        )
        _check_services(service)
        check_job(options)  # before the JVM starts: a mistake costs a second, not ten
        spark = spark_session(master)
        pipeline = Pipeline(spark, options, on_batch=_log_batch)
        try:
            totals = pipeline.run()
        except KeyboardInterrupt:
            typer.echo("stopped; restart with the same --checkpoint to resume", err=True)
            raise typer.Exit(130) from None
        finally:
            spark.stop()
    typer.echo(
        f"{totals.events} events in {totals.batches} batches, {totals.bad_rows} bad rows, "
        f"{totals.matches} matches",
        err=True,
    )


def _log_batch(progress: object) -> None:
    from service.pipeline import JobProgress

    assert isinstance(progress, JobProgress) and progress.last is not None
    last = progress.last
    note = f", {last.duplicates} already applied" if last.duplicates else ""
    typer.echo(
        f"batch {last.batch_id}: {last.events} events in {last.posts} posts{note}, {last.matches} matches, "
        f"{last.seconds:.2f}s (total {progress.events} events, {progress.bad_rows} bad rows)",
        err=True,
    )


def demo(
    events: Annotated[int, typer.Option(min=1000, help="Card payments to generate and stream.")] = 120_000,
    files: Annotated[int, typer.Option(min=1, help="Files the payments are written to.")] = 12,
    files_per_batch: Annotated[int, typer.Option(min=1, help="Files per Spark micro-batch.")] = 1,
    queries: Annotated[int, typer.Option(min=0, help="Generated purchasing-pattern queries.")] = 1000,
    workdir: Annotated[
        Path | None,
        typer.Option(help="Keep the files, store and checkpoint here (default: a temporary folder)."),
    ] = None,
) -> None:
    """Run the whole system end to end on this machine, in about two minutes.

    Generates the SCEMon paper's credit-card workload (1,000 card holders, 50 merchant
    classes, payments), starts a scemon service on a free loopback port, registers the
    paper's two example queries and 1,000 generated ones over REST, subscribes to the
    matches over WebSocket, streams the payment files through the Spark job, and shows
    progress, a summary and a few matches. Ctrl-C stops everything it started.
    """
    from service.demo import Demo

    with user_errors(SPARK_MISSING):
        code = Demo(
            n_events=events,
            n_files=files,
            files_per_batch=files_per_batch,
            n_queries=queries,
            workdir=workdir,
        ).run()
    raise typer.Exit(code)


@queries_app.command("register")
def register(
    service: ServiceOption,
    queries: Annotated[
        Path,
        typer.Option(
            "--queries",
            "-q",
            help="Queries file, as for scemon replay (query text or JSON).",
            show_default=False,
        ),
    ],
    token: TokenOption = None,
) -> None:
    """Register the queries of a file on every service shard, all at once per shard.

    Every match is within one source and sources are spread over the shards, so every
    shard needs every query. A query already registered under the same name is left as
    it is, so the command can be re-run after a shard was down.
    """
    from service.shard_queries import register_everywhere

    with user_errors(SPARK_MISSING):
        for line in register_everywhere(service, queries, token):
            typer.echo(line, err=True)


def _check_services(urls: list[str]) -> None:
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise ScemonError(f"--service {url}: expected a URL like http://127.0.0.1:8080")
