"""A store whose files are read-only when the server starts: ``/readyz`` says
``unwritable`` (not ok), writes are answered 503 saying the store is read-only, and once
the files are writable again writes resume by themselves within seconds.

The tests run as root, whom file modes do not stop; so the server runs as root without
the capabilities that override them (``setpriv --bounding-set -dac_override,...``):
for it, as for any other user, a file of mode 0444 cannot be written. (A read-only
remount cannot stand in: Linux refuses it while a file on it is open for writing; and
``chattr +i`` on a mapped ``-shm`` file makes the next write to it a SIGBUS.)"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.server.process import free_port
from tests.service.conftest import StartServer

pytestmark = pytest.mark.faults

# What root must lose for file modes to hold: overriding and bypassing them.
WITHOUT_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]
RESUME_WITHIN = 20.0  # seconds; the store is probed every second while it cannot write


def as_plain_user() -> list[str]:
    """The command prefix that makes file modes apply to the server."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: file modes cannot be made to apply")
    return WITHOUT_OVERRIDE


def store_files(data: Path) -> list[Path]:
    return [p for p in data.iterdir() if p.name.startswith("scemon.sqlite3")]


@pytest.fixture
def server_on(tmp_path: Path) -> Iterator[object]:
    processes: list[subprocess.Popen[bytes]] = []

    def start(data: Path) -> str:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCEMON_")}
        command = [*as_plain_user(), sys.executable, "-m", "service.cli", "serve", "--port", str(port)]
        with (tmp_path / "server.log").open("ab") as log:
            process = subprocess.Popen(
                [*command, "--data", str(data)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        processes.append(process)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert process.poll() is None, (tmp_path / "server.log").read_text()
            try:
                if httpx.get(f"{url}/readyz", timeout=1).json()["status"] != "starting":
                    return url
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError("the server did not finish starting")

    yield start
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def batch(k: int) -> dict[str, object]:
    return {
        "producer": "p",
        "batch_id": f"b{k}",
        "events": [
            {"src": 1, "type": "A", "start": 10.0 * k},
            {"src": 1, "type": "B", "start": 10.0 * k + 1},
        ],
    }


def test_a_read_only_store_is_not_ready_and_writes_resume_once_writable(
    start_server: StartServer, server_on: object, tmp_path: Path
) -> None:
    first = start_server()
    assert (
        httpx.post(f"{first.url}/v1/queries", json={"name": "q", "text": "SEQ(A, B) WITHIN 5"}).status_code
        == 201
    )
    assert httpx.post(f"{first.url}/v1/events", json=batch(1)).status_code == 200
    first.stop()
    data = first.data
    for path in store_files(data):
        path.chmod(0o444)
    url = server_on(data)  # type: ignore[operator]

    ready = httpx.get(f"{url}/readyz")
    assert ready.status_code == 503, ready.text
    assert ready.json()["status"] == "unwritable" and "read-only" in ready.json()["detail"]
    refused = httpx.post(f"{url}/v1/events", json=batch(2))
    assert refused.status_code == 503 and "read-only" in refused.json()["detail"]["message"]
    assert "Retry-After" in refused.headers
    # Reads go on.
    assert [m["seq"] for m in httpx.get(f"{url}/v1/matches").json()["matches"]] == [0]

    for path in store_files(data):
        path.chmod(0o644)
    made_writable = time.monotonic()
    while True:
        answer = httpx.post(f"{url}/v1/events", json=batch(2))
        if answer.status_code == 200:
            break
        assert answer.status_code == 503, answer.text
        assert time.monotonic() - made_writable < RESUME_WITHIN, "writes did not resume"
        time.sleep(0.25)
    print(f"writes resumed {time.monotonic() - made_writable:.1f} s after the files were made writable")
    assert httpx.get(f"{url}/readyz").status_code == 200
    assert [m["seq"] for m in httpx.get(f"{url}/v1/matches").json()["matches"]] == [0, 1]
    assert "writes again: serving resumed" in (tmp_path / "server.log").read_text()
