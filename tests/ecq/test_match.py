"""``ecq.match.write_block``: a batch's matches as one JSON text, the pure writer (the
compiled one is held to it in test_accel.py)."""

from __future__ import annotations

import json
from typing import Any

from ecq.event import Event
from ecq.match import PyMatch, write_block


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def test_the_pure_block_writer_numbers_each_match_and_says_where_it_starts() -> None:
    a, b = Event(1, "A", 1.0, id="a"), Event(1, "B", 2.5)
    b.arrival = 4
    matches = [
        PyMatch("q1", 1, 1.0, 2.5, [a, b]),
        PyMatch("q\u00e9", "s", 0.5, 3.0, [[a, b]], {"v": 2}, 0.25),
    ]
    text, starts = write_block(matches, 7, _compact)
    assert json.loads(text) == [
        {
            "query": "q1",
            "src": 1,
            "start": 1.0,
            "end": 2.5,
            "events": ["a", 4],
            "attrs": {},
            "prob": 1.0,
            "seq": 7,
        },
        {
            "query": "q\u00e9",
            "src": "s",
            "start": 0.5,
            "end": 3.0,
            "events": [["a", 4]],
            "attrs": {"v": 2},
            "prob": 0.25,
            "seq": 8,
        },
    ]
    assert [json.loads(text[starts[k] : starts[k + 1] - 1])["seq"] for k in range(2)] == [7, 8]
    assert starts[-1] == len(text)
    # The matches' own seq is left as it was: the caller's numbering is the wire's only.
    assert [m.seq for m in matches] == [-1, -1]
    assert write_block([], 3, _compact) == ("[]", [1])
