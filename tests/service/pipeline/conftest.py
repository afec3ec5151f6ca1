"""Factory fixtures for the Spark job's tests: one real local Spark session (``local[2]``)
for the whole run — starting a JVM costs seconds — and a job runner with its own
folders. Servers come from ``tests/service/conftest.py``."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from api.client import SyncSubscription
from api.spark_sink import RetryPolicy
from service.pipeline.job import JobProgress, Pipeline
from service.pipeline.options import JobOptions

RunJob = Callable[..., JobProgress]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from service.pipeline.session import spark_session

    session = spark_session("local[2]", app_name="scemon-tests")
    yield session
    session.stop()


@pytest.fixture
def run_job(spark: Any, tmp_path: Path) -> RunJob:
    """``run_job(source, [url, ...], **options)`` runs the job once (availableNow) with a
    checkpoint and dead-letter folder under ``tmp_path`` (or the given ones)."""

    def run(source: Path, services: list[str], **options: Any) -> JobProgress:
        options.setdefault("checkpoint", str(tmp_path / "checkpoint"))
        options.setdefault("dead_letter", str(tmp_path / "dead-letter"))
        options.setdefault("retry", RetryPolicy(budget=10.0))
        options.setdefault("once", True)
        return Pipeline(spark, JobOptions(source=str(source), services=services, **options)).run()

    return run


def ws_matches(url: str, idle: float = 2.0) -> list[dict[str, Any]]:
    """Every match the service has, read over the WebSocket until it is quiet."""
    return list(SyncSubscription(url, from_seq=0, idle_timeout=idle))


def start_job(command: Sequence[object], cwd: Path) -> subprocess.Popen[str]:
    """``scemon stream ...`` as a process of its own session (a test may SIGKILL it),
    its stderr (the per-batch lines) readable as text."""
    return subprocess.Popen(
        list(map(str, command)),
        cwd=cwd,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
