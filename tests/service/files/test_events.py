"""Reading events files (JSON Lines, CSV) as ``scemon replay`` does. No engine needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ecq.errors import EventError
from ecq.kernel.make import jsonl_reader
from service.files import events as events_file
from service.files.events import event_format, read_events
from tests.service.files.write import write


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


# Lines of every kind the reader meets: plain events (with and without ids, attributes,
# ends, probabilities), events only Event.from_dict takes (not plainly valid for the
# compiled reader's fast path), blank and whitespace lines, and mistakes of each kind.
_LINES = [
    GOOD,
    '{"id": "p1", "src": "card-1", "type": "HOTL", "start": 1.5, "end": 2, "attrs": {"payment": 9.5}}',
    '{"src": 7, "type": "B", "start": 3, "prob": 0.5, "attrs": {"ok": true, "n": 3, "s": "x"}}',
    '{"src": 2, "type": "\u00e9t\u00e9", "start": 4, "end": null, "attrs": null}',
    '{"src": 1, "type": "A", "start": 1e3, "id": 12}',
    "",
    "   ",
    "\t",
    '{"src": 1, "type": "A", "start": 1, "end": 0.5}',
    '{"src": 1, "type": "A", "start": 1,}',
    "[1, 2]",
    '{"src": 1, "type": "A", "start": "noon"}',
    '{"src": 1, "type": "A", "start": 1, "colour": "red"}',
]


def _read_both(path: Path) -> list[Any]:
    """What the compiled reader and the loop line by line read from ``path``: the events'
    fields and ids, or the error's text; the compiled one with blocks of a few bytes,
    so lines cross blocks."""
    results = []
    for native, block in ((None, events_file._BLOCK), (jsonl_reader, 7), (jsonl_reader, 1 << 20)):
        with (
            patch.object(events_file, "jsonl_reader", native or (lambda: None)),
            patch.object(events_file, "_BLOCK", block),
        ):
            try:
                got: Any = [(e.to_dict(), e.id, e.src, e.type) for e in read_events(path)]
            except EventError as err:
                got = str(err)
        results.append(got)
    return results


@pytest.mark.skipif(jsonl_reader() is None, reason="the compiled kernel is not built")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.sampled_from(range(len(_LINES))), max_size=12),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
    st.booleans(),
)
def test_jsonl_compiled_reader_reads_what_the_line_loop_reads(
    tmp_path: Path, picks: list[int], newline: str, bom: bool, last_newline: bool
) -> None:
    """The compiled reader (whole blocks of lines, no Python loop) and the loop line by
    line read the same events with the same ids, or fail at the same line with the same
    words: blank lines counted, a byte-order mark, CRLF, a last line without a newline,
    lines across the blocks it reads."""
    text = newline.join(_LINES[k] for k in picks) + (newline if last_newline else "")
    path = tmp_path / "e.jsonl"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    loop, small_blocks, big_blocks = _read_both(path)
    assert small_blocks == loop
    assert big_blocks == loop


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
