"""A real server on a tiny filesystem (a 16 MB tmpfs): a full disk is answered 503
saying so, ``/readyz`` says so, the log says it once, the engine is not rebuilt per
refused batch, and writes resume by themselves when space returns.

Mounting needs root (CAP_SYS_ADMIN); without it these tests are skipped, and
``tests/service/server/test_store_faults.py`` covers the same states in-process with a
file-size limit and a size-capped store (docs/service.md says which is which).
"""

from __future__ import annotations

import errno
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ecq.engine import Engine
from ecq.event import Event
from tests.service.conftest import Server

pytestmark = pytest.mark.faults


def mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True
    )
    return done.returncode == 0


@pytest.fixture
def on_tiny_disk(tiny_disk: Path, tmp_path: Path) -> Iterator[Server]:
    """A server whose store is on the tiny disk and whose log is not."""
    server = Server(tiny_disk / "data", {})
    server.log = tmp_path / "server.log"
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    if not mount_tmpfs(disk, "16m"):
        pytest.skip("cannot mount a tmpfs here (needs root); test_store_faults.py covers this in-process")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def fill(disk: Path) -> Path:
    """Write a file until the disk is full; returns it."""
    filler = disk / "filler"
    chunk = bytes(64 * 1024)
    with filler.open("wb") as fh:
        try:
            while True:
                fh.write(chunk)
                fh.flush()
        except OSError as err:
            assert err.errno == errno.ENOSPC
    return filler


def batch(k: int) -> list[dict[str, object]]:
    t = 1000.0 * k
    return [
        {"src": i % 7, "type": "AB"[i % 2], "start": t + i, "attrs": {"pad": "x" * 200}} for i in range(400)
    ]


def metric(server: Server, name: str, **labels: str) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    wanted = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
    for line in text.splitlines():
        if line.startswith(wanted + " "):
            return float(line.split()[-1])
    return 0.0


def wait_ready(server: Server, timeout: float = 60.0) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        ready = httpx.get(f"{server.url}/readyz")
        if ready.status_code == 200 or time.monotonic() > deadline:
            return ready
        time.sleep(0.1)


def test_a_full_disk_is_said_to_be_full_and_writes_resume_when_space_returns(
    tiny_disk: Path, on_tiny_disk: Server
) -> None:
    server = on_tiny_disk
    query = "SEQ(A, B) WITHIN 5 s"
    with httpx.Client(base_url=server.url, timeout=60) as http:
        acked, refused = fill_and_free(server, http, tiny_disk, query)
    log = server.log.read_text()
    assert sum("disk is full" in line and "ERROR" in line for line in log.splitlines()) == 1, log
    assert "writes again" in log

    engine = Engine()
    engine.register("ab", query)
    expected = 0
    for k in acked + refused:
        events = [Event(e["src"], str(e["type"]), float(e["start"])) for e in batch(k)]  # type: ignore[arg-type]
        expected += len(engine.process(sorted(events, key=lambda e: (e.end, e.start))))
    matches = server.client().all_matches()
    assert len(matches) == expected and [m["seq"] for m in matches] == list(range(expected))


def fill_and_free(server: Server, http: httpx.Client, disk: Path, query: str) -> tuple[list[int], list[int]]:
    """Fill the disk while posting, check what the server says, free it, resend;
    returns the batches acknowledged before and the batches refused (then resent)."""
    assert http.post("/v1/queries", json={"name": "ab", "text": query}).status_code == 201
    acked: list[int] = []
    for k in range(3):
        assert (
            http.post("/v1/events", json={"producer": "p", "batch_id": k, "events": batch(k)}).status_code
            == 200
        )
        acked.append(k)
    filler = fill(disk)

    refused: list[int] = []
    answers = []
    for k in range(3, 40):
        response = http.post("/v1/events", json={"producer": "p", "batch_id": k, "events": batch(k)})
        if response.status_code == 200:
            assert not refused, "a batch was applied after one was refused"
            acked.append(k)
            continue
        refused.append(k)
        answers.append(response)
    assert len(refused) >= 30
    for response in answers:
        assert response.status_code == 503 and int(response.headers["retry-after"]) >= 1
        assert "disk is full" in response.json()["detail"]["message"], response.text
        assert "cannot rollback" not in response.text
    ready = http.get("/readyz")
    assert ready.status_code == 503 and ready.json()["status"] == "unwritable"
    assert "disk is full" in ready.json()["detail"] and str(disk) in ready.json()["detail"]
    assert metric(server, "scemon_store_faults_total", kind="full") == 1  # refused at once after that
    assert metric(server, "scemon_rebuilds_total", reason="store") == 0
    assert http.get("/v1/queries").status_code == 200  # reads go on

    filler.unlink()  # space returns
    assert wait_ready(server).status_code == 200
    assert metric(server, "scemon_rebuilds_total", reason="store") == 1  # one rebuild for all of them
    for k in refused:  # the producer resends what was refused
        response = http.post("/v1/events", json={"producer": "p", "batch_id": k, "events": batch(k)})
        assert response.status_code == 200 and not response.json()["duplicate"], response.text
    return acked, refused
