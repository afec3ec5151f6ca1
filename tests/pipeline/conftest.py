"""Factory fixtures for the Spark job's tests: one real local Spark session (``local[2]``)
for the whole run — starting a JVM costs seconds — a job runner with its own folders,
and real ``scemon serve`` processes on free loopback ports."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from api.client import SyncSubscription
from api.spark_sink import RetryPolicy
from service.pipeline import JobOptions, JobProgress, Pipeline
from service.server_process import ServerProcess

ROOT = Path(__file__).resolve().parents[2]

RunJob = Callable[..., JobProgress]
StartService = Callable[..., ServerProcess]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from service.pipeline import spark_session

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


@pytest.fixture
def start_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartService]:
    """``start_service()`` → a ready ``scemon serve`` on a free port and a fresh store;
    every one is stopped (by its pid) at the end of the test."""
    servers: list[ServerProcess] = []

    def start() -> ServerProcess:
        server = ServerProcess(tmp_path_factory.mktemp("service") / "data")
        servers.append(server)
        server.start()
        return server

    yield start
    for server in servers:
        server.stop()


def ws_matches(url: str, idle: float = 2.0) -> list[dict[str, Any]]:
    """Every match the service has, read over the WebSocket until it is quiet."""
    return list(SyncSubscription(url, from_seq=0, idle_timeout=idle))


def scemon(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``scemon ...`` as a real process."""
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200"},
    )
