"""One input file's bytes → event rows and dead-letter rows, for the Spark job.

The job's file source hands each new file to a Spark task whole (``binaryFile``), and
this module turns it into rows of :data:`ROW_SCHEMA`. It runs in Spark's Python
workers, through ``mapInArrow``, and hands each file's rows back as one Arrow IPC
stream (one cell of :data:`PACKED_SCHEMA`), which the driver reads back with
:func:`unpack`: Spark moves one value per file instead of converting every row to its
own form and back. Parsing whole files here, rather than with Spark's own
JSON/CSV readers, is what lets the job keep two promises those readers cannot:

* every row knows its file and its 0-based line (JSON Lines) or data row (CSV, Parquet)
  number — the number ``scemon replay`` names an id-less event by — so each event gets
  a stable id (``<file name>:<number>``) that survives a restart and can be compared
  with a replay of the same file;
* a row is valid exactly when ``scemon replay`` and the service would accept it: the
  cells are read with replay's rules and checked by :meth:`ecq.event.Event.from_dict`
  (through its compiled twin where the kernel is built: well-formed rows are checked
  natively, the rest go to ``from_dict``, which names the mistake in the same words),
  so no event the job passes is turned away by the service, and every row it does not
  pass carries the same one-line reason replay would print.

Without a mapping, files hold events as ``scemon replay`` reads them. With a mapping
(``{"src": "card", "start": "ts"}``), any flat table becomes events: a field not in the
mapping is read from the column of its own name, and every other column becomes an
attribute.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, date, datetime
from operator import attrgetter
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc  # noqa: F401  (pa.ipc)

from ecq.errors import EventError
from ecq.event import Event
from ecq.kernel.make import event_reader, jsonl_reader
from service.files.events import (  # replay's cell rules and collector pause, shared on purpose
    collector_paused,
    csv_columns,
    csv_ident,
    csv_value,
)

__all__ = [
    "FIELDS",
    "FORMATS",
    "PACKED_SCHEMA",
    "ROW_SCHEMA",
    "Row",
    "file_format",
    "file_name",
    "parse_file",
    "pack",
    "parse_batches",
    "rows_to_batch",
    "unpack",
]

FORMATS = ("jsonl", "csv", "parquet")
# Event fields a mapping may name; ``attrs`` is made of the other columns.
FIELDS = ("src", "type", "start", "end", "id", "prob")

# One parsed row. ``index`` is replay's 0-based number of the event in its file (line for
# JSON Lines, data row for CSV and Parquet), ``line`` the 1-based place an editor shows
# (the physical line; the row for Parquet). A good row has ``error`` None; a bad one
# has only path, index, line, error and raw.
ROW_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("index", pa.int64()),
        ("line", pa.int64()),
        ("id", pa.string()),
        ("src", pa.string()),
        ("type", pa.string()),
        ("start", pa.float64()),
        ("end", pa.float64()),
        ("prob", pa.float64()),
        ("attrs", pa.string()),
        ("error", pa.string()),
        ("raw", pa.string()),
    ]
)
# What a Spark task hands back per file: its rows as one Arrow IPC stream (see parse_batches).
PACKED_SCHEMA = pa.schema([("rows", pa.binary())])
_S = str | None
_F = float | None
Row = tuple[str, int, int, _S, _S, _S, _F, _F, _F, _S, _S, _S]

# A dead letter keeps this much of the offending line: enough to find and fix it.
_RAW_LIMIT = 2000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ID, _ATTRS, _SRC, _TYPE = attrgetter("id"), attrgetter("attrs"), attrgetter("src"), attrgetter("type")
_START, _END, _PROB = attrgetter("start"), attrgetter("end"), attrgetter("prob")


def file_format(path: str, fmt: str | None = None) -> str:
    """``fmt`` when given, else the file's extension decides (``.csv``, ``.parquet``/``.pq``;
    anything else is JSON Lines, as for ``scemon replay``)."""
    if fmt is not None:
        return fmt
    suffix = PurePosixPath(path).suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    return "jsonl"


def file_name(path: str) -> str:
    """The last part of a path or a URI (``file:/data/in/a%20b.jsonl`` → ``a b.jsonl``):
    the stable part of an id derived from it, whatever the folder is mounted as."""
    return PurePosixPath(
        unquote(urlparse(path).path) if "://" in path or path.startswith("file:") else path
    ).name


def parse_batches(
    batches: Iterable[pa.RecordBatch], fmt: str | None = None, mapping: Mapping[str, str] | None = None
) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function: batches of ``binaryFile`` rows (``path``, ``content``)
    in, one row of :data:`PACKED_SCHEMA` out per input file — its rows of
    :data:`ROW_SCHEMA` as one Arrow IPC stream (:func:`unpack` reads them back).

    Why packed: Spark turns a ``mapInArrow`` result into its own rows and, for the
    driver's ``toArrow``, back into Arrow — two conversions per row and column in the
    JVM, more of its CPU than the reading of the files. A file's rows as one binary
    value cross the JVM as a single cell."""
    for batch in batches:
        paths = batch.column("path").to_pylist()
        contents = batch.column("content").to_pylist()
        for path, content in zip(paths, contents, strict=True):
            with collector_paused():
                rows = parse_file(path, content or b"", fmt, mapping)
            yield pack(rows)


def pack(batch: pa.RecordBatch) -> pa.RecordBatch:
    """One file's rows as one row of :data:`PACKED_SCHEMA` (an Arrow IPC stream)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, ROW_SCHEMA) as writer:
        writer.write_batch(batch)
    return pa.RecordBatch.from_arrays(
        [pa.array([sink.getvalue().to_pybytes()], pa.binary())], schema=PACKED_SCHEMA
    )


def unpack(table: pa.Table) -> pa.Table:
    """The rows of a micro-batch as :data:`ROW_SCHEMA`: a table of packed files
    (:func:`parse_batches`) read back, in file order; any other table (the ``rate``
    source's rows, made by Spark itself) as it is. O(rows), no copy of the columns."""
    if table.column_names != PACKED_SCHEMA.names:
        return table
    parts = [pa.ipc.open_stream(pa.py_buffer(blob)).read_all() for blob in table.column("rows").to_pylist()]
    return pa.concat_tables(parts) if parts else ROW_SCHEMA.empty_table()


def rows_to_batch(rows: Iterable[Row]) -> pa.RecordBatch:
    """Rows as one Arrow batch of :data:`ROW_SCHEMA` (column by column: O(rows))."""
    columns = list(zip(*rows, strict=True)) or [()] * len(ROW_SCHEMA)
    return pa.RecordBatch.from_arrays(
        [pa.array(col, type=f.type) for col, f in zip(columns, ROW_SCHEMA, strict=True)], schema=ROW_SCHEMA
    )


def parse_file(
    path: str, content: bytes, fmt: str | None = None, mapping: Mapping[str, str] | None = None
) -> pa.RecordBatch:
    """Every event (or reason for rejecting it) of one file, in file order, as one batch
    of :data:`ROW_SCHEMA`. The good rows' columns are built column-wise from the
    validated events (no tuple per row); the bad rows, rare, one by one."""
    kind = file_format(path, fmt)
    from_dict = event_reader()  # about half a worker's CPU an event was Event.from_dict
    columns = _columns(mapping)
    indexes: list[int] = []
    lines: list[int] = []
    events: list[Event] = []
    bad: list[Row] = []
    plain = columns is None and kind == "jsonl"
    if plain:
        # The common case, its loop written out (a record generator cost as much as
        # the parsing); a line's number is its index + 1, made column-wise.
        _plain_jsonl(path, content, from_dict, indexes, events, bad)
    else:
        if kind == "jsonl":
            records = _jsonl_records(content)
        elif kind == "csv":
            records = _csv_records(content, columns)
        else:
            records = _parquet_records(content)
        for index, line, record, raw in records:
            if isinstance(record, EventError):
                bad.append(_bad(path, index, line, str(record), raw))
                continue
            try:
                event = from_dict(_from_flat(record, columns), None)
            except EventError as err:
                bad.append(_bad(path, index, line, str(err), raw))
                continue
            indexes.append(index)
            lines.append(line)
            events.append(event)
    batch = _good_batch(path, file_name(path), indexes, None if plain else lines, events)
    if not bad:
        return batch
    # File order: the bad rows between the good ones, by their index (unique in a file).
    both = pa.Table.from_batches([batch, rows_to_batch(bad)])
    return both.take(pc.sort_indices(both, [("index", "ascending")])).combine_chunks().to_batches()[0]


def _plain_jsonl(
    path: str, content: bytes, from_dict: Any, indexes: list[int], events: list[Event], bad: list[Row]
) -> None:
    """A JSON Lines file of event objects (no mapping): the valid events and their
    indexes, the bad lines with the reason; the same verdicts as :func:`_jsonl_records`
    followed by ``from_dict``. The compiled reader (``EventReader.jsonl``) reads the
    lines up to each bad one, which is judged here."""
    if content.startswith(b"\xef\xbb\xbf"):
        content = content[3:]
    native = jsonl_reader()
    if native is None:
        for index, raw in enumerate(content.split(b"\n")):
            _judge_line(path, index, raw, from_dict, indexes, events, bad)
        return
    at, index, loads = 0, 0, orjson.loads
    while True:
        at, index = native.jsonl(content, at, index, loads, events, None, indexes)
        if at >= len(content):
            return
        end = content.find(b"\n", at)
        end = len(content) if end < 0 else end
        _judge_line(path, index, content[at:end], from_dict, indexes, events, bad)
        at, index = end + 1, index + 1


def _judge_line(
    path: str, index: int, raw: bytes, from_dict: Any, indexes: list[int], events: list[Event], bad: list[Row]
) -> None:
    # One line: skipped when blank, else an event or a bad row saying why.
    if not raw.strip():
        return
    try:
        events.append(from_dict(orjson.loads(raw), None))
    except orjson.JSONDecodeError as err:
        bad.append(_bad(path, index, index + 1, f"invalid JSON: {err.msg} (column {err.colno})", raw))
        return
    except EventError as err:
        bad.append(_bad(path, index, index + 1, str(err), raw))
        return
    indexes.append(index)


def _good_batch(
    path: str, name: str, indexes: list[int], lines: list[int] | None, events: list[Event]
) -> pa.RecordBatch:
    """The valid events' rows, column by column: an id-less event is ``<name>:<index>``,
    sources as text, attributes as their JSON text; ``lines`` None: each is its index + 1."""
    n = len(events)
    dumps = orjson.dumps
    text = pa.string()
    index = pa.array(indexes, pa.int64())
    ids = [f"{name}:{i}" if x is None else str(x) for i, x in zip(indexes, map(_ID, events), strict=True)]
    # Decoded at once: orjson's output buffer is ~1 KB however short the text, and
    # keeping thousands of them alive (as bytes) cost 6 µs an event in page faults
    # against 0.6 for a short str each.
    attrs = [dumps(a).decode() if a else None for a in map(_ATTRS, events)]
    arrays = [
        pa.array([path] * n, text),
        index,
        pc.add(index, 1) if lines is None else pa.array(lines, pa.int64()),
        pa.array(ids, text),
        pa.array([str(x) for x in map(_SRC, events)], text),
        pa.array(list(map(_TYPE, events)), text),
        pa.array(list(map(_START, events)), pa.float64()),
        pa.array(list(map(_END, events)), pa.float64()),
        pa.array(list(map(_PROB, events)), pa.float64()),
        pa.array(attrs, text),
        pa.nulls(n, text),
        pa.nulls(n, text),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ROW_SCHEMA)


# ----------------------------------------------------------------------------- readers

# A reader yields (index, line, record or the error that made it unreadable, raw): raw
# is the line's bytes or the CSV row's cells, made text only for a dead letter.
Raw = bytes | list[str]
Record = tuple[int, int, "dict[str, Any] | EventError", Raw]


def _jsonl_records(content: bytes) -> Iterator[Record]:
    """A mapped JSON Lines file's rows: each line must be an object."""
    if content.startswith(b"\xef\xbb\xbf"):
        content = content[3:]
    loads = orjson.loads
    for index, raw in enumerate(content.split(b"\n")):
        if not raw.strip():
            continue
        try:
            data = loads(raw)
        except orjson.JSONDecodeError as err:
            yield index, index + 1, EventError(f"invalid JSON: {err.msg} (column {err.colno})"), raw
            continue
        if not isinstance(data, dict):
            yield index, index + 1, EventError("a row must be a JSON object"), raw
            continue
        yield index, index + 1, data, raw


def _csv_records(content: bytes, columns: Mapping[str, str] | None) -> Iterator[Record]:
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        yield 0, 1, EventError(f"not UTF-8 text ({err.reason} at byte {err.start}); the file is skipped"), b""
        return
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
    except csv.Error as err:
        yield 0, 1, EventError(f"bad CSV header: {err}; the file is skipped"), b""
        return
    if header is None:
        return
    names = [name.strip() for name in header]
    try:
        if columns is None:
            _csv_columns_checked(names)
        else:
            _header_checked(names)
    except EventError as err:
        yield 0, 1, EventError(f"{err}; the file is skipped"), header
        return
    idents = {"src", "id"} if columns is None else {columns[f] for f in ("src", "id")}
    texts = {"type"} if columns is None else {columns["type"]}
    last_line, index = reader.line_num, 0
    while True:
        try:
            row = next(reader, None)
        except csv.Error as err:
            yield index, reader.line_num, EventError(f"bad CSV: {err}"), b""
            index += 1
            last_line = reader.line_num
            continue
        if row is None:
            return
        line, last_line = last_line + 1, reader.line_num
        if not row:
            continue
        if len(row) != len(names):
            yield index, line, EventError(f"has {len(row)} cells, the header has {len(names)}"), row
        else:
            yield index, line, _csv_typed(names, row, idents, texts), row
        index += 1


def _csv_columns_checked(names: list[str]) -> None:
    try:
        csv_columns(Path("-"), names)
    except EventError as err:  # drop replay's "<path> line 1": the dead letter says where
        raise EventError(err.message, None, err.field) from None


def _header_checked(names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if not name:
            raise EventError("the header has an empty column name")
        if name in seen:
            raise EventError("column appears twice in the header", None, name)
        seen.add(name)


def _csv_typed(names: list[str], row: list[str], idents: set[str], texts: set[str]) -> dict[str, Any]:
    # replay's cell rules: ids and sources stay text unless integer literals, the type is
    # text, every other cell a number, a boolean or text; an empty cell is left out.
    out: dict[str, Any] = {}
    for name, cell in zip(names, row, strict=True):
        if cell == "":
            continue
        if name in idents:
            out[name] = csv_ident(cell)
        elif name in texts:
            out[name] = cell
        else:
            out[name] = csv_value(cell)
    return out


def _parquet_records(content: bytes) -> Iterator[Record]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(content))
    except (pa.ArrowException, OSError) as err:
        yield 0, 1, EventError(f"not a readable Parquet file ({err}); the file is skipped"), b""
        return
    for index, record in enumerate(table.to_pylist()):
        plain = {k: _plain(v) for k, v in record.items()}
        yield index, index + 1, plain, orjson.dumps(plain, default=str)


def _plain(value: Any) -> Any:
    # Parquet timestamps and dates are times: seconds since 1970 (naive ones are UTC).
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return (aware - _EPOCH).total_seconds()
    if isinstance(value, date):
        return float((value - _EPOCH.date()).days * 86400)
    return value


# ------------------------------------------------------------------------------ events


def _columns(mapping: Mapping[str, str] | None) -> dict[str, str] | None:
    if mapping is None:
        return None
    return {field: mapping.get(field, field) for field in FIELDS}


def _from_flat(record: dict[str, Any], columns: Mapping[str, str] | None) -> dict[str, Any]:
    """A flat row as an event object: fields from their columns, the rest as attributes."""
    if columns is None:
        columns = {field: field for field in FIELDS}
    data: dict[str, Any] = {}
    for field, column in columns.items():
        value = record.get(column)
        if value is not None:
            data[field] = value
    used = set(columns.values())
    attrs = {key: value for key, value in record.items() if key not in used and value is not None}
    for field in ("src", "type", "start"):
        if field not in data and columns[field] != field:
            raise EventError(f"missing (the --map column {columns[field]!r} is empty or absent)", None, field)
    if attrs:
        data["attrs"] = attrs
    return data


def _bad(path: str, index: int, line: int, reason: str, raw: Raw) -> Row:
    return (path, index, line, None, None, None, None, None, None, None, reason, _raw_text(raw))


def _raw_text(raw: Raw) -> str | None:
    if isinstance(raw, list):
        out = io.StringIO()
        csv.writer(out, lineterminator="").writerow(raw)
        return out.getvalue()[:_RAW_LIMIT]
    return raw[:_RAW_LIMIT].decode("utf-8", "replace").rstrip("\r") or None
