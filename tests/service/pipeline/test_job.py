"""The Spark job on a real local Spark against a stand-in service: reading, validation,
dead letters, ordering, routing, restart from the checkpoint, the rate source."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from api.spark_sink import RetryPolicy, ServiceSink, shard_of
from service.pipeline.job import Pipeline
from service.pipeline.options import JobError, JobOptions
from service.pipeline.rows import PACKED_SCHEMA, ROW_SCHEMA, unpack
from service.pipeline.sources import event_rows
from tests.api.fake_service import fake_service
from tests.service.pipeline.conftest import RunJob

pytestmark = pytest.mark.spark


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def jsonl(*events: dict[str, Any]) -> bytes:
    return b"".join(orjson.dumps(e) + b"\n" for e in events)


def test_files_become_time_sorted_events_with_stable_ids(tmp_path: Path, run_job: RunJob) -> None:
    source = tmp_path / "in"
    write(
        source / "a.jsonl",
        jsonl({"src": 1, "type": "A", "start": 5}, {"id": "x", "src": 2, "type": "B", "start": 1}),
    )
    write(source / "b.csv", "src,type,start,end,payment\n3,C,2,4,9.5\n")
    table = pa.table({"src": [4], "type": ["D"], "start": [3.0]})
    out = io.BytesIO()
    pq.write_table(table, out)
    write(source / "c.parquet", out.getvalue())
    with fake_service() as service:
        progress = run_job(source, [service.url])
    [(producer, batch)] = service.batches
    assert producer.startswith("scemon-stream-") and batch == "0.0"
    assert [(e["id"], e["src"], e["start"]) for e in service.events()] == [
        ("x", 2, 1.0),
        ("c.parquet:0", 4, 3.0),
        ("b.csv:0", 3, 2.0),  # ends at 4: the service applies events by (end, start)
        ("a.jsonl:0", 1, 5.0),
    ]
    assert service.events()[2]["attrs"] == '{"payment":9.5}'
    assert (progress.batches, progress.events, progress.bad_rows) == (1, 4, 0)


def test_files_cross_spark_packed_one_cell_a_file_and_come_back_as_rows(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql.pandas.types import from_arrow_schema

    source = tmp_path / "in"
    write(source / "a.jsonl", jsonl(*({"src": 1, "type": "A", "start": i} for i in range(5))) + b"oops\n")
    write(source / "b.jsonl", jsonl({"src": 2, "type": "B", "start": 9}))
    options = JobOptions(source=str(source), services=["http://x"], checkpoint="-", dead_letter="-")
    stream = event_rows(spark, options)
    assert stream.schema == from_arrow_schema(PACKED_SCHEMA)
    received: list[pa.Table] = []
    query = stream.writeStream.foreachBatch(lambda df, _: received.append(df.toArrow())).trigger(
        availableNow=True
    )
    query.option("checkpointLocation", str(tmp_path / "checkpoint")).start().awaitTermination(120)
    [table] = received
    assert table.num_rows == 2  # one packed cell per file, not one row per event
    rows = unpack(table).sort_by([("path", "ascending"), ("index", "ascending")])
    assert rows.schema == ROW_SCHEMA
    assert rows.column("id").to_pylist() == [f"a.jsonl:{i}" for i in range(5)] + [None, "b.jsonl:0"]
    assert rows.column("error").to_pylist()[5].startswith("invalid JSON")


def test_the_local_jvm_compiles_at_the_first_tier_only_and_collects_in_parallel(spark: Any) -> None:
    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    assert "-XX:TieredStopAtLevel=1" in list(management.getRuntimeMXBean().getInputArguments())
    # The throughput collector, not G1 (whose concurrent threads took the server's CPU).
    collectors = {bean.getName() for bean in management.getGarbageCollectorMXBeans()}
    assert collectors == {"PS Scavenge", "PS MarkSweep"}, collectors


def test_bad_rows_land_in_the_dead_letter_folder_with_reasons(tmp_path: Path, run_job: RunJob) -> None:
    source = tmp_path / "in"
    write(
        source / "day.jsonl",
        b'{"src": 1, "type": "A", "start": 1}\n'
        b"{oops\n"
        b'{"src": 1, "type": "A"}\n'
        b'{"src": 1, "type": "A", "start": "noon"}\n'
        b'{"src": 1, "type": "B", "start": 2}\n',
    )
    write(source / "day.csv", "src,type,start\n5,A,1\n6,B\n")
    with fake_service() as service:
        progress = run_job(source, [service.url], dead_letter=str(tmp_path / "dead"))
    assert sorted(e["id"] for e in service.events()) == ["day.csv:0", "day.jsonl:0", "day.jsonl:4"]
    assert progress.bad_rows == 4
    [dead] = list((tmp_path / "dead").iterdir())
    letters = sorted(
        (d["file"].rsplit("/", 1)[1], d["line"], d["reason"])
        for d in map(orjson.loads, dead.read_bytes().splitlines())
    )
    assert letters == [
        ("day.csv", 3, "has 2 cells, the header has 3"),
        ("day.jsonl", 2, "invalid JSON: unexpected character, expected a string key (column 2)"),
        ("day.jsonl", 3, "field 'start': missing"),
        ("day.jsonl", 4, "field 'start': must be a number of seconds, got string 'noon'"),
    ]


def test_a_mapping_reaches_the_spark_workers(tmp_path: Path, run_job: RunJob) -> None:
    source = tmp_path / "in"
    write(source / "pay.csv", "card,merchant,ts,amount\n42,CNMA_A,3600,25.5\n")
    with fake_service() as service:
        run_job(source, [service.url], mapping={"src": "card", "type": "merchant", "start": "ts"})
    [event] = service.events()
    assert (event["src"], event["type"], event["start"], event["attrs"]) == (
        42,
        "CNMA_A",
        3600.0,
        '{"amount":25.5}',
    )


def test_two_services_each_get_their_sources(tmp_path: Path, run_job: RunJob) -> None:
    source = tmp_path / "in"
    write(source / "e.jsonl", jsonl(*({"src": f"card-{i % 11}", "type": "A", "start": i} for i in range(60))))
    with fake_service() as one, fake_service() as two:
        run_job(source, [one.url, two.url])
    for k, service in enumerate((one, two)):
        assert service.events()
        assert {shard_of(e["src"], 2) for e in service.events()} == {k}
    assert len(one.events()) + len(two.events()) == 60


def test_a_batch_spark_runs_again_is_posted_under_the_same_ids(tmp_path: Path, run_job: RunJob) -> None:
    source = tmp_path / "in"
    for k in range(3):
        write(source / f"p{k}.jsonl", jsonl({"src": 1, "type": "A", "start": k}))
    with fake_service() as service:
        first = run_job(source, [service.url], max_files_per_trigger=1)
        assert first.batches == 3
        keys = sorted(service.batches)
        # A crash after the post but before Spark's commit: the batch is not committed.
        for name in ("2", ".2.crc"):
            (tmp_path / "checkpoint" / "commits" / name).unlink()
        write(source / "p3.jsonl", jsonl({"src": 1, "type": "A", "start": 3}))
        again = run_job(source, [service.url], max_files_per_trigger=1)
    assert again.duplicates == 1  # batch 2, re-run, was recognised
    assert again.events == 2
    assert sorted(service.batches) == sorted([*keys, (keys[0][0], "3.0")])
    assert sorted(e["start"] for e in service.events()) == [0.0, 1.0, 2.0, 3.0]


def test_the_job_stops_with_a_clear_error_when_the_service_stays_down(
    tmp_path: Path, run_job: RunJob
) -> None:
    write(tmp_path / "in" / "e.jsonl", jsonl({"src": 1, "type": "A", "start": 1}))
    with fake_service() as service:
        service.fail_next = 1000
        with pytest.raises(JobError, match=r"did not take batch 0\.0: gave up after \d+ attempts .*HTTP 503"):
            run_job(tmp_path / "in", [service.url], retry=RetryPolicy(budget=1.0, first=0.1, longest=0.2))


def test_the_rate_source_makes_synthetic_payments(spark: Any, tmp_path: Path) -> None:
    with fake_service() as service:
        options = JobOptions(
            source="rate:200:10",
            services=[service.url],
            checkpoint=str(tmp_path / "checkpoint"),
            dead_letter=str(tmp_path / "dead"),
            trigger_seconds=0.5,
        )
        pipeline = Pipeline(spark, options)
        pipeline.start()
        deadline = time.monotonic() + 60
        while len(service.events()) < 50 and time.monotonic() < deadline:
            time.sleep(0.2)
        pipeline.stop()
        events = service.events()
    assert len(events) >= 50
    assert {e["src"] for e in events} <= set(range(10))
    assert all(e["type"].startswith("C") and "payment" in orjson.loads(e["attrs"]) for e in events)
    assert len({e["id"] for e in events}) == len(events)


def test_the_sink_is_a_foreach_batch_function_for_any_event_dataframe(spark: Any) -> None:
    df = spark.createDataFrame(
        [("7", "A", 2.0, "e1"), ("7", "B", 1.0, "e2")], "src string, type string, start double, id string"
    )
    with fake_service() as service:
        sink = ServiceSink([service.url], "my-job")
        sink(df, 3)
        sink.close()
    assert list(service.batches) == [("my-job", "3.0")]
    assert [(e["id"], e["src"]) for e in service.events()] == [("e2", 7), ("e1", 7)]


def test_micro_batches_are_sized_by_events_not_files(tmp_path: Path, run_job: RunJob) -> None:
    source = tmp_path / "in"
    for k in range(10):  # 10 files of 50 events, every line as long, older files first
        path = write(
            source / f"p{k}.jsonl",
            jsonl(*({"src": 1, "type": "A", "start": 1000 + 50 * k + i} for i in range(50))),
        )
        os.utime(path, (time.time() - 100 + k, time.time() - 100 + k))
    with fake_service() as service:
        progress = run_job(source, [service.url], batch_events=150)
    assert progress.events == 500
    assert progress.batches == 4  # 3 files' bytes a trigger: 150, 150, 150 and the rest
    assert [e["start"] for e in service.events()] == [1000.0 + n for n in range(500)]


def test_without_overlap_each_batch_is_posted_before_spark_commits_it(
    tmp_path: Path, run_job: RunJob
) -> None:
    source = tmp_path / "in"
    for k in range(3):
        write(source / f"p{k}.jsonl", jsonl({"src": 1, "type": "A", "start": k}))
    with fake_service() as service:
        progress = run_job(source, [service.url], max_files_per_trigger=1, overlap=False)
    assert progress.batches == 3 and len(service.events()) == 3
    assert not (tmp_path / "checkpoint" / "scemon").exists()  # nothing kept: nothing handed over early
