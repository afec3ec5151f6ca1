"""What a slot move does to registrations and to the shard it removes: a fenced shard
refuses registrations (409) and the cluster's registration waits for the move to end,
or rolls back and starts again when a fence meets it midway; a shard the move leaves
out takes the map, owns no slot, is not fenced, and refuses events with 409 naming the
map, while the cluster shrunk back gives one service's matches."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from api.client import ApiError
from api.cluster import Cluster, ClusterError
from api.spark_sink import ServiceSink
from tests.service.cluster.test_cluster import QUERIES, names, post_routed, slow_bulk, stream, two_shards
from tests.service.cluster.test_keyed_shards import stream as keyed_stream
from tests.service.cluster.test_slots import finish, one_service, post, start
from tests.service.conftest import StartServer


def test_a_fenced_shard_refuses_registrations_and_the_cluster_waits(start_server: StartServer) -> None:
    servers, cluster = two_shards(start_server)
    with cluster:
        post_routed([s.client() for s in servers], "b0", stream(0, 48))
        fenced = servers[1].client()
        fenced.fence(True)
        with pytest.raises(ApiError) as refused:
            fenced.register("ab", "SEQ(A, B) WITHIN 10")
        assert refused.value.status == 409 and refused.value.detail["field"] == "fence"
        assert "a slot move is under way" in refused.value.message

        outcome: list[object] = []
        worker = threading.Thread(target=lambda: outcome.append(cluster.register_bulk(QUERIES)))
        worker.start()
        time.sleep(1.5)
        assert worker.is_alive() and names(servers[0]) == names(servers[1]) == set()
        fenced.fence(False)
        worker.join(60)
        assert outcome and names(servers[0]) == names(servers[1]) == {"ab", "ac", "big_b"}

        post_routed([s.client() for s in servers], "b1", stream(48, 48))  # the stream reaches them
        assert not any(q.pending for q in cluster.queries())
        fenced.register("waiting", "OR(A)", at=1000.0)
        # Waiting has a bound: the caller is told which shard stayed fenced.
        cluster.fence_wait = 0.5
        fenced.fence(True)
        with pytest.raises(ClusterError, match=f"a slot move kept shard {servers[1].url} fenced"):
            cluster.register("more", "OR(A)")
        # A query installed cannot be deleted during a move; one still waiting can.
        with pytest.raises(ApiError) as no_delete:
            fenced.delete_query("ab")
        assert no_delete.value.status == 409 and no_delete.value.detail["field"] == "fence"
        fenced.delete_query("waiting")
        fenced.fence(False)


def test_a_fence_met_midway_rolls_back_and_registers_again(start_server: StartServer) -> None:
    servers, cluster = two_shards(start_server)
    bulk = slow_bulk(2)
    outcome: list[BaseException | None] = []

    def register() -> None:
        try:
            cluster.register_bulk(bulk)
            outcome.append(None)
        except BaseException as err:  # the test thread raises it
            outcome.append(err)

    worker = threading.Thread(target=register)
    worker.start()
    first, second = servers[0].client(), servers[1].client()
    deadline = time.monotonic() + 120
    while bulk[-1]["name"] not in names(servers[0]):  # the second shard compiles meanwhile
        assert time.monotonic() < deadline and worker.is_alive()
        time.sleep(0.01)
    second.fence(True)
    # The second shard refuses it once compiled: the first is rolled back.
    while names(servers[0]):
        assert time.monotonic() < deadline and worker.is_alive(), outcome
        time.sleep(0.05)
    assert worker.is_alive() and names(servers[1]) == set()
    second.fence(False)
    worker.join(180)
    assert outcome == [None]
    assert names(servers[0]) == names(servers[1]) == {q["name"] for q in bulk}
    assert first.stats().state == "ok"
    cluster.close()


def test_a_shard_removed_by_a_move_owns_nothing_and_refuses_events(tmp_path: Path) -> None:
    events = keyed_stream(600, seed=19)
    expected = one_service(tmp_path, events)
    shards = [start(tmp_path, f"s{k}") for k in range(2)]
    urls = [s.url for s in shards]
    try:
        sink = ServiceSink([urls[0]], "job")
        post(sink, events, range(0, 4))
        with Cluster(urls[:1]) as cluster:
            cluster.rebalance(urls)
        post(sink, events, range(4, 8))
        assert sink.urls == urls
        with Cluster(urls) as cluster:
            one = cluster.rebalance(urls[:1])
        removed = shards[1].client()
        state = removed.slots()
        assert (state.fenced, state.me, state.map.epoch) == (False, None, one.epoch)
        with pytest.raises(ApiError) as refused:
            removed.post_events("job", "late", [{"src": "feed-1", "type": "TRADE", "start": 999.0}])
        assert refused.value.status == 409
        assert (
            f"slot map {one.epoch} left it out" in refused.value.message and urls[0] in refused.value.message
        )
        post(sink, events, range(8, len(events) // 50))
        assert sink.urls == urls[:1]
        sink.close()
        # A restart keeps it out.
        shards[1].restart()
        assert shards[1].client().slots().me is None
        got = finish([shards[0]], events) + finish([shards[1]], events)
    finally:
        for server in shards:
            server.stop()
    assert Counter(got) == Counter(expected)
