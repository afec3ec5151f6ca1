"""Nothing lost on SIGKILL: queries, partial matches, seq, applied batch ids; the event
log trimmed to what the windows can still reach."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import closing

import httpx
import pytest

from api.client import ApiError, SyncSubscription
from service.server.store import ARROW_LOG
from tests.service.conftest import StartServer
from tests.service.server.feeds import FLUSH, QUERIES, Feed, expected, make_batches
from tests.service.server.test_matches import collect, wait_for


def batch_ops(server_data: object) -> int:
    # closing(): a connection's own `with` ends a transaction, it does not close it.
    with closing(sqlite3.connect(f"{server_data}/scemon.sqlite3")) as db:
        return int(db.execute("SELECT COUNT(*) FROM ops WHERE kind = 'batch'").fetchone()[0])


def log_formats(server_data: object) -> set[str]:
    """How the op log holds its batches: Arrow posts as they came, JSON posts as JSON."""
    with closing(sqlite3.connect(f"{server_data}/scemon.sqlite3")) as db:
        bodies = [bytes(row[0]) for row in db.execute("SELECT body FROM ops WHERE kind = 'batch'")]
    return {"arrow" if body.startswith(ARROW_LOG) else "json" for body in bodies}


@pytest.mark.parametrize("trim_every", ["1", "1000"])
def test_sigkill_and_restart_lose_nothing(start_server: StartServer, trim_every: str) -> None:
    # Trimmed after every batch, the restart replays a trimmed log; never trimmed, a log
    # of every batch, in both forms (Arrow posts as they came, JSON ones as JSON).
    server = start_server(SCEMON_TRIM_EVERY=trim_every)
    client = server.client()
    client.register_bulk([{"name": name, "text": text} for name, text in QUERIES])
    # A subscriber that lives through the kill: it reconnects and resumes by seq.
    live: list[dict[str, object]] = []
    collect(SyncSubscription(server.url, idle_timeout=30, max_retries=100), live)
    feed = Feed()
    batches = make_batches(seed=11, n_batches=12, size=30)
    for k, (batch_id, events) in enumerate(batches[:7]):
        feed.post(client, "job", batch_id, events, arrow=k % 2 == 0)
    before = client.all_matches()
    killed_at = len(feed.arrivals)
    if trim_every == "1":
        assert batch_ops(server.data) < 7  # old batches were trimmed
    else:
        assert batch_ops(server.data) == 7 and log_formats(server.data) == {"arrow", "json"}

    server.kill()
    server.start()
    client = server.client()
    assert [q.name for q in client.queries()] == [name for name, _ in QUERIES]
    assert client.all_matches() == before
    # A batch the producer replays after the crash is still recognised.
    replayed = client.post_events("job", batches[6][0], batches[6][1])
    assert replayed.duplicate
    for k, (batch_id, events) in enumerate(batches[7:]):
        feed.post(client, "job", batch_id, events, arrow=k % 2 == 1)
    client.advance_time(FLUSH)

    matches = client.all_matches()
    assert [m["seq"] for m in matches] == list(range(len(matches)))  # seq continued
    assert matches[: len(before)] == before
    assert feed.as_arrivals(matches) == expected(QUERIES, feed.arrivals)

    def indexes(entries: list[object]) -> list[int]:
        flat: list[int] = []
        for e in entries:
            flat += indexes(e) if isinstance(e, list) else [feed.index[e]]
        return flat

    wait_for(live, len(matches))
    assert live == matches

    across = [m for m in matches[len(before) :] if min(indexes(m["events"])) < killed_at]
    assert across, "some partial match begun before the kill completed after it"


def test_a_batch_cut_by_the_kill_is_applied_once(start_server: StartServer) -> None:
    server = start_server()
    client = server.client()
    client.register("bd", "OR(B, D)")
    events = [{"src": i % 7, "type": "ABCD"[i % 4], "start": float(i)} for i in range(60_000)]
    outcome: list[object] = []

    def post() -> None:
        try:
            outcome.append(
                httpx.post(
                    f"{server.url}/v1/events",
                    json={"producer": "p", "batch_id": "big", "events": events},
                    timeout=60,
                )
            )
        except httpx.TransportError as err:
            outcome.append(err)

    thread = threading.Thread(target=post)
    thread.start()
    time.sleep(0.3)  # the batch takes about a second: killed while it is applied
    server.kill()
    thread.join(timeout=60)
    server.start()
    client = server.client()
    # The producer retries: applied now, or recognised as applied before the kill.
    result = client.post_events("p", "big", events)
    assert result.accepted in (0, len(events))
    matches = client.all_matches(page=10_000)
    assert len(matches) == len(events) // 2
    assert [m["seq"] for m in matches] == list(range(len(matches)))
    assert client.post_events("p", "big", events).duplicate


def test_a_query_deleted_before_the_kill_stays_deleted(start_server: StartServer) -> None:
    server = start_server(SCEMON_TRIM_EVERY="1")
    client = server.client()
    client.register("keep", "SEQ(A, B) WITHIN 5 s")
    client.register("gone", "OR(A)")
    client.post_events("p", 1, [{"src": 1, "type": "A", "start": 1}])
    client.delete_query("gone")
    for t in range(2, 40, 4):  # old batches trimmed; the registration of `keep` stays
        client.post_events("p", t, [{"src": 2, "type": "C", "start": float(t)}])
    client.post_events("p", 100, [{"src": 1, "type": "A", "start": 100}])
    server.kill()
    server.start()
    client = server.client()
    assert [q.name for q in client.queries()] == ["keep"]
    assert client.post_events("p", 101, [{"src": 1, "type": "B", "start": 101}]).matches == 1
    with pytest.raises(ApiError) as caught:
        client.query("gone")
    assert caught.value.status == 404
