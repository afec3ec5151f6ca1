"""Event time through the Spark job and a real service: disorder across micro-batches
within the service's lateness gives the in-order matches; a late event is posted,
applied and dead-lettered with how late it was; a far-future event is refused,
dead-lettered and changes no other event's matches; the job checks the lateness."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from ecq.engine import Engine
from ecq.event import Event
from ecq.kernel.make import match_writer
from ecq.time.timekeeper import TimeKeeper
from service.pipeline.checks import check_job
from service.pipeline.options import JobError, JobOptions
from tests.service.conftest import StartServer
from tests.service.pipeline.conftest import RunJob, ws_matches

pytestmark = [pytest.mark.spark, pytest.mark.server]

QUERIES = [("ab", "SEQ(A a, B b) WHERE a.x = b.x WITHIN 20 s MODE ALL"), ("abc", "SEQ(A, B, C) WITHIN 30 s")]
LATENESS = 30.0


def files() -> list[list[dict[str, Any]]]:
    """Four files of 100 s each, in arrival order. File 2 carries 20 events of file 1's
    time (at most 25 s late: put in order by the buffer), file 3 one event of file 0's
    (about 200 s late: late), file 1 one event in milliseconds (refused)."""
    parts: list[list[dict[str, Any]]] = []
    for k in range(4):
        parts.append(
            [
                {
                    "id": f"f{k}-{i}",
                    "src": i % 3,
                    "type": "ABC"[(i + k) % 3],
                    "start": k * 100 + i * 0.5,
                    "attrs": {"x": i % 2},
                }
                for i in range(200)
            ]
        )
    moved = [e for e in parts[1] if e["start"] >= 175][:20]
    parts[1] = [e for e in parts[1] if e not in moved]
    parts[2] = moved + parts[2]
    straggler = parts[0].pop(10)
    parts[3].append(straggler)
    parts[1].insert(5, {"id": "ms", "src": 1, "type": "A", "start": 1.7e11, "attrs": {"x": 0}})
    return parts


def expected(parts: list[list[dict[str, Any]]]) -> tuple[list[dict[str, Any]], list[tuple[str, float]]]:
    """The matches of the files posted one by one, each sorted, through a time keeper
    with the service's lateness (the far-future event left out), and the late events."""
    keeper = TimeKeeper(Engine(), LATENESS)
    for name, text in QUERIES:
        keeper.engine.register(name, text)
    found, late = [], []
    for part in parts:
        events = sorted((e for e in part if e["id"] != "ms"), key=lambda e: (e["start"], e["id"]))
        matches, stragglers = keeper.process([Event.from_dict(e) for e in events])
        found += matches
        late += [(str(e.id), by) for e, by in stragglers]
    found += keeper.advance_time(math.inf)
    write = match_writer()
    return [
        {k: v for k, v in orjson.loads(orjson.dumps(write(m))).items() if k != "seq"} for m in found
    ], late


def test_disorder_across_micro_batches_late_and_far_future_events(
    tmp_path: Path, run_job: RunJob, start_server: StartServer
) -> None:
    parts = files()
    source = tmp_path / "in"
    source.mkdir()
    for k, part in enumerate(parts):
        path = source / f"part-{k}.jsonl"
        path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in part))
        os.utime(path, (time.time() - 100 + k, time.time() - 100 + k))
    server = start_server(SCEMON_LATENESS=str(LATENESS))
    client = server.client()
    client.register_bulk([{"name": name, "text": text} for name, text in QUERIES])

    progress = run_job(source, [server.url], max_files_per_trigger=1, lateness=LATENESS)
    assert progress.batches == 4 and progress.late == 1 and progress.bad_rows == 1
    client.advance_time(50_000.0)  # within --max-ahead of this small-time stream
    got = [{k: v for k, v in m.items() if k != "seq"} for m in ws_matches(server.url)]
    want, late = expected(parts)
    assert got == want and len(got) > 100
    assert [name for name, _ in late] == ["f0-10"]
    # The straggler matched nothing, so the whole equals the sorted stream without it:
    # the disorder within the lateness was put right, and the refused event changed nothing.
    engine = Engine()
    for name, text in QUERIES:
        engine.register(name, text)
    rest = sorted(
        (e for part in parts for e in part if e["id"] not in ("ms", "f0-10")), key=lambda e: e["start"]
    )
    in_order = engine.process([Event.from_dict(e) for e in rest]) + engine.advance_time(math.inf)
    assert [m["events"] for m in got] == [m.event_ids() for m in in_order]

    dead = tmp_path / "dead-letter"
    [late_line] = [
        orjson.loads(line) for line in (dead / "batch-00000003-late.jsonl").read_bytes().splitlines()
    ]
    assert late_line["file"].endswith("/part-3.jsonl") and late_line["line"] == 201
    assert (
        late_line["reason"] == f"late by {late[0][1]:g} s" and orjson.loads(late_line["raw"])["id"] == "f0-10"
    )
    [refused] = [
        orjson.loads(line) for line in (dead / "batch-00000001-rejected.jsonl").read_bytes().splitlines()
    ]
    assert orjson.loads(refused["raw"])["id"] == "ms" and refused["line"] == 6
    assert "ahead of the" in refused["reason"] and "field 'end'" in refused["reason"]
    assert sorted(p.name for p in dead.iterdir()) == [
        "batch-00000001-rejected.jsonl",
        "batch-00000003-late.jsonl",
    ]
    assert client.stats().late_events == 1 and client.stats().refused_ahead == 1


def test_the_job_refuses_to_start_against_a_service_with_less_lateness(
    tmp_path: Path, start_server: StartServer
) -> None:
    server = start_server(SCEMON_LATENESS="10")
    (tmp_path / "in").mkdir()
    options = JobOptions(
        source=str(tmp_path / "in"),
        services=[server.url],
        checkpoint=str(tmp_path / "c"),
        dead_letter=str(tmp_path / "d"),
        lateness=60.0,
    )
    with pytest.raises(JobError, match=r"holds events for 10 s \(its --lateness\).*--lateness 60"):
        check_job(options)
    check_job(JobOptions(**{**options.__dict__, "lateness": 10.0}))
