"""The sink without Spark: routing, Arrow encoding, posting, retries, rejections."""

from __future__ import annotations

import time
import zlib
from pathlib import Path

import pyarrow as pa
import pytest

from api.client import Client
from api.spark_sink import (
    RetryPolicy,
    ServiceSink,
    SinkError,
    encode_events,
    shard_of,
    sort_events,
    split_by_shard,
    wait_until_ready,
)
from service.server.process import ServerProcess, free_port
from tests.api.fake_service import fake_service

FAST = RetryPolicy(budget=3.0, first=0.05, longest=0.2, timeout=5.0)


def events(n: int, src: list[str] | None = None) -> pa.Table:
    return pa.table(
        {
            "src": src or [str(i % 7) for i in range(n)],
            "type": ["A"] * n,
            "start": [float(n - i) for i in range(n)],
            "end": [float(n - i) for i in range(n)],
            "id": [f"e{i}" for i in range(n)],
        }
    )


def decode(body: bytes) -> pa.Table:
    return pa.ipc.open_stream(body).read_all()


def test_shards_are_a_stable_hash_of_the_source() -> None:
    # A source's slot is crc32 mod 4096, and the default map of N shards deals the slots
    # out in turn: for N a power of two that is crc32 mod N.
    assert shard_of("card-7", 3) == zlib.crc32(b"card-7") % 4096 % 3
    assert shard_of("card-7", 4) == zlib.crc32(b"card-7") % 4
    assert shard_of(7, 4) == shard_of("7", 4)
    assert shard_of("anything", 1) == 0
    spread = {shard_of(f"card-{i}", 4) for i in range(100)}
    assert spread == {0, 1, 2, 3}


def test_integer_sources_and_ids_travel_as_integers() -> None:
    table = decode(
        encode_events(
            pa.table(
                {"src": ["7", "-3", "+4"], "type": ["A"] * 3, "start": [1.0] * 3, "id": ["1", None, "2"]}
            )
        )
    )
    assert table.schema.field("src").type == pa.int64()
    assert table.column("src").to_pylist() == [7, -3, 4]
    assert table.column("id").to_pylist() == [1, None, 2]


def test_a_batch_with_one_non_integer_source_sends_all_as_text() -> None:
    table = decode(encode_events(pa.table({"src": ["7", "card-1"], "type": ["A"] * 2, "start": [1.0] * 2})))
    assert table.column("src").to_pylist() == ["7", "card-1"]
    beyond_64_bits = decode(encode_events(pa.table({"src": ["9" * 30], "type": ["A"], "start": [1.0]})))
    assert beyond_64_bits.column("src").to_pylist() == ["9" * 30]


def test_only_the_contracts_columns_are_posted() -> None:
    table = events(2).append_column("path", pa.array(["x", "y"]))
    assert decode(encode_events(table)).column_names == ["src", "type", "start", "end", "id"]


def test_sorting_is_by_time_then_the_tie_break_and_stable() -> None:
    table = pa.table(
        {
            "start": [2.0, 1.0, 1.0, 1.0],
            "end": [2.0, 1.0, 1.0, 1.0],
            "line": [0, 9, 3, 5],
            "id": ["a", "b", "c", "d"],
        }
    )
    assert sort_events(table).column("id").to_pylist() == ["b", "c", "d", "a"]
    assert sort_events(table, ("line",)).column("id").to_pylist() == ["c", "d", "b", "a"]


def test_split_puts_every_row_on_its_sources_shard_once() -> None:
    table = events(200, [f"card-{i % 37}" for i in range(200)])
    parts = split_by_shard(table, 3)
    assert sum(p.num_rows for p in parts) == 200
    assert all(p.num_rows for p in parts)  # 37 sources reach all three shards
    for k, part in enumerate(parts):
        assert {shard_of(s, 3) for s in part.column("src").to_pylist()} <= {k}


def test_posts_carry_producer_and_batch_ids_and_chunks_are_numbered() -> None:
    with fake_service() as service:
        sink = ServiceSink([service.url], "job-1", FAST, max_events=4)
        report = sink.post_table(events(10), batch_id=5)
        again = sink.post_table(events(10), batch_id=5)  # Spark re-runs the batch
        sink.close()
    assert sorted(service.batches) == [("job-1", "5.0"), ("job-1", "5.1"), ("job-1", "5.2")]
    assert (report.events, report.posts, report.duplicates) == (10, 3, 0)
    assert again.duplicates == 3
    posted = [e["start"] for e in service.events()]
    assert sorted(posted) == posted  # chunks cut from the time-sorted batch


def test_a_failing_service_is_retried_until_it_answers() -> None:
    with fake_service() as service:
        service.fail_next = 3
        sink = ServiceSink([service.url], "job", FAST)
        report = sink.post_table(events(5), batch_id=0)
        sink.close()
    assert report.events == 5
    assert service.posts == 4


def test_a_service_that_stays_away_stops_the_sink_after_the_budget() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    sink = ServiceSink([url], "job", RetryPolicy(budget=0.5, first=0.05, longest=0.1, timeout=1.0))
    started = time.monotonic()
    # The sink asks the shards what to route by (the slot map) before each batch, so
    # that is where a service that is away is found.
    with pytest.raises(SinkError, match=r"routing: gave up after \d+ attempts"):
        sink.post_table(events(3), batch_id=0)
    assert time.monotonic() - started < 5
    sink.close()
    with pytest.raises(SinkError, match="is not ready"):
        wait_until_ready([url], RetryPolicy(budget=0.3, first=0.05))


def test_an_event_the_service_rejects_is_reported_and_the_rest_posted() -> None:
    with fake_service() as service:
        service.reject_id = "e3"
        sink = ServiceSink([service.url], "job", FAST)
        report = sink.post_table(events(5), batch_id=0)
        sink.close()
    assert report.events == 4
    assert [r["row"] for r in report.rejected] == [3]
    assert "rejected by the service: field 'attrs': too expensive" in report.rejected[0]["reason"]
    assert sorted(e["id"] for e in service.events()) == ["e0", "e1", "e2", "e4"]


@pytest.mark.server
def test_refused_and_late_events_come_back_with_their_rows_also_for_a_resent_batch(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data", inherit_settings=False) as server:
        with Client(server.url) as client:
            client.post_events("seed", 1, [{"src": 1, "type": "A", "start": 100.0}])
        sink = ServiceSink([server.url], producer="p", policy=FAST)
        table = pa.table(
            {
                "src": ["1", "1", "1", "1"],
                "type": ["A"] * 4,
                "start": [1.7e11, 50.0, 120.0, 1.7e11 + 1],
                "id": ["ms", "late", "ok", "ms2"],
            }
        )
        try:
            first = sink.post_table(table, 0)
            again = sink.post_table(table, 0)
        finally:
            sink.close()
    assert [r["row"] for r in first.rejected] == [0, 3] and "ahead of the" in first.rejected[0]["reason"]
    assert first.late == [{"row": 1, "reason": "late by 50 s"}] and first.posts == 1
    assert again.duplicates == 1 and again.late == first.late


def test_a_kept_batch_of_more_shards_than_the_cluster_has_stops_the_sink() -> None:
    from api.spark_sink import PreparedBatch

    with fake_service() as service:
        sink = ServiceSink([service.url], "job", FAST)
        kept = PreparedBatch(2, [events(1), events(1)], 0.0)  # as service.pipeline.pending reads it
        with pytest.raises(SinkError, match="batch 4 was routed to 2 shards but the cluster has 1 now"):
            sink.post_prepared(kept, 4)
        sink.close()
    assert service.posts == 0
