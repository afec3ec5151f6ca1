"""Files → Spark job → real ``scemon serve`` → WebSocket, held to ``scemon replay`` of the
same events: the same matches, none lost and none twice — across a killed and restarted
job, and across two service shards."""

from __future__ import annotations

import csv
import io
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from api.spark_sink import shard_of
from service.cli.queries import register_everywhere
from tests.service.conftest import ROOT, StartService, scemon
from tests.service.pipeline.conftest import RunJob, start_job, ws_matches

pytestmark = [pytest.mark.spark, pytest.mark.server]

QUERIES = ROOT / "examples" / "queries.txt"  # none ends with a negation: no match waits on time
PARTS = 4


# The example payments span 1.5 days of their own small times (not epoch time), and a
# micro-batch of two files climbs 94,000 s from the clock it finds: more than the
# default --max-ahead lets one batch climb (docs/semantics.md).
WIDE = {"SCEMON_MAX_AHEAD": "200000"}


def card_events() -> list[dict[str, Any]]:
    """The example payments with integer card numbers; every fifth without an id."""
    out = []
    for n, line in enumerate((ROOT / "examples" / "events.jsonl").read_bytes().splitlines()):
        event = orjson.loads(line)
        event["src"] = int(event["src"].removeprefix("card-"))
        if n % 5 == 0:
            del event["id"]
        out.append(event)
    return out


def write_parts(folder: Path, events: list[dict[str, Any]], fmt: str) -> dict[int, str]:
    """The events in PARTS consecutive files (older mtimes first, so Spark takes them in
    order), and the whole as ``all.<fmt>`` beside the folder for replay. Returns, for each
    replay id of an id-less event (its number in the whole file), the job's id."""
    folder.mkdir(parents=True)
    size = -(-len(events) // PARTS)
    names: dict[int, str] = {}
    for k in range(PARTS):
        part = events[k * size : (k + 1) * size]
        path = folder / f"part-{k}.{fmt}"
        path.write_text(render(part, fmt))
        os.utime(path, (time.time() - 100 + k, time.time() - 100 + k))
        names.update({k * size + i: f"{path.name}:{i}" for i, e in enumerate(part) if "id" not in e})
    (folder.parent / f"all.{fmt}").write_text(render(events, fmt))
    return names


def render(events: list[dict[str, Any]], fmt: str) -> str:
    if fmt == "jsonl":
        return "".join(orjson.dumps(e).decode() + "\n" for e in events)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["id", "src", "type", "start", "payment", "merchant"])
    for e in events:
        writer.writerow(
            [e.get("id", ""), e["src"], e["type"], e["start"], e["attrs"]["payment"], e["attrs"]["merchant"]]
        )
    return out.getvalue()


def replayed(tmp_path: Path, fmt: str, names: dict[int, str]) -> Counter[bytes]:
    result = scemon("replay", "--queries", QUERIES, "--events", tmp_path / f"all.{fmt}")
    assert result.returncode == 0, result.stderr
    matches = [orjson.loads(line) for line in result.stdout.splitlines()]
    for match in matches:
        match["events"] = renamed(match["events"], names)
    return canonical(matches)


def renamed(events: Any, names: dict[int, str]) -> Any:
    """Replay's ids of id-less events as the job's (a Kleene component is a list)."""
    if isinstance(events, list):
        return [renamed(e, names) for e in events]
    return names.get(events, events) if isinstance(events, int) else events


def canonical(matches: list[dict[str, Any]]) -> Counter[bytes]:
    """Matches without ``seq`` (each service numbers its own), as a multiset."""
    return Counter(
        orjson.dumps({k: v for k, v in m.items() if k != "seq"}, option=orjson.OPT_SORT_KEYS) for m in matches
    )


def register(*urls: str) -> None:
    assert len(list(register_everywhere(list(urls), QUERIES))) == len(urls)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_the_stream_gives_exactly_the_matches_of_replay(
    fmt: str, tmp_path: Path, run_job: RunJob, start_service: StartService
) -> None:
    names = write_parts(tmp_path / "in", card_events(), fmt)
    service = start_service(**WIDE)
    register(service.url)
    progress = run_job(tmp_path / "in", [service.url], max_files_per_trigger=2)
    got = ws_matches(service.url)
    assert progress.batches == 2 and progress.bad_rows == 0
    assert [m["seq"] for m in got] == list(range(len(got)))
    assert canonical(got) == replayed(tmp_path, fmt, names)
    assert len(got) == 54 and progress.matches == 54


def test_two_shards_give_exactly_the_matches_of_one_service(
    tmp_path: Path, run_job: RunJob, start_service: StartService
) -> None:
    write_parts(tmp_path / "in", card_events(), "jsonl")
    single, first, second = start_service(**WIDE), start_service(**WIDE), start_service(**WIDE)
    register(single.url, first.url, second.url)
    run_job(tmp_path / "in", [single.url], checkpoint=str(tmp_path / "c1"))
    run_job(tmp_path / "in", [first.url, second.url], checkpoint=str(tmp_path / "c2"))
    one = ws_matches(single.url)
    shards = [ws_matches(first.url), ws_matches(second.url)]
    assert all(shards)
    for k, matches in enumerate(shards):
        assert {shard_of(m["src"], 2) for m in matches} == {k}
    assert canonical(shards[0]) + canonical(shards[1]) == canonical(one)


def test_a_killed_job_restarted_from_its_checkpoint_loses_and_repeats_nothing(
    tmp_path: Path, start_service: StartService
) -> None:
    names = write_parts(tmp_path / "in", card_events(), "jsonl")
    service = start_service(**WIDE)
    register(service.url)
    command = [
        sys.executable,
        "-m",
        "service.cli",
        "stream",
        "--source",
        tmp_path / "in",
        "--service",
        service.url,
        "--checkpoint",
        tmp_path / "ck",
        "--dead-letter",
        tmp_path / "dead",
        "--once",
        "--max-files-per-trigger",
        "1",
    ]
    job = start_job(command, ROOT)
    assert job.stderr is not None
    try:
        for line in job.stderr:  # "batch 1: ..." is written after the post, before Spark commits
            if line.startswith("batch 1:"):
                os.kill(job.pid, signal.SIGKILL)
                # Where the batch's time went: Spark's part, then the sink's.
                assert re.search(r"\([\d.]+s collecting, [\d.]+s posting;", line), line
                break
    finally:
        if job.poll() is None:
            os.kill(job.pid, signal.SIGKILL)
        job.wait(timeout=30)
        job.stderr.close()
    assert job.returncode == -signal.SIGKILL
    assert 0 < len(ws_matches(service.url, idle=1.0)) < 54  # killed mid-stream

    restart = subprocess.run(list(map(str, command)), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert restart.returncode == 0, restart.stderr
    got = ws_matches(service.url)
    assert [m["seq"] for m in got] == list(range(len(got)))  # no duplicate: one seq per match
    assert canonical(got) == replayed(tmp_path, "jsonl", names)

    # And when Spark re-runs a batch that was delivered (crash after post, before commit),
    # the service recognises it: nothing changes.
    last = max(int(p.name) for p in (tmp_path / "ck" / "commits").iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (tmp_path / "ck" / "commits" / name).unlink()
    rerun = subprocess.run(list(map(str, command)), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "already applied" in rerun.stderr
    assert canonical(ws_matches(service.url)) == canonical(got)
