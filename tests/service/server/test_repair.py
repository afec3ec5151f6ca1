"""``scemon admin repair-clock`` on a store poisoned the old way: a server without the
far-future bound takes one event far ahead and a time advance far ahead (both within
the accepted times, TIME_MAX), every later
event is late; after the repair the server matches again as if neither had come."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests import reference
from tests.service.conftest import StartServer, scemon
from tests.service.server.feeds import FLUSH, QUERIES, Feed, make_batches, normal, query_json

pytestmark = pytest.mark.server


def reference_after(feed: Feed, first: int) -> list[dict[str, Any]]:
    """The reference's matches completed by the events from arrival ``first`` on."""
    found = reference.evaluate_queries([(name, query_json(text)) for name, text in QUERIES], feed.arrivals)
    return [normal(m) for m in found if m["trigger"] >= first]


def test_repair_clock_takes_out_the_poison_and_the_server_matches_again(start_server: StartServer) -> None:
    # The old way: no bound on the future.
    server = start_server(SCEMON_MAX_AHEAD="inf")
    client = server.client()
    client.register_bulk([{"name": name, "text": text} for name, text in QUERIES])
    batches = make_batches(seed=21, n_batches=12, size=30)
    feed = Feed()
    # Arrow posts (logged as they came) and JSON ones: the repair reads both.
    for k, (batch_id, events) in enumerate(batches[:4]):
        feed.post(client, "job", batch_id, events, arrow=k % 2 == 0)
    poison = {"id": "ms", "src": "s1", "type": "A", "start": 1.7e11}
    client.post_events("job", batches[4][0], [*batches[4][1], poison])
    feed.record(batches[4][0], batches[4][1])
    client.advance_time(9e11)
    lates = []
    for batch_id, events in batches[5:8]:
        lates.append(client.post_events("job", batch_id, events).late)
        feed.record(batch_id, events)
    assert lates == [30, 30, 30]  # every later event is late
    poisoned = client.stats()
    assert poisoned.clock == 9e11
    seen = len(client.all_matches())
    server.stop()

    dry = scemon("admin", "repair-clock", "--data", server.data, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would take out event 'ms'" in dry.stdout and "nothing changed" in dry.stderr
    result = scemon("admin", "repair-clock", "--data", server.data)
    assert result.returncode == 0, result.stderr
    assert "took out event 'ms' (end 1.7e+11)" in result.stdout
    assert "took out the time advance to 9e+11" in result.stdout
    assert "1 events and 1 time advances taken out; clock 9e+11 ->" in result.stderr
    again = scemon("admin", "repair-clock", "--data", server.data)
    assert again.returncode == 0 and "nothing to repair" in again.stderr

    assert server.env is not None
    del server.env["SCEMON_MAX_AHEAD"]
    server.start()
    client = server.client()
    repaired = client.stats()
    last_end = max(float(e.get("end", e["start"])) for _, events in batches[:8] for e in events)
    assert repaired.clock == last_end and repaired.released_clock == last_end
    first = len(feed.arrivals)
    for batch_id, events in batches[8:]:
        assert feed.post(client, "job", batch_id, events, arrow=False) >= 0
    client.advance_time(FLUSH)
    after = client.all_matches()[seen:]
    assert after and feed.as_arrivals(after) == reference_after(feed, first)


def test_repair_clock_names_a_folder_without_a_store(tmp_path: Path) -> None:
    result = scemon("admin", "repair-clock", "--data", tmp_path)
    assert result.returncode == 1 and "no scemon store there" in result.stderr


def test_a_healthy_store_is_left_alone(start_server: StartServer) -> None:
    server = start_server()
    client = server.client()
    client.post_events("p", 1, [{"src": 1, "type": "A", "start": 5.0}])
    client.advance_time(7.0)
    server.stop()
    result = scemon("admin", "repair-clock", "--data", server.data)
    assert result.returncode == 0 and "nothing to repair" in result.stderr
    with closing(sqlite3.connect(Path(server.data) / "scemon.sqlite3")) as db:
        meta = dict(db.execute("SELECT key, value FROM meta"))
    assert (float(meta["clock"]), float(meta["observed"])) == (7.0, 7.0)
