"""Events files, read as ``scemon replay`` reads them (and, cell by cell, as the Spark
job does: :mod:`service.pipeline.rows` uses the CSV rules here).

Every reader validates the whole file before anything is done with it and names the
place of the first mistake (file, line, field).

* **JSON Lines** — one event object per line (docs/semantics.md §1); blank lines are
  skipped but counted, so line numbers are the editor's.
* **CSV** — a header row naming the columns ``src``, ``type``, ``start`` (required) and
  ``id``, ``end``, ``prob`` (optional); every other column is an attribute. Cells that look
  like numbers become ints or floats, ``true``/``false`` become booleans, an empty cell
  leaves the field or attribute out; ``id`` and ``src`` stay strings unless they are
  integer literals.

The file order is the arrival order. An event without an ``id`` gets one: its 0-based
line number (JSON Lines) or its 0-based data row number (CSV, header and blank rows not
counted), so each match can name all its events. No condition can read ``id``, so this
changes no match.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson

from ecq.errors import EventError, ScemonError
from ecq.event import AttrValue, Event
from ecq.kernel.make import event_reader, jsonl_reader

if TYPE_CHECKING:
    from ecq.kernel._events import EventReader

__all__ = [
    "EVENT_FORMATS",
    "Progress",
    "collector_paused",
    "csv_columns",
    "csv_ident",
    "csv_value",
    "event_format",
    "read_events",
]

EVENT_FORMATS = ("jsonl", "csv")

# Called now and then with the number of lines read.
Progress = Callable[[int], None]

_CSV_FIELDS = ("id", "src", "type", "start", "end", "prob")
_CSV_REQUIRED = ("src", "type", "start")
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
# orjson writes integers only up to 64 bits; larger literals are kept as text or float.
_INT64 = range(-(2**63), 2**63)


def event_format(path: Path, fmt: str | None = None) -> str:
    """The events file's format: ``fmt`` when given, else ``csv`` for a ``.csv`` name and
    ``jsonl`` for anything else."""
    if fmt is not None:
        if fmt not in EVENT_FORMATS:
            raise ScemonError(f"unknown events format {fmt!r} (expected {' or '.join(EVENT_FORMATS)})")
        return fmt
    return "csv" if path.suffix.lower() == ".csv" else "jsonl"


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block, back on after if it was on.

    Why: a file's parse makes tens of thousands of container objects (events, their
    attribute dicts) that form no reference cycles, and the collector walked them again
    at every young collection — with the default thresholds every 700 allocations
    (2,000 from CPython 3.13): measured on a 10,000-event file of the demo's payments,
    9.1-9.7 µs an event with it against 7.0-7.5 without, a fifth of a Spark worker's
    CPU; with ``scemon replay``'s tuned thresholds still 4 collections of up to 100,000
    fresh events over the demo's 120,000, 38 ms (a third of the reading). Reference
    counting frees everything as usual; a caller that keeps the events freezes them
    (``gc.freeze``) before the collector is back on, else its next collection walks
    them once."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_events(path: Path, fmt: str | None = None, progress: Progress | None = None) -> list[Event]:
    """Read and validate every event of a file, in file (= arrival) order.

    Raises :class:`EventError` for the first bad event, with ``where`` = ``"<path> line
    <n>"`` (1-based, as an editor shows it) and the bad ``field``. ``progress`` is called
    now and then with the number of lines read. O(size of the file).
    """
    if event_format(path, fmt) == "csv":
        return _read_csv(path, progress)
    return _read_jsonl(path, progress)


def _read_jsonl(path: Path, progress: Progress | None) -> list[Event]:
    events: list[Event] = []
    native = jsonl_reader()
    with path.open("rb") as stream:
        if native is None:
            take = _line_reader(path, events)
            for index, raw in enumerate(stream):
                take(raw, index)
                if progress is not None and not index & 0xFFF:
                    progress(index)
            return events
        _read_jsonl_blocks(path, stream, native, events, progress)
    return events


# Bytes read at a time by the compiled reader: its lines need not fit a line buffer, and
# the file need not fit in memory beside its events.
_BLOCK = 8 << 20


def _read_jsonl_blocks(
    path: Path, stream: BinaryIO, native: EventReader, events: list[Event], progress: Progress | None
) -> None:
    """The compiled reader over whole lines, a block at a time; the line it stops at
    (one that is not plainly valid) is read here, which names its mistake, and it goes
    on from the next. The same events, ids and errors as the loop line by line."""
    take = _line_reader(path, events)
    loads = orjson.loads
    index = 0
    rest = b""
    while True:
        block = stream.read(_BLOCK)
        data = rest + block if rest else block
        if block:
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # no whole line yet
                rest = data
                continue
            data, rest = data[:cut], data[cut:]
        elif not data:
            return
        else:
            rest = b""  # the last line, without a newline
        at = 0
        if index == 0 and data.startswith(b"\xef\xbb\xbf"):
            at = 3
        while True:
            at, index = native.jsonl(data, at, index, loads, events, progress)
            if at >= len(data):
                break
            end = data.find(b"\n", at)
            end = len(data) if end < 0 else end + 1
            take(data[at:end], index)
            at, index = end, index + 1
        if not block:
            return


def _line_reader(path: Path, events: list[Event]) -> Callable[[bytes, int], None]:
    """Read one line (``index``, 0-based) into ``events``: skipped when blank, else one
    event, with the line's index as its id when it has none; a bad line raises
    :class:`EventError` naming the line and, for JSON, the column."""
    append = events.append
    loads = orjson.loads
    from_dict = event_reader()

    def take(raw: bytes, index: int) -> None:
        if index == 0 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if not raw.strip():
            return
        try:
            data = loads(raw)
        except orjson.JSONDecodeError as err:
            raise EventError(f"invalid JSON: {err.msg} (column {err.colno})", _line(path, index)) from None
        try:
            event = from_dict(data, None)
        except EventError as err:
            raise EventError(err.message, _line(path, index), err.field) from None
        if event.id is None:
            event.id = index
        append(event)

    return take


def _read_csv(path: Path, progress: Progress | None) -> list[Event]:
    import csv  # here: a JSON Lines replay has no use for it

    events: list[Event] = []
    with path.open(newline="", encoding="utf-8-sig") as stream:
        reader = csv.reader(stream)
        try:
            header = next(reader, None)
            if header is None:
                return events
            columns = csv_columns(path, header)
            width = len(columns)
            last_line = reader.line_num
            row_number = 0
            for row in reader:
                line, last_line = last_line + 1, reader.line_num
                if not row:
                    continue
                where = f"{path} line {line}"
                if len(row) != width:
                    raise EventError(f"has {len(row)} cells, the header has {width}", where)
                try:
                    event = Event.from_dict(_csv_event(columns, row))
                except EventError as err:
                    raise EventError(err.message, where, err.field) from None
                if event.id is None:
                    event.id = row_number
                events.append(event)
                row_number += 1
                if progress is not None and not row_number & 0xFFF:
                    progress(line)
        except csv.Error as err:
            raise EventError(f"bad CSV: {err}", f"{path} line {reader.line_num}") from None
        except UnicodeDecodeError as err:
            raise EventError(f"not UTF-8 text ({err.reason})", f"{path} line {reader.line_num + 1}") from None
    return events


def csv_columns(path: Path, header: list[str]) -> list[str]:
    where = f"{path} line 1"
    columns = [name.strip() for name in header]
    for name in columns:
        if not name:
            raise EventError("the header has an empty column name", where)
    for name in _CSV_REQUIRED:
        if name not in columns:
            raise EventError("missing column in the header", where, name)
    seen: set[str] = set()
    for name in columns:
        if name in seen:
            raise EventError("column appears twice in the header", where, name)
        seen.add(name)
    return columns


def _csv_event(columns: list[str], row: list[str]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    attrs: dict[str, AttrValue] = {}
    for name, cell in zip(columns, row, strict=True):
        if cell == "":
            continue
        if name == "id" or name == "src":
            data[name] = csv_ident(cell)
        elif name == "type":
            data[name] = cell
        elif name in _CSV_FIELDS:
            data[name] = csv_value(cell)  # a non-number is left for from_dict to reject
        else:
            attrs[name] = csv_value(cell)
    if attrs:
        data["attrs"] = attrs
    return data


def csv_ident(cell: str) -> str | int:
    if _INT.fullmatch(cell):
        number = int(cell)
        if number in _INT64:
            return number
    return cell


def csv_value(cell: str) -> AttrValue:
    text = cell.strip()
    if _INT.fullmatch(text):
        number = int(text)
        return number if number in _INT64 else float(number)
    if _FLOAT.fullmatch(text):
        return float(text)
    lowered = text.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    return cell


def _line(path: Path, index: int) -> str:
    return f"{path} line {index + 1}"
