"""Reading the files of ``scemon replay``: events, queries, output. No engine needed."""

from __future__ import annotations

import gc
from pathlib import Path

import orjson
import pytest

from ecq.errors import EventError, QueryError
from ecq.event import Event
from ecq.language.ast import Component, Query, Seq, to_json
from ecq.match import Match
from service import replay
from service.replay import QueryFileError, event_format, match_line, open_output, read_events, read_queries


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def jsonl_error(tmp_path: Path, lines: list[str]) -> EventError:
    path = write(tmp_path, "events.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(EventError) as info:
        read_events(path)
    return info.value


GOOD = '{"src": 1, "type": "A", "start": 1}'


# ------------------------------------------------------------------------ JSON Lines


def test_jsonl_events_in_file_order_with_fields(tmp_path: Path) -> None:
    text = (
        '{"id": "a1", "src": "card-1", "type": "A", "start": 1, "end": 2, "attrs": {"payment": 9.5}}\n'
        '{"src": 7, "type": "B", "start": 3, "prob": 0.5}\n'
    )
    events = read_events(write(tmp_path, "e.jsonl", text))
    assert [e.type for e in events] == ["A", "B"]
    first, second = events
    assert (first.id, first.src, first.start, first.end, first.attrs) == (
        "a1",
        "card-1",
        1.0,
        2.0,
        {"payment": 9.5},
    )
    assert (second.src, second.start, second.end, second.prob) == (7, 3.0, 3.0, 0.5)


def test_jsonl_event_without_id_is_named_by_its_0_based_line_number(tmp_path: Path) -> None:
    text = GOOD + "\n\n" + '{"id": "x", "src": 1, "type": "B", "start": 2}\n   \n' + GOOD + "\n"
    events = read_events(write(tmp_path, "e.jsonl", text))
    assert [e.id for e in events] == [0, "x", 4]


def test_jsonl_blank_lines_are_skipped_but_counted(tmp_path: Path) -> None:
    err = jsonl_error(tmp_path, [GOOD, "", "", '{"src": 1, "start": 1}'])
    assert err.where is not None and err.where.endswith("events.jsonl line 4")
    assert err.field == "type"


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('{"type": "A", "start": 1}', "src"),
        ('{"src": null, "type": "A", "start": 1}', "src"),
        ('{"src": 1, "start": 1}', "type"),
        ('{"src": 1, "type": "A"}', "start"),
        ('{"src": 1, "type": "A", "start": "noon"}', "start"),
        ('{"src": 1, "type": "A", "start": 1, "end": "later"}', "end"),
        ('{"src": 1, "type": "A", "start": 5, "end": 4}', "end"),
        ('{"src": 1, "type": "A", "start": 1, "attrs": [1, 2]}', "attrs"),
        ('{"src": 1, "type": "A", "start": 1, "attrs": {"x": {"y": 1}}}', "attrs"),
        ('{"src": 1, "type": "A", "start": 1, "attrs": {"x": [1]}}', "attrs"),
        ('{"src": 1, "type": "A", "start": 1, "prob": 0}', "prob"),
        ('{"src": 1, "type": "A", "start": 1, "colour": "red"}', "colour"),
        ('{"src": [1], "type": "A", "start": 1}', "src"),
    ],
)
def test_jsonl_bad_event_names_line_and_field(tmp_path: Path, line: str, field: str) -> None:
    err = jsonl_error(tmp_path, [GOOD, GOOD, line, GOOD])
    assert err.where == f"{tmp_path / 'events.jsonl'} line 3"
    assert err.field == field
    assert str(err).startswith(f"{tmp_path / 'events.jsonl'} line 3, field {field!r}: ")


def test_jsonl_bad_json_names_the_line(tmp_path: Path) -> None:
    err = jsonl_error(tmp_path, [GOOD, '{"src": 1, "type": "A", "start": 1,}'])
    assert err.where == f"{tmp_path / 'events.jsonl'} line 2"
    assert "invalid JSON" in str(err)


def test_jsonl_line_that_is_not_an_object_is_rejected(tmp_path: Path) -> None:
    err = jsonl_error(tmp_path, ["[1, 2]"])
    assert err.where == f"{tmp_path / 'events.jsonl'} line 1"
    assert "object" in str(err)


def test_jsonl_empty_file_has_no_events(tmp_path: Path) -> None:
    assert read_events(write(tmp_path, "e.jsonl", "")) == []


def test_jsonl_progress_is_reported(tmp_path: Path) -> None:
    seen: list[int] = []
    read_events(write(tmp_path, "e.jsonl", (GOOD + "\n") * 5000), progress=seen.append)
    assert seen and seen == sorted(seen)


# ------------------------------------------------------------------------------- CSV


def test_csv_columns_are_fields_and_the_rest_attributes(tmp_path: Path) -> None:
    text = (
        "id,src,type,start,end,payment,count,vip,merchant,note\n"
        "t1,card-1,A,1,2.5,9.50,3,true,Odeon,\n"
        ",42,B,3,,-2,1e3,FALSE,Rex,x y\n"
    )
    first, second = read_events(write(tmp_path, "e.csv", text))
    assert (first.id, first.src, first.type, first.start, first.end) == ("t1", "card-1", "A", 1.0, 2.5)
    assert first.attrs == {"payment": 9.5, "count": 3, "vip": True, "merchant": "Odeon"}
    assert isinstance(first.attrs["count"], int)
    assert (second.id, second.src, second.end) == (1, 42, 3.0)
    assert second.attrs == {"payment": -2, "count": 1000.0, "vip": False, "merchant": "Rex", "note": "x y"}


def test_csv_event_without_id_is_named_by_its_0_based_data_row(tmp_path: Path) -> None:
    text = "src,type,start\n1,A,1\n\n1,B,2\n"
    assert [e.id for e in read_events(write(tmp_path, "e.csv", text))] == [0, 1]


def test_csv_non_numeric_start_names_line_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, "e.csv", "src,type,start\n1,A,1\n1,A,noon\n")
    with pytest.raises(EventError) as info:
        read_events(path)
    assert info.value.where == f"{path} line 3"
    assert info.value.field == "start"


@pytest.mark.parametrize(
    ("row", "field"),
    [(",A,1,", "src"), ("1,,1,", "type"), ("1,A,,", "start"), ("1,A,5,4", "end"), ("1,A,1,x", "end")],
)
def test_csv_bad_row_names_line_and_field(tmp_path: Path, row: str, field: str) -> None:
    path = write(tmp_path, "e.csv", f"src,type,start,end\n1,A,1,1\n{row}\n")
    with pytest.raises(EventError) as info:
        read_events(path)
    assert info.value.where == f"{path} line 3"
    assert info.value.field == field


def test_csv_header_without_a_required_column_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, "e.csv", "src,start\n1,1\n")
    with pytest.raises(EventError) as info:
        read_events(path)
    assert info.value.where == f"{path} line 1"
    assert info.value.field == "type"


def test_csv_row_with_wrong_number_of_cells_is_rejected(tmp_path: Path) -> None:
    path = write(tmp_path, "e.csv", "src,type,start\n1,A,1\n1,A\n")
    with pytest.raises(EventError, match="line 3"):
        read_events(path)


def test_csv_line_numbers_count_quoted_newlines(tmp_path: Path) -> None:
    path = write(tmp_path, "e.csv", 'src,type,start,note\n1,A,1,"two\nlines"\n1,A,x,\n')
    with pytest.raises(EventError) as info:
        read_events(path)
    assert info.value.where == f"{path} line 4"


def test_event_format_follows_extension_unless_given() -> None:
    assert event_format(Path("x.csv")) == "csv"
    assert event_format(Path("x.CSV")) == "csv"
    assert event_format(Path("x.jsonl")) == "jsonl"
    assert event_format(Path("x.txt")) == "jsonl"
    assert event_format(Path("x.txt"), "csv") == "csv"


def test_format_option_reads_csv_from_any_name(tmp_path: Path) -> None:
    path = write(tmp_path, "events.txt", "src,type,start\n1,A,1\n")
    assert [e.type for e in read_events(path, "csv")] == ["A"]


# --------------------------------------------------------------------------- queries


def test_json_queries_file_with_text_and_pattern_entries(tmp_path: Path) -> None:
    query = Query(pattern=Seq((Component(classes=("A",)), Component(classes=("B",)))), within=10.0)
    entries = [
        {"name": "by_text", "text": "PATTERN SEQ(A, B) WITHIN 10 s"},
        {"name": "by_ast", **to_json(query)},
    ]
    path = tmp_path / "q.json"
    path.write_bytes(b"  \n" + orjson.dumps(entries))
    (n1, s1), (n2, s2) = read_queries(path)
    assert (n1, s1) == ("by_text", "PATTERN SEQ(A, B) WITHIN 10 s")
    assert n2 == "by_ast"
    assert isinstance(s2, Query) and s2.pattern == query.pattern and s2.within == 10.0 and s2.name == "by_ast"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"name": "a"}', "list"),
        ('[{"text": "SEQ(A, B) WITHIN 1"}]', "entry 0: 'name'"),
        ('[{"name": "a", "text": "A", "pattern": {}}]', "exactly one"),
        ('[{"name": "a"}]', "exactly one"),
        ('[{"name": "a", "text": 3}]', "'text' must be a string"),
        ('[{"name": "a", "pattern": {"kind": "seq", "items": []}}]', "$.pattern.items"),
        ('[{"name": "a", "text": "A"}, {"name": "a", "text": "B"}]', "twice"),
        ("[]", "no queries"),
        ('[{"name": "a",\n "text": }]', "line 2"),
    ],
)
def test_bad_json_queries_file_is_rejected_with_place(tmp_path: Path, text: str, needle: str) -> None:
    path = write(tmp_path, "q.json", text)
    with pytest.raises(QueryFileError) as info:
        read_queries(path)
    assert str(path) in str(info.value)
    assert needle in str(info.value)
    assert isinstance(info.value, QueryError)


def test_text_queries_file_gives_named_queries(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "q.txt",
        "QUERY first\nPATTERN SEQ(A, B)\nWITHIN 10 s\n\nQUERY second\nPATTERN A & B\nWITHIN 1 min\n",
    )
    specs = read_queries(path)
    assert [name for name, _ in specs] == ["first", "second"]
    assert all(isinstance(query, Query) and query.name == name for name, query in specs)
    second = specs[1][1]
    assert isinstance(second, Query) and second.within == 60.0


def test_text_queries_file_with_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "q.txt",
        "QUERY ok\nPATTERN SEQ(A, B) WITHIN 1 h\n\nQUERY bad\nPATTERN SEQ(A,, B)\nWITHIN 1 h\n",
    )
    with pytest.raises(QueryFileError) as info:
        read_queries(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert "line 5" in message
    assert "\n" not in message


def test_empty_text_queries_file_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(QueryFileError, match="no queries"):
        read_queries(write(tmp_path, "q.txt", "\n  \n"))


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


def test_batch_collector_restores_the_collector() -> None:
    """``scemon replay`` tunes the cyclic collector for its batch (a quarter of its
    time went to walking the events it holds); the process gets it back as it was."""
    before = gc.get_threshold()
    with replay.batch_collector():
        assert gc.get_threshold()[0] > before[0]
        kept = [object() for _ in range(10)]
        replay.freeze_so_far()
        assert gc.get_freeze_count() >= len(kept)
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError), replay.batch_collector():
        raise RuntimeError("a failed replay")
    assert gc.get_threshold() == before
