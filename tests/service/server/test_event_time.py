"""Event time through a real server: a stream shuffled within the allowed lateness gives
the sorted stream's matches; late events are counted and reported (answer, metrics,
stats, a re-sent batch); the reorder buffer survives SIGKILL and its cap answers 503;
far-future events and time advances are refused and change nothing else."""

from __future__ import annotations

import random
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from api.client import ApiError, Client
from ecq.engine import Engine
from ecq.event import Event
from ecq.kernel.make import match_writer
from tests.service.conftest import StartServer
from tests.service.server.feeds import FLUSH, QUERIES

pytestmark = pytest.mark.server

Batch = tuple[str, list[dict[str, Any]]]


def shuffled(seed: int, lateness: float, n: int = 240, size: int = 20) -> list[Batch]:
    """Events in time order, each made late by a delay in ``[0, lateness]`` (they arrive
    in order of ``end + delay``), cut into batches. Times are multiples of 0.25."""
    rng = random.Random(seed)
    events, t = [], 0.0
    for i in range(n):
        t += rng.choice([0.25, 0.5, 1.0])
        event: dict[str, Any] = {
            "id": f"e{i}",
            "src": f"s{rng.randrange(3)}",
            "type": rng.choice("AABBCCD"),
            "start": t,
            "attrs": {"x": rng.randrange(10)},
        }
        if rng.random() < 0.2:
            event["end"] = t + rng.choice([0.5, 2.0])
        events.append(event)
    steps = int(lateness * 4)
    arrival = sorted(events, key=lambda e: (_end(e) + rng.randrange(steps + 1) / 4, rng.random()))
    return [(f"b{k}", arrival[k : k + size]) for k in range(0, n, size)]


def _end(e: dict[str, Any]) -> float:
    return float(e.get("end", e["start"]))


def sorted_matches(batches: list[Batch], flush: float, per_batch: bool = False) -> list[dict[str, Any]]:
    """What one engine gives for the stream sorted by ``(end, start)`` (ties by arrival),
    in the server's wire form; ``per_batch``: each batch sorted on its own (no lateness)."""
    engine = Engine()
    for name, text in QUERIES:
        engine.register(name, text)

    def key(e: dict[str, Any]) -> tuple[float, float]:
        return (_end(e), e["start"])

    if per_batch:
        in_order = [e for _, events in batches for e in sorted(events, key=key)]
    else:
        in_order = sorted([e for _, events in batches for e in events], key=key)
    found = engine.process([Event.from_dict(e) for e in in_order]) + engine.advance_time(flush)
    write = match_writer()
    return [orjson.loads(orjson.dumps({**write(m), "seq": seq})) for seq, m in enumerate(found)]


def post_all(client: Client, batches: list[Batch]) -> list[int]:
    """Post every batch; the late count of each."""
    return [client.post_events("job", batch_id, events).late for batch_id, events in batches]


def metric(client: Client, name: str) -> float:
    for line in client.metrics().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def register(client: Client) -> None:
    client.register_bulk([{"name": name, "text": text} for name, text in QUERIES])


def test_a_stream_shuffled_within_the_lateness_gives_the_sorted_streams_matches(
    start_server: StartServer,
) -> None:
    server = start_server(SCEMON_LATENESS="5")
    client = server.client()
    register(client)
    batches = shuffled(seed=3, lateness=5.0)
    lates = post_all(client, batches[:6])
    stats = client.stats()
    assert stats.lateness == 5.0 and stats.held > 0
    assert stats.clock is not None and stats.released_clock is not None
    assert stats.released_clock < stats.clock - 5.0
    assert metric(client, "scemon_held_events") == stats.held
    lates += post_all(client, batches[6:])
    assert lates == [0] * len(batches)
    assert client.advance_time(FLUSH).released_clock == FLUSH - 5.0
    assert client.stats().held == 0
    got = client.all_matches()
    assert got == sorted_matches(batches, FLUSH - 5.0)
    assert len(got) > 100

    # Without the lateness the same posts lose matches, and say so.
    plain = start_server()
    plain_client = plain.client()
    register(plain_client)
    assert sum(post_all(plain_client, batches)) > 0
    plain_client.advance_time(FLUSH)
    assert len(plain_client.all_matches()) < len(got)


def test_late_events_are_counted_and_reported_and_a_resent_batch_repeats_them(
    start_server: StartServer,
) -> None:
    server = start_server(SCEMON_LATENESS="2")
    client = server.client()
    client.register("ab", "SEQ(A, B) WITHIN 100 s MODE ALL")
    first = client.post_events(
        "p", 1, [{"id": "a10", "src": 1, "type": "A", "start": 10}, {"src": 1, "type": "B", "start": 20}]
    )
    assert (first.late, first.late_events, client.stats().released_clock) == (0, [], 10.0)
    late_batch = [
        {"src": 1, "type": "B", "start": 19},  # held: within the lateness, not late
        {"id": "a1", "src": 1, "type": "A", "start": 1},  # 9 s below the released clock
        {"src": 2, "type": "A", "start": 3.5},  # no id: named "2:2"
    ]
    answer = client.post_events("p", 2, late_batch)
    assert answer.late == 2
    assert [(x.index, x.id, x.by) for x in answer.late_events] == [(1, "a1", 9.0), (2, "2:2", 6.5)]
    assert metric(client, "scemon_late_events_total") == 2.0
    stats = client.stats()
    assert stats.late_events == 2
    # Applied all the same: a1 is stored and matches the B at 20 once it is released.
    client.advance_time(30.0)
    assert sorted(m["events"] for m in client.all_matches()) == [
        ["a1", "1:1"],
        ["a1", "2:0"],
        ["a10", "1:1"],
        ["a10", "2:0"],
    ]
    again = client.post_events("p", 2, late_batch, late_events=1)
    assert again.duplicate and again.late == 2
    assert [x.id for x in again.late_events] == ["a1"]
    assert client.post_events("p", 3, [{"src": 1, "type": "A", "start": 0}], late_events=0).late_events == []
    assert client.stats().late_events == 3


def test_the_buffer_survives_sigkill_without_losing_or_repeating_a_match(start_server: StartServer) -> None:
    server = start_server(SCEMON_LATENESS="5", SCEMON_TRIM_EVERY="1")
    client = server.client()
    register(client)
    batches = shuffled(seed=5, lateness=5.0, n=300)
    post_all(client, batches[:8])
    before = client.stats()
    assert before.held > 0
    matches_before = client.all_matches()

    server.kill()
    server.start()
    client = server.client()
    after = client.stats()
    assert (after.held, after.clock, after.released_clock) == (
        before.held,
        before.clock,
        before.released_clock,
    )
    assert client.all_matches() == matches_before
    assert client.post_events("job", batches[7][0], batches[7][1]).duplicate
    post_all(client, batches[8:])
    client.advance_time(FLUSH)
    got = client.all_matches()
    assert [m["seq"] for m in got] == list(range(len(got)))
    assert got == sorted_matches(batches, FLUSH - 5.0)


def test_a_new_lateness_at_restart_is_logged_and_releases_what_it_no_longer_holds(
    start_server: StartServer,
) -> None:
    server = start_server(SCEMON_LATENESS="10")
    client = server.client()
    client.register("ab", "SEQ(A, B) WITHIN 5 s")
    client.post_events("p", 1, [{"src": 1, "type": "A", "start": 1}, {"src": 1, "type": "B", "start": 2}])
    assert client.stats().held == 2 and client.all_matches() == []
    server.stop()
    assert server.env is not None
    server.env["SCEMON_LATENESS"] = "0"
    server.start()
    client = server.client()
    stats = client.stats()
    assert (stats.lateness, stats.held, stats.released_clock) == (0.0, 0, 2.0)
    assert [m["events"] for m in client.all_matches()] == [["1:0", "1:1"]]
    server.restart()
    assert len(server.client().all_matches()) == 1
    with closing(sqlite3.connect(Path(server.data) / "scemon.sqlite3")) as db:
        kinds = [row[0] for row in db.execute("SELECT time FROM ops WHERE kind = 'lateness' ORDER BY pos")]
    assert kinds == [10.0, 0.0]


def test_the_buffers_cap_answers_503_with_retry_after_and_drops_nothing(start_server: StartServer) -> None:
    server = start_server(SCEMON_LATENESS="100", SCEMON_BUFFER_MAX="5")
    client = server.client()
    client.register("ab", "SEQ(A, B) WITHIN 1000 s")
    client.post_events("p", 1, [{"src": 1, "type": "A", "start": float(t)} for t in range(4)])
    refused = [{"src": 1, "type": "B", "start": 5.0 + t} for t in range(3)]
    body = {"producer": "p", "batch_id": 2, "events": refused}
    response = httpx.post(f"{server.url}/v1/events", json=body)
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    assert "cap of 5" in response.json()["detail"]["message"]
    stats = client.stats()
    assert (stats.held, stats.held_max, stats.buffer_full, stats.clock) == (4, 5, 1, 3.0)
    assert metric(client, "scemon_buffer_full_total") == 1.0
    # A batch that moves time on releases what it passes, and fits.
    assert not client.post_events("p", 3, [{"src": 1, "type": "B", "start": 200.0}]).duplicate
    assert client.stats().held == 1
    assert not client.post_events("p", 2, refused).duplicate  # the refused batch, later
    client.advance_time(1000.0)
    # RECENT: each B with the latest A before it.
    assert [m["events"] for m in client.all_matches()] == [["1:3", f"2:{k}"] for k in range(3)] + [
        ["1:3", "3:0"]
    ]


def test_a_far_future_event_is_refused_and_changes_no_other_events_matches(start_server: StartServer) -> None:
    batches = shuffled(seed=9, lateness=0.0, n=200)
    server = start_server()
    client = server.client()
    register(client)
    post_all(client, batches[:4])
    poisoned = list(batches[4][1])
    poisoned[3] = {"id": "bad", "src": "s1", "type": "A", "start": 1.7e11}  # far ahead
    poisoned.append({"src": "s2", "type": "B", "start": 1.7e11 + 5})
    with pytest.raises(ApiError) as caught:
        client.post_events("job", batches[4][0], poisoned)
    err = caught.value
    assert err.status == 422 and err.detail["index"] == 3 and err.detail["indexes"] == [3, len(poisoned) - 1]
    assert err.detail["field"] == "end" and "event 3 (id 'bad')" in err.message and "86400 s" in err.message
    assert client.stats().refused_ahead == 2 and metric(client, "scemon_refused_ahead_total") == 2.0
    # The producer drops the refused events and posts the rest under the same id.
    kept = [e for i, e in enumerate(poisoned) if i not in err.detail["indexes"]]
    assert client.post_events("job", batches[4][0], kept).late == 0
    post_all(client, batches[5:])
    client.advance_time(FLUSH)
    clean = [(batch_id, kept if batch_id == batches[4][0] else events) for batch_id, events in batches]
    assert client.all_matches() == sorted_matches(clean, FLUSH, per_batch=True)


def test_a_far_future_event_ending_an_ordered_arrow_batch_is_refused(start_server: StartServer) -> None:
    """An Arrow batch in (end, start) order, as the Spark job posts it, is checked by its
    last event's end: a far-future one there is refused and named like any other."""
    from tests.service.server.feeds import arrow_table

    client = start_server().client()
    register(client)
    events = [{"src": "s1", "type": "A", "start": float(t)} for t in range(1, 6)]
    assert client.post_arrow("spark", 1, arrow_table(events)).accepted == 5
    poisoned = [*events[:3], {"id": "ms", "src": "s1", "type": "B", "start": 1.7e11}]
    with pytest.raises(ApiError) as caught:
        client.post_arrow("spark", 2, arrow_table(poisoned))
    err = caught.value
    assert err.status == 422 and err.detail["indexes"] == [3] and "event 3 (id 'ms')" in err.message
    assert client.stats().clock == 5.0 and client.stats().refused_ahead == 1


def test_an_empty_engine_is_guarded_by_the_wall_clock(start_server: StartServer) -> None:
    client = start_server().client()
    with pytest.raises(ApiError) as caught:
        client.post_events("p", 1, [{"src": 1, "type": "A", "start": 1.7e11}])
    assert caught.value.status == 422 and "wall clock" in caught.value.message
    assert client.stats().clock is None
    with pytest.raises(ApiError) as caught:
        client.advance_time(9e11)
    assert caught.value.status == 422 and caught.value.detail["field"] == "time"
    assert client.post_events("p", 2, [{"src": 1, "type": "A", "start": 1.0}]).accepted == 1
    with pytest.raises(ApiError):
        client.advance_time(9e11)
    assert client.stats().clock == 1.0 and client.stats().refused_ahead == 3


def test_a_window_above_the_maximum_is_refused_at_registration(start_server: StartServer) -> None:
    client = start_server().client()
    with pytest.raises(ApiError) as caught:
        client.register("forever", "SEQ(A, B) WITHIN 1e308 seconds")
    assert caught.value.status == 422 and "366 days" in caught.value.message
    assert (caught.value.detail["line"], caught.value.detail["column"]) == (1, 11)
    assert client.queries() == []
