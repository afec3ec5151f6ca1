"""A server restarted from the snapshot of its queries (service.server.snapshot) serves
what one that never died serves: SIGKILL at random moments while a producer posts, each
restart loading the queries from the snapshot and replaying the retained window, gives
the matches of one uninterrupted engine. A snapshot that cannot stand for the log — of
another build, damaged, of another store, or older than a trim that dropped some of the
ops it stands for — is not read: the server compiles every query again (and says why),
with the same matches, and writes a new one."""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from service.server.snapshot import MAGIC, SNAPSHOT_FILE
from tests.service.conftest import Server, StartServer
from tests.service.faults.test_kill import Resender, kill_while_sending
from tests.service.faults.test_kill_restart import Twin, make_batch, post, texts, wire

pytestmark = pytest.mark.faults

QUERIES = {
    "seq": "SEQ(A, B) WITHIN 30 s",
    "cond": "SEQ(A a, B b) WHERE a.v < b.v WITHIN 30 s MODE ALL",
    "neg": "SEQ(A, !C, B) WITHIN 20 s",
    "trail": "SEQ(A, B, !C) WITHIN 10 s",
    "kleene": "SEQ(A a, B+ b[], C c) WHERE count(b) >= 2 WITHIN 30 s RETURN count(b) AS n",
    "conj": "AND(A, B, C) WITHIN 20 s",
    "nested": "AND(A, (SEQ(B, C))) WITHIN 20 s",
    "exclusive": "SEQ(A, B) WITHIN 30 s CONSUME EXCLUSIVE",
    "keyed": "SEQ(A, B) PARTITION BY k WITHIN 30 s",
    "derived": "SEQ(@seq s, C) WITHIN 60 s",
    "single": "A WHERE A.v > 5",
}
N_BATCHES = 40
KILLS = 4

_READ = re.compile(r"the snapshot \S+ read in")
_WRITTEN = re.compile(r"the snapshot \S+ written in")
_NOT_USED = re.compile(r"the snapshot \S+ is not used \(([^\n]*)\): every stored query is compiled again")


def log_since(server: Server, offset: int) -> str:
    return server.log.read_bytes()[offset:].decode(errors="replace")


def restart(server: Server) -> str:
    """SIGKILL the server and start it again; what it logged while starting."""
    server.kill()
    offset = server.log.stat().st_size
    server.start()
    return log_since(server, offset)


def start(start_server: StartServer, twin: Twin, queries: dict[str, str]) -> Server:
    """A server on a new store, given ``queries`` before any event (as is ``twin``), and
    logging at info (what the snapshot does is logged there)."""
    server = start_server(SCEMON_TRIM_EVERY="4")
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for name, text in queries.items():
            assert http.post("/v1/queries", json={"name": name, "text": text}).status_code == 201
            twin.register(name, text)
    server.log_level = "info"
    return server


def test_sigkill_mid_stream_restarts_from_the_snapshot_with_the_same_matches(
    start_server: StartServer,
) -> None:
    rng = random.Random(3737)
    batches = [make_batch(k, rng) for k in range(N_BATCHES)]
    twin = Twin()
    server = start(start_server, twin, QUERIES)
    with httpx.Client(base_url=server.url, timeout=60) as http:
        before = texts(http)
        for k in range(4):
            post(http, k, batches[k])
    # The first restart compiles the queries and writes the snapshot: no start had
    # rebuilt the engine from this log before.
    started = restart(server)
    assert _WRITTEN.search(started), started
    assert (server.data / SNAPSHOT_FILE).exists()
    offset = server.log.stat().st_size
    # Then SIGKILL at random moments while a producer posts (and resends what was not
    # acknowledged): every restart reads the snapshot and replays the retained window.
    producer = Resender(server.url, batches)  # the first four again: recognised, not applied
    kills = kill_while_sending(server, producer, KILLS, rng)
    # (A producer that ends before the last kill, on a fast machine, ends the kills.)
    assert 1 <= kills <= KILLS and not producer.is_alive() and len(producer.answers) == N_BATCHES
    starts = log_since(server, offset)
    assert len(_READ.findall(starts)) == kills, starts
    assert not _NOT_USED.search(starts), starts
    for events in batches:
        twin.post(events)
    with httpx.Client(base_url=server.url, timeout=60) as http:
        assert texts(http) == before
    got = server.client().all_matches()
    assert {m["query"] for m in twin.matches} == set(QUERIES)  # every query matched: non-vacuous
    assert wire(got) == wire(twin.matches)


def _rewrite(path: Path, header: dict[str, Any] | None = None, flip: int | None = None) -> None:
    """Rewrite the snapshot with fields of its header changed, or a byte of its payload flipped."""
    data = path.read_bytes()
    line_end = data.index(b"\n", len(MAGIC))
    fields = orjson.loads(data[len(MAGIC) : line_end])
    payload = bytearray(data[line_end + 1 :])
    if header:
        fields.update(header)
    if flip is not None:
        payload[flip % len(payload)] ^= 0x40
    path.write_bytes(MAGIC + orjson.dumps(fields) + b"\n" + bytes(payload))


def _other_store_snapshot(start_server: StartServer, tmp_path: Path) -> Path:
    """A snapshot written for another store (other queries): saved aside."""
    other = start(start_server, Twin(), {"x": "SEQ(B, A) WITHIN 5 s", "y": "SEQ(C, C) WITHIN 5 s"})
    assert _WRITTEN.search(restart(other))
    saved = tmp_path / "other.snapshot"
    shutil.copy(other.data / SNAPSHOT_FILE, saved)
    other.stop()
    return saved


# What the server says of each (its reason for not reading the snapshot).
DAMAGES = {
    "version": "another build of the engine",
    "format": "of format 0",
    "checksum": "fails its checksum",
    "cut": "cut short",
    "other store": "not the ones it stands for",
    "trimmed": "some were trimmed",
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_snapshot_that_cannot_stand_for_the_log_is_not_read(
    start_server: StartServer, tmp_path: Path, damage: str
) -> None:
    rng = random.Random(hash(damage) & 0xFFFF)
    batches = [make_batch(k, rng) for k in range(12)]
    twin = Twin()
    # Without the policy: a query that uses events up keeps the whole log (no trim).
    queries = {name: text for name, text in QUERIES.items() if name != "exclusive"}
    if damage == "trimmed":
        # Registered and deleted before any event: a trim drops the pair from the log,
        # which the snapshot still stands for.
        queries["gone"] = "SEQ(C, B) WITHIN 10 s"
    server = start(start_server, twin, queries)
    if damage == "trimmed":
        with httpx.Client(base_url=server.url, timeout=60) as http:
            assert http.delete("/v1/queries/gone").status_code == 204
            twin.unregister("gone")
    other = _other_store_snapshot(start_server, tmp_path) if damage == "other store" else None
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for k in range(3):
            post(http, k, batches[k])
            twin.post(batches[k])
    assert _WRITTEN.search(restart(server))
    path = server.data / SNAPSHOT_FILE
    with httpx.Client(base_url=server.url, timeout=60) as http:
        # Past the trim (every fourth batch): the batches before the window go, and with
        # them the deleted query's registration and deletion.
        for k in range(3, 9):
            post(http, k, batches[k])
            twin.post(batches[k])
    server.kill()
    if damage == "version":
        _rewrite(path, header={"code": "engine-of-another-build"})
    elif damage == "format":
        _rewrite(path, header={"format": 0})
    elif damage == "checksum":
        _rewrite(path, flip=len(path.read_bytes()) // 2)
    elif damage == "cut":
        path.write_bytes(path.read_bytes()[:-1000])
    elif damage == "other store":
        assert other is not None
        shutil.copy(other, path)
    offset = server.log.stat().st_size
    server.start()
    started = log_since(server, offset)
    reason = _NOT_USED.search(started)
    assert reason is not None, started
    assert DAMAGES[damage] in reason.group(1), reason.group(1)
    assert not _READ.search(started)
    assert _WRITTEN.search(started)  # a new one, for the log as it is
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for k in range(9, 12):
            post(http, k, batches[k])
            twin.post(batches[k])
    got = server.client().all_matches()
    assert len(twin.matches) > 20
    assert wire(got) == wire(twin.matches)
    # The new snapshot is read by the next start, with the same matches still.
    assert _READ.search(restart(server))
    assert wire(server.client().all_matches()) == wire(twin.matches)


_READ_PART = re.compile(r"the snapshot \S+ read in [0-9.]+ s: \d+ queries, for (\d+) of the (\d+) ops before")


def test_a_snapshot_of_the_first_ops_of_a_longer_head_is_read_for_those(start_server: StartServer) -> None:
    """A query registered after some batches joins the log's head once they are trimmed:
    the snapshot, written before, stands for the ops before it; the start reads it for
    those, compiles the new query, and writes a snapshot of the whole head."""
    rng = random.Random(373)
    batches = [make_batch(k, rng) for k in range(16)]
    twin = Twin()
    first = {name: QUERIES[name] for name in ("seq", "cond", "neg", "kleene", "keyed")}
    server = start(start_server, twin, first)
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for k in range(3):
            post(http, k, batches[k])
            twin.post(batches[k])
    assert _WRITTEN.search(restart(server))
    with httpx.Client(base_url=server.url, timeout=60) as http:
        assert http.post("/v1/queries", json={"name": "later", "text": QUERIES["trail"]}).status_code == 201
        twin.register("later", QUERIES["trail"])
        for k in range(3, 13):  # trims (every fourth) drop the batches before "later"
            post(http, k, batches[k])
            twin.post(batches[k])
    started = restart(server)
    part = _READ_PART.search(started)
    assert part is not None, started
    assert int(part.group(1)) == len(first) and int(part.group(2)) == len(first) + 1
    assert _WRITTEN.search(started)
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for k in range(13, 16):
            post(http, k, batches[k])
            twin.post(batches[k])
    assert {m["query"] for m in twin.matches} == {*first, "later"}
    assert wire(server.client().all_matches()) == wire(twin.matches)
    # The whole head now: read for all its ops.
    part = _READ_PART.search(restart(server))
    assert part is not None and part.group(1) == part.group(2)
    assert wire(server.client().all_matches()) == wire(twin.matches)
