"""The bytes an event takes in the source's files, which size the job's micro-batches."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from service.pipeline.options import JobOptions
from service.pipeline.sources import DEFAULT_EVENT_BYTES, bytes_per_event


def options(source: Path | str, fmt: str | None = None) -> JobOptions:
    return JobOptions(
        source=str(source), services=["http://127.0.0.1:1"], checkpoint="ck", dead_letter="d", fmt=fmt
    )


def test_lines_of_the_files_there_give_the_bytes_per_event(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(b"x" * 99 + b"\n" + b"y" * 199 + b"\n")  # 300 bytes, 2 events
    (tmp_path / "b.csv").write_bytes(b"z" * 49 + b"\n" + b"w" * 50)  # a last line without its newline
    (tmp_path / ".hidden.jsonl").write_bytes(b"\n" * 1000)  # Spark skips it: so does the estimate
    assert bytes_per_event(options(tmp_path)) == (300 + 100) / 4


def test_parquet_files_are_counted_by_rows(tmp_path: Path) -> None:
    out = io.BytesIO()
    pq.write_table(pa.table({"src": list(range(1000)), "type": ["A"] * 1000, "start": [1.0] * 1000}), out)
    (tmp_path / "e.parquet").write_bytes(out.getvalue())
    assert bytes_per_event(options(tmp_path)) == len(out.getvalue()) / 1000


def test_nothing_to_measure_gives_the_default(tmp_path: Path) -> None:
    assert bytes_per_event(options(tmp_path)) == DEFAULT_EVENT_BYTES  # an empty folder
    assert bytes_per_event(options(tmp_path / "absent")) == DEFAULT_EVENT_BYTES
    assert bytes_per_event(options("hdfs://cluster/in")) == DEFAULT_EVENT_BYTES
    assert bytes_per_event(options("rate:100")) == DEFAULT_EVENT_BYTES
