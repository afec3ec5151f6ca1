"""The replay itself (``scemon replay``'s run, in process): what it writes equals the
reference, and the collector it tunes is given back."""

from __future__ import annotations

import gc
import io
import json
import random
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from service.cli.collector import collector_quiet, freeze_so_far, tuned_collector
from service.cli.replay import run
from service.files.events import read_events
from service.files.queries import build_engine, read_queries
from tests import reference
from tests.ecq.test_properties import CLASSES, normalise
from tests.match_share import min_share, record
from tests.strategies import query_sets, streams


@min_share(0.25)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query_sets(CLASSES), streams(CLASSES, n_sources=3, max_len=16))
def test_replay_output_equals_reference(
    queries: list[tuple[str, dict[str, Any]]], events: list[dict[str, Any]]
) -> None:
    """What ``scemon replay`` writes, read back, equals the reference (events without
    ``id`` are named by their line number, which is their arrival index)."""
    with tempfile.TemporaryDirectory() as tmp:
        qpath = Path(tmp) / "queries.json"
        epath = Path(tmp) / "events.jsonl"
        qpath.write_text(json.dumps([{"name": n, "pattern": q} for n, q in queries]))
        epath.write_text(
            "".join(json.dumps({k: v for k, v in e.items() if k != "id"}) + "\n" for e in events)
        )
        specs = read_queries(qpath)
        engine = build_engine(specs, qpath)
        buffer = io.BytesIO()
        run(engine, read_events(epath), buffer)
    written = [json.loads(line) for line in buffer.getvalue().splitlines()]
    expected = reference.evaluate_queries(
        queries, [{k: v for k, v in e.items() if k != "id"} for e in events]
    )
    assert [m.pop("seq") for m in written] == list(range(len(written)))
    for m in expected:
        m.pop("trigger")
    record(expected)
    assert normalise(written) == normalise(expected)


def test_the_tuned_collector_is_restored() -> None:
    """``scemon replay``, ``stream`` and ``demo`` tune the cyclic collector (a quarter of
    a replay's time went to walking the events it holds); the process gets it back as
    it was."""
    before = gc.get_threshold()
    with tuned_collector():
        assert gc.get_threshold()[0] > before[0]
        kept = [object() for _ in range(10)]
        freeze_so_far()
        assert gc.get_freeze_count() >= len(kept)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError), tuned_collector():
        raise RuntimeError("a failed replay")
    assert gc.get_threshold() == before


def test_imports_run_with_the_collector_quiet() -> None:
    """``collector_quiet`` (the CLI's modules load inside it): no collection in the block,
    none set off by what it leaves alive after it, the collector as it was."""
    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        with collector_quiet():
            assert not gc.isenabled()
            kept: list[list[int]] = [[] for _ in range(20_000)]
        assert gc.isenabled() and gc.get_count()[0] < 1_000
        after: list[list[int]] = [[] for _ in range(100)]
        gc.disable()
        with collector_quiet():
            pass
        assert not gc.isenabled()  # left off, as it was
        gc.enable()
    finally:
        gc.callbacks.remove(seen)
    assert collections == [] and len(kept) == 20_000 and len(after) == 100
    assert gc.get_freeze_count() == 0


def test_the_tuned_collector_hands_back_no_young_objects() -> None:
    """What the block leaves alive is in the oldest generation when the default
    thresholds are back, so the next allocation does not set off a collection walking
    all of it (the young count would be past 700 at once)."""
    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    with tuned_collector():
        kept: list[list[int]] = [[] for _ in range(20_000)]  # tracked containers, young
        assert gc.get_count()[0] >= len(kept)
        gc.callbacks.append(seen)
    try:
        after: list[list[int]] = [[] for _ in range(100)]  # a few allocations, as any code makes
    finally:
        gc.callbacks.remove(seen)
    assert collections == [] and gc.get_count()[0] < 1_000
    assert gc.get_freeze_count() == 0 and len(kept) == 20_000 and len(after) == 100


def test_replay_reads_its_events_with_the_collector_paused_and_freezes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The events are read with the collector off and frozen before it is back on: no
    young collection walks them, while reading (4 of them over the demo's 120,000
    events, a third of the reading) or after (one more, once it is back on). The parsed
    queries and the engine are frozen before: no collection walks them either."""
    from typer.testing import CliRunner

    import service.cli.replay as replay_module
    from service.cli.app import app

    seen: dict[str, Any] = {}
    read, go = replay_module.read_events, replay_module.run

    def reading(*args: Any) -> Any:
        seen["reading with the collector on"] = gc.isenabled()
        # the parsed queries and the engine, frozen as soon as they are made
        seen["frozen before reading"], seen["young before reading"] = gc.get_freeze_count(), gc.get_count()[0]
        return read(*args)

    def running(keeper: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
        seen["young count"], seen["frozen"], seen["events"] = (
            gc.get_count()[0],
            gc.get_freeze_count(),
            len(batch),
        )
        return go(keeper, batch, *args, **kwargs)

    monkeypatch.setattr(replay_module, "read_events", reading)
    monkeypatch.setattr(replay_module, "run", running)
    queries = tmp_path / "q.txt"
    queries.write_text("QUERY ab\nSEQ(A, B) WITHIN 10 s\n")
    events = [{"src": i % 7, "type": "AB"[i % 2], "start": float(i)} for i in range(3000)]
    result = CliRunner().invoke(
        app, ["replay", "-q", str(queries), "-e", str(_write(tmp_path / "e.jsonl", events))]
    )
    assert result.exit_code == 0, result.output
    assert seen["reading with the collector on"] is False and seen["events"] == 3000
    assert seen["frozen"] >= 3000 and seen["young count"] < 1000, seen
    assert seen["frozen before reading"] > 100 and seen["young before reading"] < 100, seen
    assert gc.isenabled() and gc.get_freeze_count() == 0


def _write(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def _replay(*args: str | Path) -> tuple[list[dict[str, Any]], str]:
    from tests.service.conftest import scemon

    result = scemon("replay", *args)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()], result.stderr


def test_replay_with_lateness_gives_the_sorted_files_matches_and_counts_late_events(tmp_path: Path) -> None:
    queries = tmp_path / "q.txt"
    queries.write_text("QUERY seq\nSEQ(A, B, !C) WITHIN 6 s\nQUERY conj\nAND(A, C) WITHIN 3 s MODE ALL\n")
    rng = random.Random(4)
    events: list[dict[str, Any]] = [
        {"id": f"e{i}", "src": rng.randrange(2), "type": rng.choice("ABC"), "start": i * 0.5}
        for i in range(400)
    ]
    # Each event at most 4 s late: arrival by start + a delay in [0, 4].
    shuffled = sorted(events, key=lambda e: (e["start"] + rng.randrange(9) / 2, rng.random()))
    in_order, _ = _replay("-q", queries, "-e", _write(tmp_path / "sorted.jsonl", events))
    held, stderr = _replay(
        "-q", queries, "-e", _write(tmp_path / "shuffled.jsonl", shuffled), "--lateness", "4"
    )
    assert held == in_order and len(in_order) > 50
    assert stderr.rstrip().endswith(", 0 late")
    plain, stderr = _replay("-q", queries, "-e", tmp_path / "shuffled.jsonl")
    found = re.search(r", (\d+) late \(first: 'e\d+' by [0-9.]+ s", stderr)
    assert found is not None, stderr
    late = int(found.group(1))
    assert late > 0
    assert plain != in_order


def test_replay_refuses_a_far_future_event_naming_it(tmp_path: Path) -> None:
    from tests.service.conftest import scemon

    queries = tmp_path / "q.txt"
    queries.write_text("QUERY ab\nSEQ(A, B) WITHIN 10 s\n")
    events = [{"src": 1, "type": "A", "start": 1.0}, {"src": 1, "type": "B", "start": 2.0}]
    clean, _ = _replay("-q", queries, "-e", _write(tmp_path / "clean.jsonl", events))
    poisoned = _write(
        tmp_path / "poisoned.jsonl", [{"id": "ms", "src": 1, "type": "A", "start": 1.7e12}, *events]
    )
    result = scemon("replay", "-q", queries, "-e", poisoned, "-o", tmp_path / "out.jsonl")
    assert result.returncode == 1 and result.stdout == "" and not (tmp_path / "out.jsonl").exists()
    assert "event 0 (id 'ms'), field 'end'" in result.stderr and "ahead of the wall clock" in result.stderr
    # Taken as before (--max-ahead inf), the one event moves the clock past every other.
    taken, stderr = _replay("-q", queries, "-e", poisoned, "--max-ahead", "inf")
    assert len(clean) == 1 and taken == [] and ", 2 late" in stderr
