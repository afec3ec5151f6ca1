"""Events without ids in a cluster: the job names each one (``<batch>:<row>``) before
routing, so an event copied to two shards (its source's owner and a key's owner) has
one name on both; a slot move that brings both copies to one shard splices it once, and
the cluster grown from one shard to three gives one service's matches, event names
included."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from api.cluster import Cluster
from api.spark_sink import ServiceSink, name_events
from tests.service.cluster.test_keyed_shards import stream, table
from tests.service.cluster.test_slots import BATCH, finish, start
from tests.service.conftest import Server


def unnamed(events: list[dict[str, Any]]) -> pa.Table:
    return table(events).drop_columns(["id"])


def post(sink: ServiceSink, events: list[dict[str, Any]], batches: range) -> None:
    for b in batches:
        sink.post_table(unnamed(events[b * BATCH : (b + 1) * BATCH]), b)


def test_the_job_names_unnamed_events_once_for_every_copy() -> None:
    rows = pa.table({"src": ["a", "b", "c"], "_row": [7, 8, 9]})
    assert name_events(rows, 4).column("id").to_pylist() == ["4:7", "4:8", "4:9"]
    some = pa.table({"src": ["a", "b"], "id": [11, None], "_row": [0, 1]})
    assert name_events(some, 4).column("id").to_pylist() == ["11", "4:1"]
    named = pa.table({"src": ["a"], "id": ["x"], "_row": [0]})
    assert name_events(named, 4) is named


def test_growing_with_unnamed_events_copied_to_two_shards_gives_one_services_matches(tmp_path: Path) -> None:
    events = stream(600, seed=23)
    single = start(tmp_path, "single")
    try:
        sink = ServiceSink([single.url], "job")
        post(sink, events, range(len(events) // BATCH))
        sink.close()
        expected = finish([single], events)
    finally:
        single.stop()
    shards: list[Server] = [start(tmp_path, f"s{k}") for k in range(3)]
    urls = [s.url for s in shards]
    try:
        sink = ServiceSink([urls[0]], "job")
        post(sink, events, range(0, 4))
        with Cluster(urls[:1]) as cluster:
            cluster.rebalance(urls[:2])
        post(sink, events, range(4, 8))
        with Cluster(urls[:2]) as cluster:
            cluster.rebalance(urls)
        post(sink, events, range(8, len(events) // BATCH))
        sink.close()
        got = [m for server in shards for m in finish([server], events)]
    finally:
        for server in shards:
            server.stop()
    assert len(got) == len(expected), (len(got), len(expected))
    assert Counter(got) == Counter(expected)
    # Not vacuous: the names are the job's, and queries by a key other than the source
    # (whose events were copied to a second shard) matched.
    assert all(":" in name for m in expected for name in m[2])
    assert {m[0] for m in expected} >= {"symbol_rise_then_fall", "shoplifting", "ibm_no_sun_oracle"}
