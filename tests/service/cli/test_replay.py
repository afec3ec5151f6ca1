"""The replay itself (``scemon replay``'s run, in process): what it writes equals the
reference, and the collector it tunes is given back."""

from __future__ import annotations

import gc
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from service.cli.replay import batch_collector, freeze_so_far, run
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


def test_batch_collector_restores_the_collector() -> None:
    """``scemon replay`` tunes the cyclic collector for its batch (a quarter of its
    time went to walking the events it holds); the process gets it back as it was."""
    before = gc.get_threshold()
    with batch_collector():
        assert gc.get_threshold()[0] > before[0]
        kept = [object() for _ in range(10)]
        freeze_so_far()
        assert gc.get_freeze_count() >= len(kept)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError), batch_collector():
        raise RuntimeError("a failed replay")
    assert gc.get_threshold() == before
