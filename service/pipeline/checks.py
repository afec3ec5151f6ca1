"""What the job checks before Spark starts anything, so that a mistake costs a second,
not a JVM start: the source, the ``--map`` columns, the dead-letter folder, the services."""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path

import httpx
import orjson
import pyarrow as pa

from api.client import ApiError, Client
from api.spark_sink import SinkError, wait_until_ready
from service.pipeline.dead_letters import DeadLetters
from service.pipeline.options import JobError, JobOptions, local_path
from service.pipeline.rows import FORMATS, file_format

__all__ = ["check_job", "check_source"]


def check_job(options: JobOptions) -> None:
    """Fail fast, before Spark starts anything, on what would only fail later: a source
    folder that does not exist, a ``--map`` column the files do not have, a dead-letter
    folder the driver cannot write, a service that does not answer within the retry
    budget (retried with backoff until then), a service that holds events for less than
    the job's ``--lateness``."""
    check_source(options)
    try:
        wait_until_ready(options.services, options.retry, options.token)
    except SinkError as err:
        raise JobError(f"service not reachable: {err}") from None
    if options.lateness:
        check_lateness(options)


def check_lateness(options: JobOptions) -> None:
    """Every service's allowed lateness is at least the job's: events late by up to that
    much across micro-batches are then put in order, not reported late."""
    for url in options.services:
        try:
            with Client(url, token=options.token, timeout=10.0) as client:
                held = client.stats().lateness
        except (ApiError, httpx.HTTPError) as err:
            raise JobError(f"{url}: cannot read GET /v1/stats for its lateness ({err})") from None
        if held < options.lateness:
            raise JobError(
                f"{url} holds events for {held:g} s (its --lateness); this job's input may be "
                f"{options.lateness:g} s out of order: start the service with --lateness {options.lateness:g} "
                "or more, or lower the job's --lateness"
            )


def check_source(options: JobOptions) -> None:
    """The source exists and, for a mapping, the files already there have its columns."""
    if options.rate is not None:
        if options.mapping or options.fmt:
            raise JobError("--map and --format do not apply to the synthetic rate source")
        return
    if options.fmt is not None and options.fmt not in FORMATS:
        raise JobError(f"unknown --format {options.fmt!r} (expected {', '.join(FORMATS)})")
    DeadLetters(options.dead_letter)  # a folder the driver can write
    local = local_path(options.source)
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
    kind = file_format(sample.name, fmt)
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
