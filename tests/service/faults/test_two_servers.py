"""Two servers on one ``--data``: the second exits at once, with a one-line message
naming the holder (its pid and host) and status 5; the first serves on, and once it is
gone (even by SIGKILL, which leaves no stale lock) the folder can be served again."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from service.cli.serve import FOLDER_IN_USE
from service.server.process import free_port
from tests.service.conftest import StartServer

pytestmark = pytest.mark.faults


def second_server(data: object, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCEMON_")}
    command = [sys.executable, "-m", "service.cli", "serve", "--port", str(free_port()), "--data", str(data)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


def test_a_second_server_on_the_same_data_exits_naming_the_first(start_server: StartServer) -> None:
    first = start_server()
    assert first.process is not None
    query = {"name": "q", "text": "SEQ(A, B) WITHIN 10"}
    assert httpx.post(f"{first.url}/v1/queries", json=query).status_code == 201
    started = time.monotonic()
    done = second_server(first.data)
    assert done.returncode == FOLDER_IN_USE, done.stderr
    lines = done.stderr.strip().splitlines()
    error = [line for line in lines if line.startswith("error:")]
    assert len(error) == 1, done.stderr
    assert f"pid {first.process.pid}" in error[0] and socket.gethostname() in error[0]
    assert str(first.data) in error[0]
    assert time.monotonic() - started < 30  # at once: it never served (the bound is the interpreter's start)
    # The first serves on, its state untouched.
    assert httpx.get(f"{first.url}/v1/queries").json()["queries"][0]["name"] == "q"


def test_the_folder_is_free_again_after_its_server_is_killed(start_server: StartServer) -> None:
    first = start_server()
    first.kill()
    again = first.start()
    assert httpx.get(f"{again.url}/readyz").status_code == 200
