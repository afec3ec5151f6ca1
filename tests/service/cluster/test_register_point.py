"""One registration at one point of the stream on a live cluster (docs/architecture.md,
"Registering and deleting at one point of the stream"): two shards under a job posting batch after
batch take a registration in the middle of the stream, and their matches are exactly
one service's that registered the same queries at the same event time on the same
stream — partial matches of a query keyed by another attribute, and a trailing
negation, included."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from api.cluster import Cluster
from api.spark_sink import ServiceSink
from ecq.language import parse_queries, to_json
from tests.service.cluster.conftest import Job, StartShards
from tests.service.cluster.test_keyed_shards import QUERIES, register, stream, table
from tests.service.conftest import Server

# Registered mid-stream: by feed (the source), by symbol (a key the job already routes
# TRADE events by), and a trailing negation whose matches wait for their window.
LATE = """
QUERY late_rise
PATTERN SEQ(TRADE a, TRADE b)
WHERE b.price > a.price + 3
WITHIN 30 s

QUERY late_symbol_dip
PATTERN SEQ(TRADE a, TRADE b)
PARTITION BY symbol
WHERE b.price < a.price - 3
WITHIN 40 s

QUERY late_quiet
PATTERN SEQ(TRADE a, !TRADE b)
WHERE a.price > 105
WITHIN 15 s
"""
BATCH = 50
LEAD = 6 * BATCH  # event seconds: the stream has one event a second
Seen = tuple[str, str, tuple[str, ...]]


def bodies(text: str) -> list[dict[str, Any]]:
    return [{"name": q.name, "pattern": to_json(q)} for q in parse_queries(text)]


def seen(server: Server) -> list[Seen]:
    client = server.client()
    return [(m["query"], str(m["src"]), tuple(map(str, m["events"]))) for m in client.all_matches()]


def finish(server: Server, events: list[dict[str, Any]]) -> list[Seen]:
    server.client().advance_time(events[-1]["start"] + 86_000)
    return seen(server)


def test_a_registration_mid_stream_gives_one_services_matches(
    tmp_path: Path, start_shards: StartShards
) -> None:
    events = stream(2400, seed=29)
    shards = start_shards(2)
    urls = [s.url for s in shards]
    try:
        for server in shards:
            register(server, QUERIES)
        job = Job(urls, events, BATCH).start()
        job.wait_for(8)
        with Cluster(urls) as cluster:
            # Six batches of event time ahead: the registration reaches both shards
            # before their streams do, even on a loaded machine. (At the next instant,
            # a shard's stream can pass it first; the retry at a later time is then all
            # or none, but a shard that had installed it meanwhile has matched.)
            infos = cluster.register_bulk(bodies(LATE), lead=LEAD)
        at = infos[0].at
        assert at is not None and all(i.at == at for i in infos)
        registered_by = len(job.done)
        job.join()
        batches = job.batches
        assert registered_by < batches - 2, "the registration did not land mid-stream"
        got = [m for server in shards for m in finish(server, events)]
        per_shard = [Counter(m[0] for m in finish(server, events)) for server in shards]
    finally:
        for server in shards:
            server.stop()

    # The reference: one service, the late queries registered at the same event time.
    single = Server(tmp_path / "single", {"SCEMON_TOKENS": ""})
    try:
        single.start()
        register(single, QUERIES)
        single.client().register_bulk(bodies(LATE), at=at)
        sink = ServiceSink([single.url], "job")
        for b in range(batches):
            sink.post_table(table(events[b * BATCH : (b + 1) * BATCH]), b)
        sink.close()
        expected = finish(single, events)
    finally:
        single.stop()

    assert Counter(got) == Counter(expected)
    # Not vacuous: each late query matched on both shards, the registration time lies
    # inside the stream, and the stream had matches of a late query before it that a
    # registration at another point would have made.
    for name in ("late_rise", "late_symbol_dip", "late_quiet"):
        assert all(counts[name] > 0 for counts in per_shard), (name, per_shard)
    assert events[0]["start"] < at < events[-1]["start"]
    times = {e["id"]: e["start"] for e in events}
    assert all(min(times[i] for i in m[2]) >= at for m in expected if m[0].startswith("late_"))
    trades = [e for e in events if e["type"] == "TRADE"]
    before = [
        (a, b)
        for a in trades
        for b in trades
        if a["src"] == b["src"]
        and at - 30 <= a["start"] < at <= b["start"] < a["start"] + 30
        and b["attrs"]["price"] > a["attrs"]["price"] + 3
    ]
    assert before, "no late_rise match straddles the registration time: the test could not tell"


def test_a_held_registration_moves_with_its_slots(tmp_path: Path) -> None:
    """Registered at an event time the stream has not reached, then a move from one
    shard to two: the shard that gains slots (given the same registration) installs the
    query at the same point of the events it gains, and the cluster gives one service's
    matches."""
    from tests.service.cluster.test_slots import post, start

    events = stream(800, seed=31)
    at = events[9 * BATCH]["start"] + 0.5
    late = bodies(LATE)
    single = start(tmp_path, "single")
    try:
        single.client().register_bulk(late, at=at)
        sink = ServiceSink([single.url], "job")
        post(sink, events, range(len(events) // BATCH))
        sink.close()
        expected = finish(single, events)
    finally:
        single.stop()
    shards = [start(tmp_path, f"s{k}") for k in range(2)]
    urls = [s.url for s in shards]
    try:
        sink = ServiceSink([urls[0]], "job")
        post(sink, events, range(0, 4))
        with Cluster(urls[:1]) as cluster:
            [info, *_] = cluster.register_bulk(late, at=at)
            assert info.pending
        shards[1].client().register_bulk(late, at=at)  # the joining shard: the same registration
        with Cluster(urls[:1]) as cluster:
            cluster.rebalance(urls)
        post(sink, events, range(4, len(events) // BATCH))
        sink.close()
        got = [m for server in shards for m in finish(server, events)]
    finally:
        for server in shards:
            server.stop()
    assert Counter(got) == Counter(expected)
    assert {m[0] for m in got} >= {"late_rise", "late_symbol_dip", "late_quiet"}
