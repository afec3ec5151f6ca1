"""Moving slots between real shards in the middle of a stream (docs/architecture.md,
"Moving slots"): a cluster grown from one shard to two and then three, or with slots
moved back and forth, gives exactly the matches of one service on the same stream —
none lost, none twice — and a bad move changes nothing."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.client import ApiError
from api.cluster import Cluster, ClusterError
from api.routing import SLOTS, SlotMap, owner_of, shard_of, slot_of
from api.spark_sink import ServiceSink
from tests.service.cluster.test_keyed_shards import QUERIES, register, stream, table
from tests.service.conftest import Server

# The partitions example (keys src, symbol, NONE, [id]) and a trailing negation per
# feed, whose matches wait for their window to close: one pending across a move must be
# released once, by the new owner.
MORE = """
QUERY feed_quiet
PATTERN SEQ(TRADE a, TRADE b, !TRADE c)
WHERE b.price > a.price + 5
WITHIN 20 s
"""
BATCH = 50
Seen = tuple[str, str, tuple[str, ...]]


def seen(server: Server) -> list[Seen]:
    return [(m["query"], str(m["src"]), tuple(map(str, m["events"]))) for m in server.client().all_matches()]


def start(tmp_path: Path, name: str) -> Server:
    server = Server(tmp_path / name, {"SCEMON_TOKENS": ""})
    server.start()
    register(server, QUERIES + MORE)
    return server


def post(sink: ServiceSink, events: list[dict[str, Any]], batches: range) -> None:
    for b in batches:
        sink.post_table(table(events[b * BATCH : (b + 1) * BATCH]), b)


def finish(servers: list[Server], events: list[dict[str, Any]]) -> list[Seen]:
    """Close every window (as the end of a stream does) and read every match log."""
    out: list[Seen] = []
    for server in servers:
        server.client().advance_time(events[-1]["start"] + 86_000)
        out += seen(server)
    return out


def one_service(tmp_path: Path, events: list[dict[str, Any]]) -> list[Seen]:
    single = start(tmp_path, "single")
    try:
        sink = ServiceSink([single.url], "job")
        post(sink, events, range(len(events) // BATCH))
        sink.close()
        return finish([single], events)
    finally:
        single.stop()


def spans(matches: list[Seen], events: list[dict[str, Any]], at: float) -> list[Seen]:
    """The matches with events on both sides of time ``at``."""
    times = {e["id"]: e["start"] for e in events}
    return [m for m in matches if min(times[i] for i in m[2]) < at <= max(times[i] for i in m[2])]


def test_growing_from_one_shard_to_three_mid_stream_gives_one_services_matches(tmp_path: Path) -> None:
    events = stream(600, seed=11)
    expected = one_service(tmp_path, events)
    shards = [start(tmp_path, f"s{k}") for k in range(3)]
    urls = [s.url for s in shards]
    try:
        # The job knows the first shard only; the shards it learns from the slot map.
        sink = ServiceSink([urls[0]], "job")
        post(sink, events, range(0, 4))
        with Cluster(urls[:1]) as cluster:
            two = cluster.rebalance(urls[:2])
        assert two.epoch == 1 and [len(two.slots_of(k)) for k in range(2)] == [2048, 2048]
        # A shard restarted after a move keeps its map and the state it gained (both
        # are in its store's folder: the map, and the events spliced into its op log).
        shards[1].restart()
        assert SlotMap.from_json(shards[1].client().slots().map.model_dump()) == two
        post(sink, events, range(4, 8))
        assert sink.urls == urls[:2]
        with Cluster(urls[:2]) as cluster:
            three = cluster.rebalance(urls)
            assert cluster.slot_map() == three
        # Each shard keeps what it can: only slots moving to the new shard move.
        assert sum(a != b for a, b in zip(two.owners, three.owners, strict=True)) == 1365
        post(sink, events, range(8, len(events) // BATCH))
        assert sink.urls == urls
        sink.close()
        per_shard = [finish([s], events) for s in shards]
    finally:
        for server in shards:
            server.stop()
    got = [m for found in per_shard for m in found]
    assert Counter(got) == Counter(expected)
    # Not vacuous: every query matched, the new shards made matches, and matches whose
    # events lie on both sides of a move came from the shard the move gave their value to.
    assert {m[0] for m in expected} == {
        "feed_burst",
        "symbol_rise_then_fall",
        "ibm_no_sun_oracle",
        "shoplifting",
        "feed_quiet",
    }
    assert per_shard[1] and per_shard[2]
    first_move, second_move = events[4 * BATCH]["start"], events[8 * BATCH]["start"]
    assert spans(per_shard[1], events, first_move)
    assert spans(per_shard[2], events, second_move)


def test_moves_while_the_job_posts_give_one_services_matches(tmp_path: Path) -> None:
    """Live: the sink posts batch after batch from a thread of its own while the
    cluster grows from one shard to two and then three. Each move fences the shards at a
    batch boundary (every shard has the same last batch: shares are posted even when
    empty), the sink's batches wait out the fences (503, retried), and a batch it had
    routed by the old map is routed again by the new one (409)."""
    events = stream(1000, seed=13)
    expected = one_service(tmp_path, events)
    shards = [start(tmp_path, f"s{k}") for k in range(3)]
    urls = [s.url for s in shards]
    done: list[int] = []
    failed: list[BaseException] = []

    def job() -> None:
        sink = ServiceSink([urls[0]], "job")
        try:
            for b in range(len(events) // BATCH):
                post(sink, events, range(b, b + 1))
                done.append(b)
                time.sleep(0.05)  # a job's pace: the moves land between and during batches
        except BaseException as err:  # the test thread raises it
            failed.append(err)
        finally:
            sink.close()

    def after(batch: int) -> None:
        while not failed and (not done or done[-1] < batch):
            time.sleep(0.01)

    poster = threading.Thread(target=job)
    poster.start()
    try:
        last = len(events) // BATCH - 1
        after(3)
        with Cluster(urls[:1]) as cluster:
            cluster.rebalance(urls[:2])
        assert done[-1] < last  # the moves came in the middle of the stream
        after(9)
        with Cluster(urls[:2]) as cluster:
            cluster.rebalance(urls)
        assert done[-1] < last
        poster.join(timeout=300)
        assert not failed, failed
        assert done[-1] == len(events) // BATCH - 1
        per_shard = [finish([s], events) for s in shards]
    finally:
        poster.join(timeout=300)
        for server in shards:
            server.stop()
    got = [m for found in per_shard for m in found]
    assert Counter(got) == Counter(expected)
    assert per_shard[1] and per_shard[2]


def test_moving_slots_back_and_forth_changes_no_match(tmp_path: Path) -> None:
    events = stream(500, seed=5)
    expected = one_service(tmp_path, events)
    shards = [start(tmp_path, f"s{k}") for k in range(2)]
    urls = [s.url for s in shards]
    try:
        sink = ServiceSink([urls[0]], "job")
        with Cluster(urls[:1]) as cluster:
            cluster.rebalance(urls)
        # The slots of two feeds and of two symbols, moved over and back in turn.
        moving = sorted(
            {slot_of(("src",), "feed-1"), slot_of(("src",), "feed-4"), slot_of(("symbol",), "S3")}
        )
        with Cluster(urls) as cluster:
            for b in range(len(events) // BATCH):
                post(sink, events, range(b, b + 1))
                here = cluster.slot_map()
                to = urls[1 - here.owners[moving[0]]]
                moved = cluster.move_slots(moving, to)
                assert moved.epoch == here.epoch + 1
                # The same move again changes nothing, not even the epoch.
                assert cluster.move_slots(moving, to) == moved
        sink.close()
        got = finish(shards, events)
    finally:
        for server in shards:
            server.stop()
    assert Counter(got) == Counter(expected)
    assert {owner_of(("src",), m[1], 2) for m in got if m[0] == "feed_burst"} == {0, 1}


def test_a_match_waiting_for_its_window_is_released_once_across_a_move(tmp_path: Path) -> None:
    """A trailing negation's match waits on its old owner, whose clock is behind the
    new owner's: the move brings the clocks together first, so the old owner releases
    it (one service's clock would have passed its deadline), and the new owner, whose
    rebuild passes the deadline too, does not release it again. Without that the match
    would be lost."""
    x = next(f"x{i}" for i in range(100) if shard_of(f"x{i}", 2) == 0)
    y = next(f"y{i}" for i in range(100) if shard_of(f"y{i}", 2) == 1)
    events = [
        {"id": "e0", "src": x, "type": "TRADE", "start": 1.0, "attrs": {"price": 90}},
        {"id": "e1", "src": x, "type": "TRADE", "start": 2.0, "attrs": {"price": 100}},
        {"id": "e2", "src": y, "type": "TRADE", "start": 30.0, "attrs": {"price": 50}},
    ]
    shards = [start(tmp_path, f"s{k}") for k in range(2)]
    urls = [s.url for s in shards]
    try:
        with Cluster(urls[:1]) as cluster:
            cluster.rebalance(urls)
        sink = ServiceSink([urls[0]], "job")
        sink.post_table(table(events), 0)
        sink.close()
        assert [s.client().stats().clock for s in shards] == [2.0, 30.0]
        with Cluster(urls) as cluster:
            cluster.move_slots([slot_of(("src",), x)], urls[1])
        got = finish(shards, events)
    finally:
        for server in shards:
            server.stop()
    assert [m for m in got if m[0] == "feed_quiet"] == [("feed_quiet", x, ("e0", "e1"))]


def test_a_move_that_broke_off_is_completed_by_applying_its_map_again(tmp_path: Path) -> None:
    events = stream(300, seed=9)
    expected = one_service(tmp_path, events)
    shards = [start(tmp_path, f"s{k}") for k in range(2)]
    urls = [s.url for s in shards]
    try:
        with Cluster(urls[:1]) as cluster:
            before = cluster.rebalance(urls)
        sink = ServiceSink([urls[0]], "job")
        post(sink, events, range(3))
        moving = [slot_of(("src",), f"feed-{i}") for i in range(6)]
        target = before.moved(moving, 1)
        # The move broke off after the shard gaining the slots took the new map.
        a, b = (s.client() for s in shards)
        for client in (a, b):
            client.fence(True)
        b.put_slots(target.to_json(), 1, a.export_slots(moving))
        for client in (a, b):
            client.fence(False)
        with Cluster(urls) as cluster:
            with pytest.raises(ClusterError, match="the shards hold different slot maps"):
                cluster.slot_map()
            assert cluster.apply_slots(target) == target
            assert cluster.slot_map() == target
        post(sink, events, range(3, len(events) // BATCH))
        sink.close()
        got = finish(shards, events)
    finally:
        for server in shards:
            server.stop()
    assert Counter(got) == Counter(expected)


def test_a_bad_move_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    shards = [start(tmp_path, f"s{k}") for k in range(2)]
    urls = [s.url for s in shards]
    try:
        with Cluster(urls[:1]) as cluster:
            before = cluster.rebalance(urls)
        sink = ServiceSink([urls[0]], "job")
        events = stream(100, seed=3)
        post(sink, events, range(2))
        client = shards[0].client()
        body = {**before.to_json(), "owners": None}  # each case gives ranges instead
        with Cluster(urls) as cluster:
            # A slot out of range, a shard that does not answer: refused before anything.
            with pytest.raises(ValueError, match="slot 4096 is not within 0-4095"):
                cluster.move_slots([SLOTS], urls[1])
            with pytest.raises(ClusterError, match="no slot was moved: shard http://127.0.0.1:9 is down"):
                cluster.move_slots([1, 2], "http://127.0.0.1:9")
            assert cluster.slot_map() == before
        # The shard's own checks: each a 4xx saying why, nothing changed.
        refusals = [
            (
                lambda: client.put_slots({**body, "epoch": 2, "ranges": [[0, 4094, 0]]}, 0),
                422,
                "slot 4095 has no owner",
            ),
            (
                lambda: client.put_slots({**body, "epoch": 2, "ranges": [[0, 4095, 1]]}, 5),
                422,
                "place 5 is not a shard",
            ),
            (
                lambda: client.put_slots({**body, "epoch": 0, "ranges": [[0, 4095, 1]]}, 0),
                409,
                "older than this",
            ),
            (
                lambda: client.put_slots({**body, "epoch": 2, "owners": "AAAA"}, 0),
                422,
                "all 4096 slots, not 1",
            ),
            (
                lambda: client.put_slots({**body, "ranges": [[0, 4095, 0]]}, 0),
                409,
                "another map of epoch 1",
            ),
            (lambda: client.export_slots([1]), 409, "fence the shard first"),
            (
                lambda: client.put_slots({**body, "epoch": 2, "ranges": [[0, 4095, 7]]}, 0),
                422,
                "must be a shard of the map",
            ),
        ]
        for call, status, message in refusals:
            with pytest.raises(ApiError) as caught:
                call()
            assert caught.value.status == status and message in caught.value.message, caught.value.message
        # A post routed by another map is refused whole (409), nothing applied.
        response = httpx.post(
            f"{urls[0]}/v1/events",
            json={"producer": "p", "batch_id": "x", "events": [{"src": "a", "type": "TRADE", "start": 1}]},
            headers={"X-Scemon-Slot-Epoch": "0"},
        )
        assert response.status_code == 409 and "routed by slot map 0" in response.text
        stats = [s.client().stats() for s in shards]
        assert sum(s.events for s in stats) >= 100 and all(s.state == "ok" for s in stats)
        for server in shards:
            answer = server.client().slots()
            assert SlotMap.from_json(answer.map.model_dump()) == before and not answer.fenced
        sink.close()
    finally:
        for server in shards:
            server.stop()
