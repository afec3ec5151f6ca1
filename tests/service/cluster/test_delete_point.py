"""One delete at one point of the stream on a live cluster (docs/architecture.md,
"Registering and deleting at one point of the stream"): two shards under a job posting
batch after batch take a delete in the middle of the stream, and their matches are
exactly one service's that deleted the same queries at the same event time on the same
stream — a query keyed by another attribute, and a trailing negation whose matches
wait for their window, included. A shard refusing leaves no shard with a held delete
the others lack."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from api.cluster import Cluster, ClusterError
from api.spark_sink import ServiceSink
from tests.service.cluster.conftest import Job, StartShards
from tests.service.cluster.test_keyed_shards import QUERIES, register, stream, table
from tests.service.cluster.test_register_point import BATCH, LATE, LEAD, bodies, finish
from tests.service.conftest import Server

GOING = ("late_rise", "late_symbol_dip", "late_quiet")


def test_a_delete_mid_stream_gives_one_services_matches(tmp_path: Path, start_shards: StartShards) -> None:
    events = stream(2400, seed=37)
    shards = start_shards(2)
    urls = [s.url for s in shards]
    try:
        for server in shards:
            register(server, QUERIES)
            server.client().register_bulk(bodies(LATE))
        job = Job(urls, events, BATCH).start()
        job.wait_for(8)
        ats = []
        with Cluster(urls) as cluster:
            for name in GOING:
                # Ahead of the streams, as the registration test's LEAD explains.
                ats.append(cluster.delete_query(name, lead=LEAD))
        deleted_by = len(job.done)
        job.join()
        batches = job.batches
        assert deleted_by < batches - 2, "the delete did not land mid-stream"
        assert all(at is not None for at in ats)
        got = [m for server in shards for m in finish(server, events)]
        per_shard = [Counter(m[0] for m in finish(server, events)) for server in shards]
        assert all({q.name for q in s.client().queries()}.isdisjoint(GOING) for s in shards)
    finally:
        for server in shards:
            server.stop()

    # The reference: one service, the queries deleted at the same event times.
    single = Server(tmp_path / "single", {"SCEMON_TOKENS": ""})
    try:
        single.start()
        register(single, QUERIES)
        client = single.client()
        client.register_bulk(bodies(LATE))
        for name, at in zip(GOING, ats, strict=True):
            client.delete_query(name, at=at)
        sink = ServiceSink([single.url], "job")
        for b in range(batches):
            sink.post_table(table(events[b * BATCH : (b + 1) * BATCH]), b)
        sink.close()
        expected = finish(single, events)
    finally:
        single.stop()

    assert Counter(got) == Counter(expected)
    # Not vacuous: each deleted query matched on both shards before its time, the
    # times lie inside the stream, no match of a deleted query ends at or after its
    # time, and the stream had events after it that would have made more.
    times = {e["id"]: e["start"] for e in events}
    for name, at in zip(GOING, ats, strict=True):
        assert at is not None and events[0]["start"] < at < events[-1]["start"]
        assert all(counts[name] > 0 for counts in per_shard), (name, per_shard)
        assert all(
            max(times[i] for i in m[2]) < at for m in expected if m[0] == name and name != "late_quiet"
        )
    trades = [e for e in events if e["type"] == "TRADE"]
    after = [
        (a, b)
        for a in trades
        for b in trades
        if a["src"] == b["src"]
        and ats[0] <= a["start"] < b["start"] < a["start"] + 30
        and b["attrs"]["price"] > a["attrs"]["price"] + 3
    ]
    assert after, "no late_rise match after the delete's time: the test could not tell"


def test_a_refused_delete_leaves_no_shard_holding_it(tmp_path: Path) -> None:
    """The second shard refuses (a query reads the one to delete there only): the
    first shard's held delete is cancelled, and the caller told."""
    from tests.service.cluster.test_slots import start

    shards = [start(tmp_path, f"s{k}") for k in range(2)]
    urls = [s.url for s in shards]
    try:
        for server in shards:
            server.client().register("base", "SEQ(A, B) WITHIN 10")
            server.client().post_events("job", "b0", [{"id": "a", "src": 1, "type": "A", "start": 5.0}])
        shards[1].client().register("reader", "SEQ(@base, A) WITHIN 20")
        with Cluster(urls) as cluster, pytest.raises(ClusterError) as refused:
            cluster.delete_query("base", at=50.0)
        assert "nothing was deleted" in str(refused.value) and "@base" in str(refused.value)
        assert [q.deleting_at for s in shards for q in s.client().queries() if q.name == "base"] == [
            None,
            None,
        ]
        with Cluster(urls) as cluster, pytest.raises(ClusterError) as passed:
            cluster.delete_query("base", at=3.0)  # the shards' streams are past it
        assert "nothing was deleted" in str(passed.value)
    finally:
        for server in shards:
            server.stop()


def test_a_shard_joining_by_a_move_takes_the_held_registrations_and_deletes(tmp_path: Path) -> None:
    """One shard with a registration and two deletes held for event times the stream
    has not reached, then a move onto a second, empty shard: the move gives it the
    cluster's queries, held ones and held deletes with their times, and the cluster
    gives one service's matches."""
    from ecq.language import parse_queries
    from tests.service.cluster.test_slots import post, start

    events = stream(800, seed=41)
    at = events[9 * BATCH]["start"] + 0.5
    gone_at = events[12 * BATCH]["start"] + 0.5
    base = str(parse_queries(QUERIES)[0].name)
    late = bodies(LATE)

    def hold(cluster: Cluster | None, server: Server) -> None:
        if cluster is not None:
            cluster.register_bulk(late, at=at)
            for name in ("late_rise", base):
                cluster.delete_query(name, at=gone_at)
        else:
            server.client().register_bulk(late, at=at)
            for name in ("late_rise", base):
                server.client().delete_query(name, at=gone_at)

    single = start(tmp_path, "single")
    try:
        hold(None, single)
        sink = ServiceSink([single.url], "job")
        post(sink, events, range(len(events) // BATCH))
        sink.close()
        expected = finish(single, events)
    finally:
        single.stop()
    first = start(tmp_path, "s0")
    joining = Server(tmp_path / "s1", {"SCEMON_TOKENS": ""})  # no query at all
    shards = [first, joining]
    try:
        joining.start()
        sink = ServiceSink([first.url], "job")
        post(sink, events, range(0, 4))
        with Cluster([first.url]) as cluster:
            hold(cluster, first)
            cluster.rebalance([first.url, joining.url])
        listed = [(q.name, q.at, q.pending, q.deleting_at) for q in joining.client().queries()]
        assert listed == [(q.name, q.at, q.pending, q.deleting_at) for q in first.client().queries()]
        assert ("late_rise", at, True, gone_at) in listed
        post(sink, events, range(4, len(events) // BATCH))
        sink.close()
        got = [m for server in shards for m in finish(server, events)]
        assert [q.name for q in joining.client().queries()] == [q.name for q in first.client().queries()]
    finally:
        for server in shards:
            server.stop()
    assert Counter(got) == Counter(expected)
    assert {m[0] for m in got} >= {"late_rise", "late_symbol_dip", "late_quiet", base}
    assert {m[0] for m in got if m[2] and m[0] == base}
