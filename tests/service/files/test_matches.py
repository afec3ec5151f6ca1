"""Writing matches as ``scemon replay`` does: JSON Lines, to a file only on success."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ecq.event import Event
from ecq.match import Match
from service.files.matches import match_line, open_output

# ---------------------------------------------------------------------------- output


def test_match_line_is_one_json_record_naming_events_by_id() -> None:
    a, b = Event(1, "A", 1, id="a"), Event(1, "B", 2, 3, id=5)
    line = match_line(Match("q", 1, 1.0, 3.0, [a, [b]], {"n": 2}, 0.5, 7))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert orjson.loads(line) == {
        "query": "q",
        "src": 1,
        "start": 1.0,
        "end": 3.0,
        "events": ["a", [5]],
        "attrs": {"n": 2},
        "prob": 0.5,
        "seq": 7,
    }


def test_output_file_appears_only_when_the_block_succeeds(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    with pytest.raises(RuntimeError), open_output(str(target)) as stream:
        stream.write(b"half\n")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    with open_output(str(target)) as stream:
        stream.write(b"whole\n")
    assert target.read_bytes() == b"whole\n"
    assert list(tmp_path.iterdir()) == [target]


def test_failed_replay_keeps_the_previous_output_file(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_bytes(b"old\n")
    with pytest.raises(RuntimeError), open_output(str(target)) as stream:
        stream.write(b"new\n")
        raise RuntimeError("boom")
    assert target.read_bytes() == b"old\n"


def test_output_into_missing_directory_names_the_target(tmp_path: Path) -> None:
    target = tmp_path / "nowhere" / "out.jsonl"
    with pytest.raises(OSError) as info, open_output(str(target)):
        pass
    assert info.value.filename == str(target)
