"""Exactly once while batch N posts and Spark has already committed N and prepared N+1
(the job's overlap, service/pipeline/pending.py): a job killed then, or a service killed
then, and restarted, gives exactly the matches of ``scemon replay`` — none lost, none
twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from service.server.process import ServerProcess
from tests.service.conftest import ROOT, StartService
from tests.service.pipeline.conftest import start_job, ws_matches
from tests.service.pipeline.test_end_to_end import (
    PARTS,
    canonical,
    card_events,
    register,
    replayed,
    write_parts,
)

pytestmark = [pytest.mark.spark, pytest.mark.server]


def job_command(tmp_path: Path, url: str) -> list[str]:
    """``scemon stream --once``, one file per micro-batch (4 batches)."""
    command = [sys.executable, "-m", "service.cli", "stream", "--source", tmp_path / "in", "--service", url]
    command += ["--checkpoint", tmp_path / "ck", "--dead-letter", tmp_path / "dead", "--once"]
    command += ["--max-files-per-trigger", "1", "--retry-seconds", "120"]
    return list(map(str, command))


def wait_for(condition: object, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not callable(condition) or not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def held_batch(ck: Path) -> int | None:
    """The batch N whose post hangs with Spark past it: N committed, N and N+1 pending."""
    pending = ck / "scemon" / "pending"
    for n in range(PARTS - 1):
        if (
            (ck / "commits" / str(n)).exists()
            and (pending / str(n)).is_dir()
            and (pending / str(n + 1)).is_dir()
        ):
            return n
    return None


@contextmanager
def job_held_mid_post(tmp_path: Path, service: ServerProcess) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """Start the job and freeze the service (SIGSTOP) as Spark starts the query, so that
    the next post hangs in flight; yield (the job, that batch N) once Spark has committed
    N and the job has prepared N+1 behind it. The service is thawed on exit."""
    assert service.process is not None
    ck = tmp_path / "ck"
    job = start_job(job_command(tmp_path, service.url), ROOT)
    assert job.stderr is not None
    frozen = service.process.pid
    stopped = False
    try:
        wait_for(lambda: (ck / "metadata").exists() or job.poll() is not None, "the query to start")
        os.kill(frozen, signal.SIGSTOP)
        stopped = True
        wait_for(lambda: held_batch(ck) is not None, "a batch committed with its post in flight")
        n = held_batch(ck)
        assert n is not None
        assert not (ck / "commits" / str(n + 1)).exists()  # N+1 waits for N's answer
        yield job, n
    finally:
        if job.poll() is None:
            os.kill(job.pid, signal.SIGKILL)
        job.wait(timeout=30)
        job.stderr.close()
        if stopped and service.process.pid == frozen and service.process.poll() is None:
            os.kill(frozen, signal.SIGCONT)


def cards_on_a_service(tmp_path: Path, start_service: StartService) -> tuple[dict[int, str], ServerProcess]:
    """The example payments in PARTS files, and a service with the example queries."""
    names = write_parts(tmp_path / "in", card_events(), "jsonl")
    service = start_service()
    register(service.url)
    return names, service


def assert_exactly_replay(tmp_path: Path, url: str, names: dict[int, str]) -> None:
    got = ws_matches(url)
    assert [m["seq"] for m in got] == list(range(len(got)))  # no duplicate: one seq per match
    assert canonical(got) == replayed(tmp_path, "jsonl", names)


def test_a_job_killed_while_a_post_is_in_flight_resumes_exactly_once(
    tmp_path: Path, start_service: StartService
) -> None:
    names, service = cards_on_a_service(tmp_path, start_service)
    with job_held_mid_post(tmp_path, service) as (job, n):
        os.kill(job.pid, signal.SIGKILL)
    assert job.returncode == -signal.SIGKILL
    # Spark's checkpoint says batch N is done and N+1 planned; only the job's pending
    # batches say N may not have reached the service. Without them batch N is lost.
    restart = subprocess.run(
        job_command(tmp_path, service.url), cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert restart.returncode == 0, restart.stderr
    assert f"batch {n}:" in restart.stderr  # posted again from the pending copy
    assert_exactly_replay(tmp_path, service.url, names)
    assert not list((tmp_path / "ck" / "scemon" / "pending").iterdir())


def test_a_service_killed_while_a_post_is_in_flight_gets_every_batch_once(
    tmp_path: Path, start_service: StartService
) -> None:
    names, service = cards_on_a_service(tmp_path, start_service)
    with job_held_mid_post(tmp_path, service) as (job, _):
        service.kill()  # mid-post, the next batch prepared behind it
        service.start()  # the same store and port: the job's retries find it again
        _, err = job.communicate(timeout=300)
        assert job.returncode == 0, err
    assert_exactly_replay(tmp_path, service.url, names)
