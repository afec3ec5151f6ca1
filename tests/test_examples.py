"""The committed example events are exactly what examples/make_example.py makes, so the
script stays the one description of the data."""

from __future__ import annotations

import runpy
from pathlib import Path

import orjson

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_committed_example_events_are_what_the_script_makes() -> None:
    make = runpy.run_path(str(EXAMPLES / "make_example.py"))["make"]
    committed = [orjson.loads(line) for line in (EXAMPLES / "events.jsonl").read_bytes().splitlines()]
    assert committed == make()
    assert len(committed) >= 200
