"""Parsing one file into event rows: replay's rules, stable ids, reasons for bad rows."""

from __future__ import annotations

import io
from pathlib import Path
from unittest.mock import patch

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ecq.kernel.make import jsonl_reader
from service.files.events import read_events
from service.pipeline import rows as rows_module
from service.pipeline.options import JobError, parse_mapping
from service.pipeline.rows import (
    PACKED_SCHEMA,
    ROW_SCHEMA,
    file_name,
    pack,
    parse_batches,
    rows_to_batch,
    unpack,
)
from service.pipeline.rows import parse_file as parse_batch


def parse_file(path: str, content: bytes, mapping: dict[str, str] | None = None) -> list[tuple]:
    """The file's rows as tuples of ROW_SCHEMA's columns, in file order."""
    batch = parse_batch(path, content, mapping=mapping)
    assert batch.schema == ROW_SCHEMA
    columns = [batch.column(k).to_pylist() for k in range(batch.num_columns)]
    return list(zip(*columns, strict=True))


JSONL = (
    b'{"id": "a1", "src": 1, "type": "A", "start": 1, "attrs": {"payment": 30}}\n'
    b"\n"
    b'{"src": "s2", "type": "B", "start": 2, "end": 3, "prob": 0.5}\n'
)


def good(rows: list[tuple]) -> list[dict]:
    names = ROW_SCHEMA.names
    return [dict(zip(names, row, strict=True)) for row in rows if row[names.index("error")] is None]


def bad(rows: list[tuple]) -> list[tuple[int, str]]:
    return [(row[2], str(row[10])) for row in rows if row[10] is not None]


def test_jsonl_rows_carry_replays_line_numbers_and_derived_ids() -> None:
    rows = parse_file("file:/in/day%201.jsonl", JSONL)
    assert [(r["index"], r["id"], r["src"], r["end"], r["prob"]) for r in good(rows)] == [
        (0, "a1", "1", 1.0, 1.0),
        (2, "day 1.jsonl:2", "s2", 3.0, 0.5),
    ]
    assert good(rows)[0]["attrs"] == '{"payment":30}'


def test_a_valid_file_gives_the_events_replay_reads(tmp_path: Path) -> None:
    csv_text = "id,src,type,start,payment,merchant\ntx1,7,CNMA_A,10,45.5,Rex\n,8,BAR_C,11,true,\n"
    path = tmp_path / "e.csv"
    path.write_text(csv_text)
    replayed = read_events(path)
    rows = good(parse_file(str(path), csv_text.encode()))
    assert [r["src"] for r in rows] == [str(e.src) for e in replayed]
    assert [r["type"] for r in rows] == [e.type for e in replayed]
    assert [orjson.loads(r["attrs"]) for r in rows] == [e.attrs for e in replayed]
    # replay names the id-less second row 1 (its data row number); the job, "e.csv:1"
    assert [r["id"] for r in rows] == ["tx1", "e.csv:1"]
    assert replayed[1].id == 1


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"not json", "invalid JSON"),
        (b'{"src": 1, "type": "A"}', "field 'start': missing"),
        (b'{"src": 1, "type": "A", "start": "noon"}', "field 'start': must be a number of seconds"),
        (b'{"src": 1, "type": "A", "start": 5, "end": 4}', "field 'end': end 4 is before start 5"),
        (b'{"src": 1, "type": "A", "start": 5, "colour": "red"}', "unknown field"),
        (b'{"src": 1, "type": "A", "start": 5, "attrs": {"x": [1]}}', "field 'attrs'"),
    ],
)
def test_a_bad_jsonl_line_is_a_dead_row_with_its_reason(line: bytes, reason: str) -> None:
    rows = parse_file("x.jsonl", b'{"src": 1, "type": "A", "start": 1}\n' + line + b"\n")
    assert len(good(rows)) == 1
    [(where, why)] = bad(rows)
    assert where == 2
    assert reason in why
    assert rows[1][11] == line.decode()  # the raw line, to find and fix it


def test_bad_csv_rows_name_their_line_and_the_rest_goes_on() -> None:
    text = b"src,type,start\n1,A,1\n2,B\n\n3,C,x\n4,D,4\n"
    rows = parse_file("x.csv", text)
    assert [r["id"] for r in good(rows)] == ["x.csv:0", "x.csv:3"]
    assert bad(rows) == [
        (3, "has 2 cells, the header has 3"),
        (5, "field 'start': must be a number of seconds, got string 'x'"),
    ]


def test_a_csv_without_the_required_columns_is_one_dead_row() -> None:
    rows = parse_file("x.csv", b"src,kind,start\n1,A,1\n")
    assert bad(rows) == [(1, "field 'type': missing column in the header; the file is skipped")]


def test_a_mapping_turns_a_flat_csv_into_events() -> None:
    text = b"card,merchant,ts,amount,city\n42,CNMA_A,3600,25.5,Oslo\n43,BAR_C,3700,,\n"
    rows = good(parse_file("p.csv", text, mapping={"src": "card", "type": "merchant", "start": "ts"}))
    assert [(r["src"], r["type"], r["start"], r["attrs"]) for r in rows] == [
        ("42", "CNMA_A", 3600.0, '{"amount":25.5,"city":"Oslo"}'),
        ("43", "BAR_C", 3700.0, None),
    ]


def test_a_mapped_column_that_is_missing_is_a_dead_row_saying_so() -> None:
    rows = parse_file(
        "p.jsonl", b'{"card": 1, "kind": "A"}\n', mapping={"src": "card", "type": "kind", "start": "ts"}
    )
    assert bad(rows) == [(1, "field 'start': missing (the --map column 'ts' is empty or absent)")]


def test_a_mapping_reads_parquet_with_timestamps_as_seconds() -> None:
    table = pa.table(
        {
            "card": pa.array([1, 2], pa.int64()),
            "kind": ["A", "B"],
            "at": pa.array([0, 90_000_000], pa.timestamp("us")),
            "amount": [1.5, None],
        }
    )
    out = io.BytesIO()
    pq.write_table(table, out)
    rows = good(
        parse_file("t.parquet", out.getvalue(), mapping={"src": "card", "type": "kind", "start": "at"})
    )
    assert [(r["id"], r["src"], r["start"], r["attrs"]) for r in rows] == [
        ("t.parquet:0", "1", 0.0, '{"amount":1.5}'),
        ("t.parquet:1", "2", 90.0, None),
    ]


def test_an_unreadable_parquet_file_is_one_dead_row() -> None:
    [(line, reason)] = bad(parse_file("t.parquet", b"not parquet"))
    assert line == 1 and "not a readable Parquet file" in reason


def test_rows_become_one_arrow_batch_of_the_declared_schema() -> None:
    batch = parse_batch("x.jsonl", JSONL + b"oops\n")
    assert batch.schema == ROW_SCHEMA
    assert batch.num_rows == 3
    assert rows_to_batch([]).num_rows == 0
    assert parse_batch("x.jsonl", b"").num_rows == 0


def test_good_and_bad_rows_keep_file_order_and_match_the_row_by_row_form() -> None:
    content = (
        b'[1]\n{"src": 1, "type": "A", "start": 1}\n\noops\n{"src": "b", "type": "B", "start": 2, "id": 7}\n'
    )
    rows = parse_file("f.jsonl", content)
    assert [(r[1], r[2], r[3], r[10] is None) for r in rows] == [
        (0, 1, None, False),
        (1, 2, "f.jsonl:1", True),
        (3, 4, None, False),
        (4, 5, "7", True),
    ]
    assert rows_to_batch(rows).equals(parse_batch("f.jsonl", content))


def test_a_spark_task_packs_each_files_rows_and_the_driver_unpacks_them_in_order() -> None:
    files = pa.record_batch(
        [
            pa.array(["a.jsonl", "b.jsonl"]),
            pa.array([JSONL, b'{"src": 9, "type": "Z", "start": 5}\n'], pa.binary()),
        ],
        names=["path", "content"],
    )
    packed = list(parse_batches([files]))
    assert [b.schema for b in packed] == [PACKED_SCHEMA, PACKED_SCHEMA]
    assert [b.num_rows for b in packed] == [1, 1]  # one cell per file
    table = unpack(pa.Table.from_batches(packed))
    assert table.schema == ROW_SCHEMA
    assert table.column("id").to_pylist() == ["a1", "a.jsonl:2", "b.jsonl:0"]
    # A table of rows already (the rate source's) passes as it is; no files, no rows.
    assert unpack(table) is table
    assert unpack(PACKED_SCHEMA.empty_table()).num_rows == 0
    assert unpack(pa.Table.from_batches([pack(rows_to_batch([]))])).num_rows == 0


def test_file_names_come_from_paths_and_uris() -> None:
    assert file_name("file:///data/in/a%20b.jsonl") == "a b.jsonl"
    assert file_name("hdfs://nn:8020/in/x.csv") == "x.csv"
    assert file_name("/data/in/y.jsonl") == "y.jsonl"


def test_parse_mapping_reads_pairs_and_refuses_mistakes() -> None:
    assert parse_mapping("src=card, start=ts") == {"src": "card", "start": "ts"}
    assert parse_mapping(None) is None
    for text, message in [
        ("source=card", "unknown event field 'source'"),
        ("src=a,src=b", "mapped twice"),
        ("src=a,type=a", "mapped to two fields"),
        ("src", "expected field=column"),
    ]:
        with pytest.raises(JobError, match=message):
            parse_mapping(text)


def test_a_task_parses_each_file_with_the_cyclic_collector_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The collector walked a file's fresh events again and again (a fifth of a worker's
    CPU): it is off while a file is parsed, and back on for everything else."""
    import gc

    import service.pipeline.rows as rows_module

    seen: list[bool] = []
    parse = rows_module.parse_file

    def watched(*args: object) -> pa.RecordBatch:
        seen.append(gc.isenabled())
        return parse(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(rows_module, "parse_file", watched)
    files = pa.record_batch(
        [pa.array(["a.jsonl", "b.jsonl"]), pa.array([JSONL, JSONL], pa.binary())], names=["path", "content"]
    )
    assert gc.isenabled()
    packed = list(parse_batches([files]))
    assert seen == [False, False] and len(packed) == 2
    assert gc.isenabled()
    # Off stays off: a caller that had paused it gets it back paused.
    gc.disable()
    try:
        list(parse_batches([files]))
        assert not gc.isenabled()
    finally:
        gc.enable()


_LINES = [
    b'{"src": 1, "type": "A", "start": 1}',
    b'{"id": "p1", "src": "card-1", "type": "HOTL", "start": 1.5, "end": 2, "attrs": {"payment": 9.5}}',
    b'{"src": 7, "type": "B", "start": 3, "prob": 0.5, "attrs": {"ok": true, "n": 3}}',
    b'{"src": "\\u00e9", "type": "A", "start": 4, "id": 12}',
    b"",
    b"  \r",
    b'{"src": 1, "type": "A", "start": 1, "end": 0.5}',
    b'{"src": 1, "type": "A", "start": 1,}',
    b"[1, 2]",
    b"oops",
]


@pytest.mark.skipif(jsonl_reader() is None, reason="the compiled kernel is not built")
@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_LINES), max_size=10), st.booleans(), st.booleans())
def test_the_compiled_reader_gives_the_rows_the_line_loop_gives(
    lines: list[bytes], bom: bool, last: bool
) -> None:
    """A Spark task's JSON Lines file read by the compiled reader (up to each bad line,
    judged in Python) and line by line: the same rows, good and bad, in the same order,
    with the same ids (``<file>:<index>`` for id-less events) and reasons."""
    content = (b"\xef\xbb\xbf" if bom else b"") + b"\n".join(lines) + (b"\n" if last else b"")
    compiled = parse_batch("f.jsonl", content)
    with patch.object(rows_module, "jsonl_reader", lambda: None):
        by_line = parse_batch("f.jsonl", content)
    assert compiled.equals(by_line)
