"""A damaged store is never served: random bytes inside it, a truncated file and a
zero-length file each stop ``scemon serve`` with exit status 4 and a message naming the
file and the fix; ``--init`` starts an empty store only in place of a zero-length file."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from service.cli.serve import STORE_UNUSABLE
from service.server.process import free_port
from service.server.store import STORE_FILE
from tests.service.conftest import StartServer
from tests.service.server.feeds import QUERIES, make_batches

pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def good_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store a real server wrote: queries, 40 batches, matches; stopped cleanly."""
    from tests.service.conftest import Server

    data = tmp_path_factory.mktemp("good") / "data"
    server = Server(data, {})
    server.start()
    client = server.client()
    client.register_bulk([{"name": name, "text": text} for name, text in QUERIES])
    for batch_id, events in make_batches(seed=5, n_batches=40, size=50):
        client.post_events("p", batch_id, events)
    server.stop()
    return data


def serve(data: Path, *extra: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``scemon serve`` on ``data``; a server that starts serving is stopped by the
    timeout (and the test then fails on its status)."""
    command = [sys.executable, "-m", "service.cli", "serve", "--port", str(free_port()), "--data", str(data)]
    try:
        return subprocess.run([*command, *extra], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as err:
        out = err.stderr.decode() if isinstance(err.stderr, bytes) else str(err.stderr)
        return subprocess.CompletedProcess(command, -1, "", f"still serving after {timeout:.0f} s: {out}")


def damaged(good: Path, tmp_path: Path, harm: Callable[[Path], None]) -> Path:
    data = tmp_path / "data"
    shutil.copytree(good, data)
    harm(data / STORE_FILE)
    return data


def random_bytes_inside(path: Path) -> None:
    size = path.stat().st_size
    assert size > 64 * 1024
    with path.open("r+b") as fh:
        fh.seek(size // 2)
        fh.write(random.Random(8).randbytes(8 * 1024))


def truncated(path: Path) -> None:
    with path.open("r+b") as fh:
        fh.truncate(path.stat().st_size // 2)


def zero_length(path: Path) -> None:
    path.write_bytes(b"")


@pytest.mark.parametrize(
    ("harm", "says"),
    [
        (random_bytes_inside, "is damaged"),
        (truncated, "is damaged"),
        (zero_length, "is empty (0 bytes)"),
    ],
)
def test_a_damaged_store_stops_the_server_naming_the_file_and_the_fix(
    good_store: Path, tmp_path: Path, harm: Callable[[Path], None], says: str
) -> None:
    data = damaged(good_store, tmp_path, harm)
    done = serve(data)
    assert done.returncode == STORE_UNUSABLE, done.stderr
    message = done.stderr.strip()
    assert message.startswith("error: ") and len(message.splitlines()) == 1, message
    assert str(data / STORE_FILE) in message and says in message
    assert "restore it from a backup" in message
    if harm is zero_length:
        assert "--init" in message


def test_init_starts_an_empty_store_only_in_place_of_a_zero_length_file(
    good_store: Path, tmp_path: Path, start_server: StartServer
) -> None:
    data = damaged(good_store, tmp_path, zero_length)
    server = start_server(data=data, SCEMON_INIT="1")
    assert server.client().queries() == []
    assert httpx.get(f"{server.url}/v1/matches").json() == {"matches": [], "next_seq": 0}
    server.stop()
    # --init never replaces a store with content: a damaged one is still refused.
    done = serve(damaged(good_store, tmp_path / "other", truncated), "--init")
    assert done.returncode == STORE_UNUSABLE, done.stderr


def test_an_intact_copy_serves_what_it_holds(
    good_store: Path, tmp_path: Path, start_server: StartServer
) -> None:
    data = damaged(good_store, tmp_path, lambda path: None)
    server = start_server(data=data)
    assert [q.name for q in server.client().queries()] == [name for name, _ in QUERIES]
