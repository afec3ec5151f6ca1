"""Every stored row carries a checksum, so damage that ``PRAGMA quick_check`` cannot see
is never served: random bytes in the middle of a real store, or a digit of a match's
``start`` changed (valid UTF-8, valid JSON), are refused at start or, found while
serving, answered 503 naming the damaged seqs and reported on ``/readyz``; never 200
with altered content, never 500. A store of an older build (no checksums) still opens
and gets them."""

from __future__ import annotations

import random
import shutil
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from service.cli.serve import STORE_UNUSABLE
from service.server.store import CHECKED, STORE_FILE
from tests.service.conftest import Server, StartServer
from tests.service.faults.test_corrupt_store import serve
from tests.service.server.feeds import QUERIES, make_batches

pytestmark = pytest.mark.faults


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, dict[str, Any]]]:
    """A store a real server wrote (queries, 40 batches, matches), stopped cleanly, and
    every match it served, by seq."""
    data = tmp_path_factory.mktemp("written") / "data"
    server = Server(data, {})
    server.start()
    client = server.client()
    client.register_bulk([{"name": name, "text": text} for name, text in QUERIES])
    for batch_id, events in make_batches(seed=5, n_batches=40, size=50):
        client.post_events("p", batch_id, events)
    matches = {m["seq"]: m for m in client.all_matches()}
    server.stop()
    assert len(matches) > 500
    return data, matches


def copy_of(good: Path, tmp_path: Path, name: str = "data") -> Path:
    data = tmp_path / name
    shutil.copytree(good, data)
    return data


def random_bytes(path: Path, seed: int) -> None:
    """64 random bytes somewhere in the middle third of the file."""
    size = path.stat().st_size
    rng = random.Random(seed)
    with path.open("r+b") as fh:
        fh.seek(rng.randrange(size // 3, 2 * size // 3))
        fh.write(rng.randbytes(64))


def changed_digit(path: Path, seed: int) -> None:
    """One digit of a ``"start":`` number changed to another digit: the file stays valid
    UTF-8 and the row valid JSON, only a number differs."""
    raw = bytearray(path.read_bytes())
    size = len(raw)
    at = [i for i in range(size // 4, 3 * size // 4) if raw[i : i + 8] == b'"start":']
    assert at, "no match or event text in the middle of the store"
    rng = random.Random(seed)
    where = rng.choice(at) + 8
    while not chr(raw[where]).isdigit():
        where += 1
    raw[where] = ord(rng.choice([d for d in "0123456789" if ord(d) != raw[where]]))
    path.write_bytes(bytes(raw))


def served_pages(url: str, limit: int = 97) -> tuple[list[dict[str, Any]], list[list[int]]]:
    """Every page of ``GET /v1/matches``: the matches served 200 and the seqs answered
    503 as damaged (the reader then resumes after them). Any other answer fails."""
    got: list[dict[str, Any]] = []
    damaged: list[list[int]] = []
    from_seq = 0
    while True:
        answer = httpx.get(f"{url}/v1/matches", params={"from_seq": from_seq, "limit": limit}, timeout=30)
        if answer.status_code == 503:
            detail = answer.json()["detail"]
            assert "fails its checksum" in detail["message"], detail
            first, after = detail["damaged_seqs"]
            assert from_seq <= first < after, (from_seq, detail)
            if from_seq < first:  # the matches before it, then on past it
                before = httpx.get(
                    f"{url}/v1/matches", params={"from_seq": from_seq, "limit": first - from_seq}
                )
                assert before.status_code == 200, before.text
                got += orjson.loads(before.content)["matches"]
            damaged.append([first, after])
            from_seq = after
            continue
        assert answer.status_code == 200, answer.text
        page = orjson.loads(answer.content)  # always JSON
        got += page["matches"]
        if len(page["matches"]) < limit:
            return got, damaged
        from_seq = page["next_seq"]


def outcome(data: Path, matches: dict[int, dict[str, Any]]) -> str:
    """Start a server on ``data``: "refused" (exit 4 naming the damage), or it serves and
    every match it serves is the one first written ("served")."""
    server = Server(data, {})
    try:
        server.start(timeout=60)
    except RuntimeError as err:
        assert f"status {STORE_UNUSABLE}" in str(err) and "is damaged" in str(err), err
        return "refused"
    try:
        got, damaged = served_pages(server.url)
        for m in got:
            assert m == matches[m["seq"]], f"seq {m['seq']} served altered"
        missing = set(matches) - {m["seq"] for m in got}
        assert all(any(a <= seq < b for a, b in damaged) for seq in missing)
        return "served"
    finally:
        server.stop()


@pytest.mark.parametrize("seed", range(8))
def test_random_bytes_in_the_middle_are_refused_or_never_served(
    written: tuple[Path, dict[int, dict[str, Any]]], tmp_path: Path, seed: int
) -> None:
    good, matches = written
    data = copy_of(good, tmp_path)
    random_bytes(data / STORE_FILE, seed)
    assert outcome(data, matches) in ("refused", "served")


@pytest.mark.parametrize("seed", range(6))
def test_a_changed_digit_in_a_stored_row_is_refused_at_start(
    written: tuple[Path, dict[int, dict[str, Any]]], tmp_path: Path, seed: int
) -> None:
    good, _ = written
    data = copy_of(good, tmp_path)
    changed_digit(data / STORE_FILE, seed)
    done = serve(data)
    assert done.returncode == STORE_UNUSABLE, done.stderr
    message = done.stderr.strip()
    assert str(data / STORE_FILE) in message and "failing their checksum" in message, message
    assert "restore it from a backup" in message


def _alter_block(path: Path, pick: int) -> tuple[int, int]:
    """Change a digit inside a match block through SQLite itself (the file stays sound,
    the row's checksum no longer fits): damage arriving while the server runs."""
    with closing(sqlite3.connect(path, isolation_level=None, timeout=30)) as db:
        blocks = db.execute(
            "SELECT first_seq, next_seq, body FROM match_blocks ORDER BY first_seq"
        ).fetchall()
        first, after, body = blocks[pick]
        text = bytes(body)
        at = text.index(b'"start":') + 8
        digit = b"1" if text[at : at + 1] != b"1" else b"2"
        db.execute(
            "UPDATE match_blocks SET body = ? WHERE first_seq = ?",
            (text[:at] + digit + text[at + 1 :], first),
        )
    return int(first), int(after)


def test_damage_found_while_serving_is_never_served_and_is_reported(
    written: tuple[Path, dict[int, dict[str, Any]]], tmp_path: Path, start_server: StartServer
) -> None:
    good, matches = written
    data = copy_of(good, tmp_path)
    server = start_server(data=data, SCEMON_SCRUB_EVERY="1")
    assert httpx.get(f"{server.url}/readyz").status_code == 200
    first, after = _alter_block(data / STORE_FILE, 3)

    got, damaged = served_pages(server.url)
    assert damaged == [[first, after]]
    assert [m["seq"] for m in got] == [seq for seq in sorted(matches) if not first <= seq < after]
    assert all(m == matches[m["seq"]] for m in got)
    ready = httpx.get(f"{server.url}/readyz")
    assert ready.status_code == 503 and ready.json()["status"] == "damaged"
    assert f"seqs {first} to {after - 1}" in ready.json()["detail"]

    # A subscriber replaying the log is told where the damage is and where to resume.
    with connect(f"{server.url.replace('http', 'ws')}/v1/matches/ws?from_seq=0") as ws:
        seqs = []
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                seqs.append(orjson.loads(ws.recv())["seq"])
    assert seqs == [seq for seq in sorted(matches) if seq < first]
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
    assert f"from_seq={after}" in closed.value.rcvd.reason

    # The periodic scrub finds damage nobody has read yet.
    later = _alter_block(data / STORE_FILE, -2)
    deadline = time.monotonic() + 20
    while f"seqs {later[0]} to" not in httpx.get(f"{server.url}/readyz").text:
        assert time.monotonic() < deadline, "the scrub did not report the damage"
        time.sleep(0.2)
    log = server.log.read_text()
    assert f"the match block of seqs {later[0]} to {later[1] - 1} fails its checksum" in log


def test_a_store_without_checksums_opens_and_gets_them(
    written: tuple[Path, dict[int, dict[str, Any]]], tmp_path: Path
) -> None:
    """A store of an older build: no crc columns. It opens, serves what it holds, gets
    checksums for every row, and from then on damage to it is refused."""
    good, matches = written
    data = copy_of(good, tmp_path)
    path = data / STORE_FILE
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        for table in CHECKED:
            db.execute(f"ALTER TABLE {table} DROP COLUMN crc")
    assert outcome(data, matches) == "served"
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        for table in CHECKED:
            assert db.execute(f"SELECT COUNT(*) FROM {table} WHERE crc IS NULL").fetchone()[0] == 0
            assert db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] > 0
    changed_digit(path, 0)
    assert serve(data).returncode == STORE_UNUSABLE
