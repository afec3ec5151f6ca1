"""A cluster of real shards used as one service (api/cluster.py): one registration and
one merged subscription give one service's matches; a registration reaches every shard
or none, with a shard down and with a shard killed mid-registration; a merged
subscription keeps delivering while a shard is dead and resumes it without gap or
duplicate; one cursor resumes all of it; figures add up."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from api.client import ApiError, Client
from api.cluster import (
    Cluster,
    ClusterError,
    ClusterSubscription,
    SyncClusterSubscription,
    decode_cursor,
    encode_cursor,
    seed_shards,
    shard_urls,
)
from api.spark_sink import shard_of
from tests.service.conftest import Server, StartServer

QUERIES = [
    {"name": "ab", "text": "SEQ(A, B) WITHIN 10"},
    {"name": "ac", "text": "AND(A, C) WITHIN 5"},
    {"name": "big_b", "text": "OR(B b) WHERE b.x > 5"},
]
SOURCES = 24


def stream(first: int, count: int) -> list[dict[str, Any]]:
    """Events ``first`` .. ``first + count - 1``: 24 sources, classes A, B, C in turn."""
    return [
        {
            "id": f"e{n}",
            "src": n % SOURCES,
            "type": "ABC"[(n // SOURCES) % 3],
            "start": float(n),
            "attrs": {"x": n % 11},
        }
        for n in range(first, first + count)
    ]


def post_routed(shards: list[Client], batch_id: str, events: list[dict[str, Any]]) -> None:
    """Each shard its sources' events, routed as the Spark sink routes."""
    for k, client in enumerate(shards):
        mine = [e for e in events if shard_of(e["src"], len(shards)) == k]
        client.post_events("job", batch_id, mine)


def key(match: dict[str, Any]) -> tuple[Any, ...]:
    return (match["query"], match["src"], match["start"], match["end"], tuple(match["events"]))


def two_shards(start_server: StartServer) -> tuple[list[Server], Cluster]:
    servers = [start_server(), start_server()]
    cluster = Cluster([s.url for s in servers], recover=30.0)
    return servers, cluster


def names(server: Server) -> set[str]:
    return {q.name for q in server.client().queries()}


def collect(sub: SyncClusterSubscription, count: int, timeout: float = 60.0) -> list[dict[str, Any]]:
    """``count`` matches from a running subscription, in a thread, or fail."""
    got: list[dict[str, Any]] = []
    for match in sub:
        got.append(match)
        if len(got) >= count:
            break
    return got


def test_one_registration_and_one_subscription_give_one_services_matches(start_server: StartServer) -> None:
    servers, cluster = two_shards(start_server)
    single = start_server()
    with cluster:
        infos = cluster.register_bulk(QUERIES)
        assert [i.name for i in infos] == ["ab", "ac", "big_b"]
        single.client().register_bulk(QUERIES)
        shards = [s.client() for s in servers]
        for batch in range(4):
            events = stream(batch * 300, 300)
            post_routed(shards, f"b{batch}", events)
            single.client().post_events("job", f"b{batch}", events)

        expected = single.client().all_matches()
        assert len(expected) > 100  # not vacuous
        # Both shards had matches: the union is a real merge.
        assert all(s.client().stats().matches > 0 for s in servers)

        got = list(SyncClusterSubscription(cluster.urls, idle_timeout=2.0))
        assert Counter(map(key, got)) == Counter(map(key, expected))
        for match in got:
            assert shard_of(match["src"], 2) == match["shard"]
        # Within each shard, its seqs in order, none missing.
        for k in range(2):
            seqs = [m["seq"] for m in got if m["shard"] == k]
            assert seqs == list(range(len(seqs)))

        listed = cluster.queries()
        assert [q.name for q in listed] == ["ab", "ac", "big_b"]
        by_query = Counter(m["query"] for m in expected)
        assert {q.name: q.matches for q in listed} == {n: by_query[n] for n in ("ab", "ac", "big_b")}

        cluster.delete_query("ac", at="now")
        assert names(servers[0]) == names(servers[1]) == {"ab", "big_b"}


def test_the_async_subscription_and_its_cursor(start_server: StartServer) -> None:
    import asyncio

    servers, cluster = two_shards(start_server)
    with cluster:
        cluster.register_bulk(QUERIES)
        shards = [s.client() for s in servers]
        post_routed(shards, "b0", stream(0, 600))
        total = sum(s.client().stats().matches for s in servers)
        assert total > 50

        async def take(cursor: str | None, count: int | None) -> tuple[list[dict[str, Any]], str]:
            sub = ClusterSubscription(cluster.urls, cursor=cursor, idle_timeout=1.5, batch=7)
            got: list[dict[str, Any]] = []
            async for match in sub:
                got.append(match)
                if count is not None and len(got) == count:
                    break
            return got, sub.cursor

        first, cursor = asyncio.run(take(None, 40))
        rest, end = asyncio.run(take(cursor, None))
        assert len(first) == 40
        seen = Counter((m["shard"], m["seq"]) for m in first + rest)
        assert len(seen) == total and set(seen.values()) == {1}  # every match once
        assert decode_cursor(end, cluster.urls) == {s.url: s.client().stats().matches for s in servers}


def test_a_cursor_is_checked() -> None:
    urls = shard_urls("http://127.0.0.1:1, http://127.0.0.1:2/")
    assert urls == ["http://127.0.0.1:1", "http://127.0.0.1:2"]
    cursor = encode_cursor({urls[0]: 5, urls[1]: 0})
    assert decode_cursor(cursor, urls) == {urls[0]: 5, urls[1]: 0}
    with pytest.raises(ValueError, match="the cursor is for shards"):
        decode_cursor(cursor, [urls[0], "http://127.0.0.1:3"])
    with pytest.raises(ValueError, match="not one a cluster subscription gave"):
        decode_cursor("not a cursor!", urls)
    with pytest.raises(ValueError, match="given twice"):
        shard_urls(["http://a:1", "http://a:1/"])
    with pytest.raises(ValueError, match="at least one"):
        shard_urls(" , ")


def test_a_shard_down_registers_nothing_and_says_which(start_server: StartServer) -> None:
    servers, cluster = two_shards(start_server)
    with cluster:
        servers[1].stop()
        with pytest.raises(ClusterError) as caught:
            cluster.register_bulk(QUERIES)
        assert servers[1].url in caught.value.message
        assert caught.value.message.startswith("nothing was registered") or "nothing was changed" in (
            caught.value.message
        )
        assert names(servers[0]) == set()
        servers[1].start()
        assert names(servers[1]) == set()


def test_a_query_one_shard_refuses_is_registered_nowhere(start_server: StartServer) -> None:
    servers, cluster = two_shards(start_server)
    with cluster:
        servers[1].client().register("ab", "SEQ(A, C) WITHIN 3")  # the name taken on one shard
        with pytest.raises(ClusterError, match=r"nothing was registered: .* refused \(409"):
            cluster.register_bulk(QUERIES)
        assert names(servers[0]) == set()
        assert names(servers[1]) == {"ab"}
        with pytest.raises(ClusterError, match="the shards disagree on ab"):
            cluster.queries()
        assert cluster.repair() == {"ab": [servers[1].url]}
        assert cluster.queries() == []
        with pytest.raises(ClusterError, match=r"refused \(422"):
            cluster.register("bad", "SEQ(A, WITHIN")
        cluster.register_bulk(QUERIES)
        assert names(servers[0]) == names(servers[1]) == {"ab", "ac", "big_b"}


def slow_bulk(count: int, width: int = 10_000) -> list[dict[str, str]]:
    """Queries over thousands of classes: a registration that takes a second or more to
    install, so a shard can be killed while it works on it. (Compiling is no longer the
    slow part: checking the queries on every shard first compiles them, and the
    registration reuses that; installing an OR of 10,000 classes takes ~0.2 s.) Each
    query of its own width: a shape of its own."""
    return [
        {
            "name": f"q{i}",
            "text": f"SEQ(K{i}, OR({', '.join(f'L{i}_{j}' for j in range(width + i))})) WITHIN 60",
        }
        for i in range(count)
    ]


@pytest.mark.parametrize(
    ("comes_back", "streaming"),
    [("while-waited-for", False), ("after-giving-up", False), ("while-waited-for", True)],
)
def test_a_shard_killed_mid_registration_leaves_no_shard_with_the_queries(
    start_server: StartServer, comes_back: str, streaming: bool
) -> None:
    """``streaming``: the shards have clocks, so the registration is at an event time
    (held on the shards that took it until the stream reaches it)."""
    servers, cluster = two_shards(start_server)
    cluster.recover = 30.0 if comes_back == "while-waited-for" else 0.5
    if streaming:
        post_routed([s.client() for s in servers], "b0", stream(0, 48))
    bulk = slow_bulk(8)
    outcome: list[BaseException | None] = []

    def register() -> None:
        try:
            cluster.register_bulk(bulk)
            outcome.append(None)
        except ClusterError as err:
            outcome.append(err)

    worker = threading.Thread(target=register)
    worker.start()
    # The first shard is done once it has the last query; the second is at work then.
    first = servers[0].client()
    deadline = time.monotonic() + 120
    while True:
        try:
            first.query(bulk[-1]["name"])
            break
        except ApiError:
            assert time.monotonic() < deadline and worker.is_alive()
            time.sleep(0.01)
    # The first shard has committed; its answer may not have reached the client yet. A
    # moment for the client to post to the second shard, which then compiles for
    # seconds (slow_bulk): killed before the post arrives it would simply be unreachable.
    time.sleep(0.3)
    servers[1].kill()
    if comes_back == "while-waited-for":
        time.sleep(1.0)
        servers[1].start()
    worker.join(180)
    [err] = outcome
    assert isinstance(err, ClusterError), "the registration completed before the kill"
    assert err.shards[servers[0].url] == "rolled back"
    if comes_back == "while-waited-for":
        assert err.in_doubt == []
        assert "came back and was rolled back" in err.shards[servers[1].url]
    else:
        assert err.in_doubt == [servers[1].url]
        assert "scemon cluster repair" in err.message
        servers[1].start()
        cluster.repair()
    assert names(servers[0]) == names(servers[1]) == set()
    # The cluster takes a registration again, on every shard.
    infos = cluster.register_bulk(QUERIES)
    assert names(servers[0]) == names(servers[1]) == {"ab", "ac", "big_b"}
    if streaming:
        assert infos[0].at is not None and infos[0].at > 47.0 and infos[0].pending
    cluster.close()


def test_a_merged_subscription_outlives_a_killed_shard(start_server: StartServer) -> None:
    servers, cluster = two_shards(start_server)
    with cluster:
        cluster.register_bulk(QUERIES)
        shards = [s.client() for s in servers]
        post_routed(shards, "b0", stream(0, 300))
        before = [s.client().stats().matches for s in servers]
        assert min(before) > 0

        sub = SyncClusterSubscription(cluster.urls, backoff=0.05, idle_timeout=60)
        got: list[dict[str, Any]] = []
        counts = Counter[int]()
        arrived = threading.Condition()

        def consume() -> None:
            for match in sub:
                with arrived:
                    got.append(match)
                    counts[match["shard"]] += 1
                    arrived.notify_all()

        def wait_for(n0: int, n1: int) -> None:
            with arrived:
                assert arrived.wait_for(lambda: counts[0] >= n0 and counts[1] >= n1, timeout=60), dict(counts)

        reader = threading.Thread(target=consume)
        reader.start()
        wait_for(*before)

        servers[1].kill()
        # The live shard keeps delivering while the other is dead.
        shards[0].post_events("job", "b1", [e for e in stream(300, 300) if shard_of(e["src"], 2) == 0])
        live = servers[0].client().stats().matches
        assert live > before[0]
        wait_for(live, before[1])
        assert counts[1] == before[1]

        servers[1].start()
        fresh = servers[1].client()
        fresh.post_events("job", "b1", [e for e in stream(300, 300) if shard_of(e["src"], 2) == 1])
        back = fresh.stats().matches
        assert back > before[1]
        wait_for(live, back)
        # Every match has arrived (the reader may have had them all before this line):
        # ending the subscription ends the reader's loop, whatever it was waiting on.
        sub.close()
        reader.join(30)
        assert not reader.is_alive()

        for k, total in enumerate([live, back]):
            seqs = [m["seq"] for m in got if m["shard"] == k]
            assert seqs == list(range(total))  # no gap, no duplicate
        assert decode_cursor(sub.cursor, cluster.urls) == {servers[0].url: live, servers[1].url: back}


def test_cluster_figures_add_up(start_server: StartServer) -> None:
    servers, cluster = two_shards(start_server)
    with cluster:
        cluster.register_bulk(QUERIES)
        post_routed([s.client() for s in servers], "b0", stream(0, 300))
        stats = cluster.stats()
        assert stats.down == {}
        assert stats.total["events"] == 300
        assert stats.total["matches"] == sum(s.matches for s in stats.shards.values())
        assert stats.total["engine_queries"] == 6
        assert stats.clock_max == 299.0

        text = cluster.metrics()
        for server in servers:
            assert f'scemon_shard_up{{shard="{server.url}"}} 1.0' in text
            assert f'scemon_events_total{{shard="{server.url}"}} 1' in text  # 1xx events each
        servers[1].stop()
        stats = cluster.stats()
        assert set(stats.down) == {servers[1].url}
        assert stats.total["events"] == servers[0].client().stats().events
        assert f'scemon_shard_up{{shard="{servers[1].url}"}} 0.0' in cluster.metrics()


def test_a_seed_shard_names_the_cluster(tmp_path: Path) -> None:
    first, second = Server(tmp_path / "a", {}), Server(tmp_path / "b", {})
    spec = f"{first.url}/, {second.url}"
    try:
        for server in (first, second):
            server.env = {"SCEMON_TOKENS": "", "SCEMON_CLUSTER": spec}
            server.start()
        assert seed_shards(second.url) == [first.url, second.url]
        with Cluster.from_seed(second.url) as cluster:
            assert cluster.urls == [first.url, second.url]
            cluster.register_bulk(QUERIES)
        assert names(first) == names(second) == {"ab", "ac", "big_b"}
    finally:
        first.stop()
        second.stop()


def test_a_shard_told_no_cluster_says_so(start_server: StartServer) -> None:
    alone = start_server()
    assert alone.client()._send("GET", "/v1/cluster").json() == {"shards": []}
    with pytest.raises(ValueError, match="names no cluster"):
        seed_shards(alone.url)


def test_a_delete_with_a_shard_down_deletes_nothing(start_server: StartServer) -> None:
    servers, cluster = two_shards(start_server)
    with cluster:
        cluster.register_bulk(QUERIES)
        servers[0].stop()
        with pytest.raises(ClusterError, match="nothing was changed"):
            cluster.delete_query("ab")
        servers[0].start()
        assert names(servers[0]) == names(servers[1]) == {"ab", "ac", "big_b"}
        # An interrupted delete (here: one shard done by hand) is completed by repair.
        servers[1].client().delete_query("ab")
        with pytest.raises(ClusterError, match="nothing was deleted: no query named 'ab'"):
            cluster.delete_query("ab")
        assert cluster.repair() == {"ab": [servers[0].url]}
        assert names(servers[0]) == names(servers[1]) == {"ac", "big_b"}
