"""The files ``scemon replay`` reads and writes: queries, events, matches.

Kept apart from the CLI so the server and the tests read files exactly as the command
does. Every reader validates the whole input before anything is done with it and names
the place of the first mistake (file, line, field), because a replay that stops halfway
leaves the user with half an answer and no way to tell which half.

Event files:

* **JSON Lines** — one event object per line (SEMANTICS.md §1); blank lines are skipped
  but counted, so line numbers are the editor's.
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

import csv
import gc
import os
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson

from ecq import kernel
from ecq.errors import EventError, QueryError, ScemonError
from ecq.event import AttrValue, Event
from ecq.language.ast import Query, from_json
from ecq.match import Match

if TYPE_CHECKING:
    from ecq.baseline import SeparateEngine
    from ecq.engine import Engine

    # What ``scemon replay --engine`` picks: the shared network or the SP baseline.
    AnyEngine = Engine | SeparateEngine

__all__ = [
    "CHUNK_SIZE",
    "ENGINE_KINDS",
    "EVENT_FORMATS",
    "QueryFileError",
    "QuerySpec",
    "build_engine",
    "canonical_queries",
    "event_format",
    "match_line",
    "open_output",
    "read_events",
    "read_queries",
    "run",
]

# Events handed to Engine.process per call: big enough to amortise the call, small
# enough that matches reach the output steadily.
CHUNK_SIZE = 4096
EVENT_FORMATS = ("jsonl", "csv")

# A registered query as read from a file: its name and either its text (the engine
# parses it) or the Query already built from the JSON form.
QuerySpec = tuple[str, Query | str]

Progress = Callable[[int], None]

_CSV_FIELDS = ("id", "src", "type", "start", "end", "prob")
_CSV_REQUIRED = ("src", "type", "start")
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
# orjson writes integers only up to 64 bits; larger literals are kept as text or float.
_INT64 = range(-(2**63), 2**63)


class QueryFileError(QueryError):
    """A queries file that cannot be read as queries; the message names the file and the
    entry (or the line and column, for query text)."""


# ----------------------------------------------------------------------------- queries


def read_queries(path: Path) -> list[QuerySpec]:
    """Read a queries file: a JSON list of ``{"name", "text"}`` or ``{"name", "pattern",
    ...}`` (the AST's JSON form) entries, or query text where each query begins with
    ``QUERY <name>``. The content decides: a first non-blank ``[`` means JSON (so does
    ``{``, to say that a single object is not a list).

    Query text is parsed here; JSON entries with ``text`` are left for the engine to
    parse (their errors surface in :func:`build_engine`). Raises :class:`QueryFileError`.
    """
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise QueryFileError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    body = text.lstrip()
    if body.startswith(("[", "{")):  # query text never starts with either
        specs = _read_json_queries(path, text)
    elif body:
        specs = _read_text_queries(path, text)
    else:
        specs = []
    if not specs:
        raise QueryFileError(f"{path}: no queries found")
    seen: set[str] = set()
    for name, _ in specs:
        if name in seen:
            raise QueryFileError(f"{path}: query {name!r} is defined twice")
        seen.add(name)
    return specs


def _read_json_queries(path: Path, text: str) -> list[QuerySpec]:
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as err:
        raise QueryFileError(
            f"{path}: invalid JSON: {err.msg} (line {err.lineno}, column {err.colno})"
        ) from None
    if not isinstance(data, list):
        raise QueryFileError(f"{path}: expected a JSON list of queries")
    specs: list[QuerySpec] = []
    for index, entry in enumerate(data):
        where = f"{path}: entry {index}"
        if not isinstance(entry, dict):
            raise QueryFileError(f"{where}: must be an object with 'name' and 'text' or 'pattern'")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise QueryFileError(f"{where}: 'name' must be a non-empty string")
        if ("text" in entry) == ("pattern" in entry):
            raise QueryFileError(f"{where} ({name!r}): give exactly one of 'text' and 'pattern'")
        if "text" in entry:
            if not isinstance(entry["text"], str):
                raise QueryFileError(f"{where} ({name!r}): 'text' must be a string")
            specs.append((name, entry["text"]))
            continue
        try:
            # "pattern" holds a whole query's AST JSON, or the pattern with the other
            # clauses (where, within, mode, ...) beside it in the entry.
            inner = entry["pattern"]
            whole = isinstance(inner, dict) and inner.get("kind") == "query"
            query = from_json(inner if whole else entry)
        except QueryError as err:
            raise QueryFileError(f"{where} ({name!r}): {_first_line(err)}") from err
        specs.append((name, query))
    return specs


def _read_text_queries(path: Path, text: str) -> list[QuerySpec]:
    from ecq.language import parse_queries  # the parser is optional for JSON files

    try:
        queries = parse_queries(text)
    except QueryError as err:
        raise QueryFileError(f"{path}: {_first_line(err)}") from err
    specs: list[QuerySpec] = []
    for index, query in enumerate(queries):
        if not query.name:
            raise QueryFileError(f"{path}: query {index + 1} has no name (begin it with QUERY <name>)")
        specs.append((query.name, query))
    return specs


def canonical_queries(specs: Sequence[QuerySpec], source: Path) -> list[Query]:
    """Every query as a parsed, named :class:`Query` (JSON text entries parsed now), so
    that ``scemon parse`` can print each one's canonical form."""
    from ecq.language import parse_query

    out: list[Query] = []
    for name, spec in specs:
        if isinstance(spec, str):
            try:
                spec = parse_query(spec)
            except QueryError as err:
                raise QueryFileError(f"{source}: query {name!r}: {_first_line(err)}") from err
        if spec.name != name:
            spec = _renamed(spec, name)
        out.append(spec)
    return out


def _renamed(query: Query, name: str) -> Query:
    from dataclasses import replace

    return replace(query, name=name)


ENGINE_KINDS = ("shared", "separate")


def build_engine(specs: Sequence[QuerySpec], source: Path, kind: str = "shared") -> AnyEngine:
    """A fresh engine with every query registered in file order (the order that breaks
    ties between matches, docs/semantics.md). Raises :class:`QueryFileError` naming the
    query the engine rejects. ``kind``: ``shared`` (the ECQ network) or ``separate`` (the
    separate-processing baseline, :mod:`ecq.baseline`; same matches, for comparison)."""
    from ecq.baseline import SeparateEngine
    from ecq.engine import Engine

    if kind not in ENGINE_KINDS:
        raise ScemonError(f"unknown engine {kind!r} (expected {' or '.join(ENGINE_KINDS)})")
    engine: AnyEngine = Engine() if kind == "shared" else SeparateEngine()
    for name, spec in specs:
        try:
            engine.register(name, spec)
        except QueryError as err:
            raise QueryFileError(f"{source}: query {name!r}: {_first_line(err)}") from err
    return engine


# ------------------------------------------------------------------------------ events


def event_format(path: Path, fmt: str | None = None) -> str:
    """The events file's format: ``fmt`` when given, else ``csv`` for a ``.csv`` name and
    ``jsonl`` for anything else."""
    if fmt is not None:
        if fmt not in EVENT_FORMATS:
            raise ScemonError(f"unknown events format {fmt!r} (expected {' or '.join(EVENT_FORMATS)})")
        return fmt
    return "csv" if path.suffix.lower() == ".csv" else "jsonl"


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
    # Local names: this loop runs once per event of files with millions of them.
    append = events.append
    loads = orjson.loads
    from_dict = kernel.event_reader()
    with path.open("rb") as stream:
        for index, raw in enumerate(stream):
            if index == 0 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if not raw.strip():
                continue
            try:
                data = loads(raw)
            except orjson.JSONDecodeError as err:
                raise EventError(
                    f"invalid JSON: {err.msg} (column {err.colno})", _line(path, index)
                ) from None
            try:
                event = from_dict(data, None)
            except EventError as err:
                raise EventError(err.message, _line(path, index), err.field) from None
            if event.id is None:
                event.id = index
            append(event)
            if progress is not None and not index & 0xFFF:
                progress(index)
    return events


def _read_csv(path: Path, progress: Progress | None) -> list[Event]:
    events: list[Event] = []
    with path.open(newline="", encoding="utf-8-sig") as stream:
        reader = csv.reader(stream)
        try:
            header = next(reader, None)
            if header is None:
                return events
            columns = _csv_columns(path, header)
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


def _csv_columns(path: Path, header: list[str]) -> list[str]:
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
            data[name] = _csv_ident(cell)
        elif name == "type":
            data[name] = cell
        elif name in _CSV_FIELDS:
            data[name] = _csv_value(cell)  # a non-number is left for from_dict to reject
        else:
            attrs[name] = _csv_value(cell)
    if attrs:
        data["attrs"] = attrs
    return data


def _csv_ident(cell: str) -> str | int:
    if _INT.fullmatch(cell):
        number = int(cell)
        if number in _INT64:
            return number
    return cell


def _csv_value(cell: str) -> AttrValue:
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


def _first_line(err: Exception) -> str:
    return str(err).split("\n", 1)[0]


# ------------------------------------------------------------------------------ output


def match_line(match: Match) -> bytes:
    """One match as a JSON Lines record (SEMANTICS.md §9); ``events`` holds event ids."""
    return orjson.dumps(kernel.match_writer()(match)) + b"\n"


def run(
    engine: AnyEngine,
    events: Sequence[Event],
    out: BinaryIO,
    chunk_size: int = CHUNK_SIZE,
    progress: Progress | None = None,
) -> Counter[str]:
    """Feed ``events`` to ``engine`` in order, in chunks, write each match as it is
    emitted, then advance time to infinity so that matches waiting on a window (trailing
    negation) are emitted too. Returns the number of matches per query."""
    counts: Counter[str] = Counter()
    dumps = orjson.dumps
    for begin in range(0, len(events), chunk_size):
        _write(out, engine.process(events[begin : begin + chunk_size]), counts, dumps)
        if progress is not None:
            progress(min(begin + chunk_size, len(events)))
    _write(out, engine.advance_time(float("inf")), counts, dumps)
    return counts


def _write(out: BinaryIO, matches: list[Match], counts: Counter[str], dumps: Callable[[Any], bytes]) -> None:
    if not matches:
        return
    buffer = bytearray()
    wire = kernel.match_writer()
    for match in matches:
        buffer += dumps(wire(match))
        buffer += b"\n"
        counts[match.query] += 1
    out.write(buffer)


@contextmanager
def batch_collector() -> Iterator[None]:
    """The cyclic garbage collector tuned for one big batch: a replay holds every event
    it read and the engine's state, millions of long-lived objects with hardly a
    reference cycle among them, and with the default thresholds the collector walked
    them again and again (a quarter of a replay's time, measured). Inside the block it
    runs a hundred times less often; :func:`freeze_so_far` exempts what is already
    read. Reference counting still frees everything as usual. Restored on exit."""
    old = gc.get_threshold()
    gc.set_threshold(100_000, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def freeze_so_far() -> None:
    """Leave the objects alive now (the events read, the engine) out of later
    collections (``gc.freeze``; undone when :func:`batch_collector` ends). Reading makes
    no reference cycles, so nothing is collected first."""
    gc.freeze()


@contextmanager
def open_output(target: str | None) -> Iterator[BinaryIO]:
    """The stream matches go to: stdout for ``None`` or ``"-"``, else a temporary file
    beside ``target`` that replaces it only when the block ends without error — so a
    failed replay leaves no output file, and never a truncated one."""
    if target is None or target == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    path = Path(target)
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:  # name the file the user asked for, not the temporary one
        raise OSError(err.errno, err.strerror, str(path)) from None
    try:
        with os.fdopen(fd, "wb") as stream:
            yield stream
        os.chmod(temp, 0o666 & ~_umask())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    # mkstemp makes the file 0600; give the output the mode a plain open() would.
    mask = os.umask(0)
    os.umask(mask)
    return mask
