"""Turn a posted batch — JSON or Arrow IPC — into validated events.

Both forms end in ``Event.from_dict`` (the validator ``scemon replay`` uses), so a bad
event gets the same words whichever way it came, plus its 0-based index in the batch
and the field. Nothing reaches the engine unless the whole batch is valid.

An event without an ``id`` is named ``"<batch_id>:<index>"``, its index in the batch
as posted: the name is stable across a replay of the batch and across a restart (it is
logged with the event), so a match names each of its events.

Arrow columns (the Spark sink's contract): ``src`` (utf8 or int64), ``type`` (utf8),
``start`` (float64), ``end`` (float64, nullable), and optionally ``prob`` (float64,
nullable), ``id`` (utf8 or int64, nullable), ``attrs`` (utf8, nullable: a JSON object).
Other integer and floating widths are accepted where a number is expected.

Sizes: a JSON body is checked against the batch's value limit before it is parsed
(:mod:`service.server.bodies`), and every event's fields against their limits
(``api.models``: ``SRC_MAX``, ``TYPE_MAX``, ``ID_MAX``, ``ATTRS_MAX``,
``ATTR_NAME_MAX``, ``ATTR_VALUE_MAX``) once read, and every event's ``start`` and
``end`` against ``TIME_MAX`` (:func:`check_times`). These functions run in a worker
thread, never on the event loop.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import orjson

from api.models import ATTR_NAME_MAX, ATTR_VALUE_MAX, ATTRS_MAX, ID_MAX, SRC_MAX, TIME_MAX, TYPE_MAX
from ecq.errors import EventError
from ecq.event import Event
from ecq.kernel.make import column_reader, event_reader
from service.server.bodies import loads_in_pieces
from service.server.errors import BadRequestError, InvalidInputError, PayloadTooLargeError

# pyarrow is imported where an Arrow batch is read, not with this module: the server
# imports this module at start (the store reads logged batches with it), and pyarrow
# with numpy was half a second of every start, most of them with no Arrow batch to read.
if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Batch", "batch_key", "check_fields", "check_times", "from_arrow", "from_json"]

# An attrs column's JSON text longer than this cannot hold attributes within their
# limits (names, values, quotes and separators); refused before it is parsed.
ATTRS_TEXT_MAX = ATTRS_MAX * (ATTR_NAME_MAX + ATTR_VALUE_MAX + 8)

# An attrs text this short holds no name or value over its limit (each is part of the
# text) and fewer attributes than allowed (each takes at least 4 characters: "":0).
_ATTRS_SURELY_FIT = min(ATTR_NAME_MAX, ATTR_VALUE_MAX, 4 * ATTRS_MAX)

_ENVELOPE = ("producer", "batch_id", "events")
_ARROW_REQUIRED = ("src", "type", "start")
_ARROW_OPTIONAL = ("end", "prob", "id", "attrs")


@dataclass
class Batch:
    producer: str
    batch_id: str
    events: list[Event]
    # The posted body, when the op log can keep it as it came (Arrow; see
    # ``service.server.store.arrow_log``); None: the log encodes the events.
    arrow: bytes | None = None
    # Already in the order the host applies a batch, by (end, start): found column-wise
    # for Arrow (a Spark job's batches come sorted), so the host skips its sort.
    ordered: bool = False


# One reader of each kind for the process, not one per batch: their tables of class
# names and sources (bounded) then serve every batch, so the engine finds the keys of
# its per-class and per-source state by identity and the events held in its windows
# share one str per source.
_shared_event_reader = functools.cache(event_reader)
_shared_column_reader = functools.cache(column_reader)


def batch_key(producer: Any, batch_id: Any) -> tuple[str, str]:
    """Check the idempotency key; ``batch_id`` is compared as text (7 and "7" are the
    same batch: an Arrow header cannot tell them apart)."""
    if not isinstance(producer, str) or not producer:
        raise InvalidInputError("'producer' must be a non-empty string", field="producer")
    if len(producer) > ID_MAX:
        raise InvalidInputError(f"'producer' is longer than {ID_MAX} characters", field="producer")
    if isinstance(batch_id, bool) or not isinstance(batch_id, (str, int)):
        raise InvalidInputError("'batch_id' must be a string or an integer", field="batch_id")
    key = str(batch_id)
    if not key or len(key) > ID_MAX:
        raise InvalidInputError(f"'batch_id' must have 1 to {ID_MAX} characters", field="batch_id")
    return producer, key


def from_json(body: bytes, max_events: int, max_values: int) -> Batch:
    """``{"producer", "batch_id", "events": [...]}``. Raises 400 for malformed JSON, 413
    for a body of more than ``max_values`` JSON values (before parsing it) or more than
    ``max_events`` events, 422 naming the field (and the event's index)."""
    data = loads_in_pieces(body, "events", max_values, "batch")
    if not isinstance(data, dict):
        raise InvalidInputError("the body must be a JSON object with 'producer', 'batch_id' and 'events'")
    for key in data:
        if key not in _ENVELOPE:
            raise InvalidInputError(
                f"unknown field {key!r} (expected producer, batch_id, events)", field=str(key)
            )
    for key in _ENVELOPE:
        if key not in data:
            raise InvalidInputError(f"missing field {key!r}", field=key)
    producer, batch_id = batch_key(data["producer"], data["batch_id"])
    raw = data["events"]
    if not isinstance(raw, list):
        raise InvalidInputError("'events' must be a list of event objects", field="events")
    if len(raw) > max_events:
        raise PayloadTooLargeError(
            f"the batch has {len(raw)} events; the limit is {max_events}", field="events"
        )
    events = _events(raw, batch_id)
    check_times(events)
    return Batch(producer, batch_id, events)


def _events(raw: list[Any], batch_id: str) -> list[Event]:
    events = []
    from_dict = _shared_event_reader()
    for index, item in enumerate(raw):
        try:
            event = from_dict(item, f"event {index}")
        except EventError as err:
            raise InvalidInputError(str(err), index=index, field=err.field) from None
        events.append(event)
    check_fields(events)
    for index, event in enumerate(events):
        if event.id is None:
            event.id = f"{batch_id}:{index}"
    return events


def _too_long(index: int, field: str, what: str, limit: int) -> InvalidInputError:
    return InvalidInputError(
        f"event {index}, field {field!r}: {what} is longer than {limit} characters", index=index, field=field
    )


def check_fields(events: list[Event]) -> None:
    """422 for the first event with a field over its size limit, naming its index and
    the field. O(events + attributes); about 0.5 µs an event."""
    for index, e in enumerate(events):
        src, eid, attrs = e.src, e.id, e.attrs
        if src.__class__ is str and len(src) > SRC_MAX:
            raise _too_long(index, "src", "the source", SRC_MAX)
        if len(e.type) > TYPE_MAX:
            raise _too_long(index, "type", "the class", TYPE_MAX)
        if eid.__class__ is str and len(eid) > ID_MAX:
            raise _too_long(index, "id", "the id", ID_MAX)
        if attrs:
            if len(attrs) > ATTRS_MAX:
                raise InvalidInputError(
                    f"event {index}, field 'attrs': {len(attrs)} attributes; the limit is {ATTRS_MAX}",
                    index=index,
                    field="attrs",
                )
            for name, value in attrs.items():
                if len(name) > ATTR_NAME_MAX:
                    raise _too_long(index, "attrs", f"attribute name {name[:20]!r}...", ATTR_NAME_MAX)
                if value.__class__ is str and len(value) > ATTR_VALUE_MAX:
                    raise _too_long(index, "attrs", f"attribute {name!r}", ATTR_VALUE_MAX)


_START = attrgetter("start")
_END = attrgetter("end")


def check_times(events: list[Event]) -> None:
    """422 naming the events whose ``start`` or ``end`` lies outside ``+-TIME_MAX``
    seconds: ``index`` and ``field`` the first one's, ``indexes`` all of them (so a
    producer drops them in one go). Two passes in C in the common case; a loop only to
    name the offenders."""
    if not events:
        return
    if min(map(_START, events)) >= -TIME_MAX and max(map(_END, events)) <= TIME_MAX:
        return  # start <= end for every event, so both are within
    bad = [i for i, e in enumerate(events) if not -TIME_MAX <= e.start <= e.end <= TIME_MAX]
    first = events[bad[0]]
    field, value = ("start", first.start) if not -TIME_MAX <= first.start <= TIME_MAX else ("end", first.end)
    more = f"; {len(bad) - 1} more events of the batch are too" if len(bad) > 1 else ""
    raise InvalidInputError(
        f"event {bad[0]}, field {field!r}: {value:g} is outside the accepted times, -{TIME_MAX:g} to "
        f"{TIME_MAX:g} seconds (about 31,700 years either side of 0; a timestamp in milliseconds is beyond "
        f"it){more}",
        index=bad[0],
        field=field,
        indexes=bad,
    )


def from_arrow(
    body: bytes, producer: str | None, batch_id: str | None, max_events: int, times: bool = True
) -> Batch:
    """An Arrow IPC stream with the key in headers; see the module docstring. ``times``:
    hold the events to ``TIME_MAX`` (not for a logged batch: it was taken as it is)."""
    if producer is None:
        raise InvalidInputError("missing header X-Scemon-Producer", field="X-Scemon-Producer")
    if batch_id is None:
        raise InvalidInputError("missing header X-Scemon-Batch-Id", field="X-Scemon-Batch-Id")
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.ipc as ipc

    producer, batch_id = batch_key(producer, batch_id)
    try:
        table = ipc.open_stream(pa.BufferReader(body)).read_all()
    except (pa.ArrowException, OSError, ValueError) as err:
        raise BadRequestError(f"the body is not an Arrow IPC stream: {err}") from None
    if table.num_rows > max_events:
        raise PayloadTooLargeError(
            f"the batch has {table.num_rows} events; the limit is {max_events}", field="events"
        )
    names = table.column_names
    for name in names:
        if name not in _ARROW_REQUIRED and name not in _ARROW_OPTIONAL:
            expected = ", ".join(_ARROW_REQUIRED + _ARROW_OPTIONAL)
            raise InvalidInputError(f"unknown column {name!r} (expected {expected})", field=name)
    if len(set(names)) != len(names):
        raise InvalidInputError("a column appears twice", field=next(n for n in names if names.count(n) > 1))
    for name in _ARROW_REQUIRED:
        if name not in names:
            raise InvalidInputError(f"missing column {name!r}", field=name)
    for name in names:
        _check_type(name, table.column(name).type)
    if "attrs" in names and table.column("attrs").null_count < table.num_rows:
        longest = pc.max(pc.utf8_length(table.column("attrs"))).as_py() or 0
        if longest > ATTRS_TEXT_MAX:
            index = pc.index(pc.utf8_length(table.column("attrs")), longest).as_py()
            raise InvalidInputError(
                f"event {index}, field 'attrs': {longest} characters of JSON, more than its attributes "
                f"may hold ({ATTRS_MAX} of at most {ATTR_NAME_MAX} + {ATTR_VALUE_MAX} characters)",
                index=index,
                field="attrs",
            )
    columns: dict[str, list[Any]] = {name: table.column(name).to_pylist() for name in names}
    fast = _fast_events(columns, table.num_rows)
    if fast is not None:
        if not _fields_fit(table):
            check_fields(fast)  # some field may be too long: find the first, by index
        if times:
            check_times(fast)
        if "id" not in names or table.column("id").null_count:
            for index, event in enumerate(fast):
                if event.id is None:
                    event.id = f"{batch_id}:{index}"
        return Batch(producer, batch_id, fast, body, _ordered(table))
    # Some row is invalid: the general path finds the first one and names it.
    if "attrs" in columns:
        columns["attrs"] = [_attrs(text, index) for index, text in enumerate(columns["attrs"])]
    keys = list(columns)
    rows = [dict(zip(keys, values, strict=True)) for values in zip(*columns.values(), strict=True)]
    events = _events(rows, batch_id)
    if times:
        check_times(events)
    return Batch(producer, batch_id, events, body)


def _longest(column: pa.ChunkedArray) -> int:
    """The most characters of a text column's values (0 for another type or all null)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)) or column.null_count == len(column):
        return 0
    return int(pc.max(pc.utf8_length(column)).as_py() or 0)


def _fields_fit(table: pa.Table) -> bool:
    """Whether no event can have a field over its size limit, from the columns' longest
    values (pyarrow, no loop per row): the texts of ``src``, ``type`` and ``id`` within
    theirs, and no ``attrs`` text longer than the shortest attribute limit (an object
    that short can hold neither a longer name or value nor more attributes than
    allowed). False sends the batch through :func:`check_fields` (O(events), ~0.5 µs an
    event), which names the first offender."""
    names = table.column_names
    limits = {"src": SRC_MAX, "type": TYPE_MAX, "id": ID_MAX, "attrs": _ATTRS_SURELY_FIT}
    return all(_longest(table.column(name)) <= limit for name, limit in limits.items() if name in names)


def _ordered(table: pa.Table) -> bool:
    """Whether the rows already come by ``(end, start)`` (an absent end is the start):
    compared column-wise, each row with the next."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    if n < 2:
        return True
    start = pc.cast(table.column("start"), pa.float64())
    end = pc.cast(table.column("end"), pa.float64()) if "end" in table.column_names else start
    end = pc.coalesce(end, start)
    e0, e1, s0, s1 = end.slice(0, n - 1), end.slice(1), start.slice(0, n - 1), start.slice(1)
    ok = pc.or_(pc.less(e0, e1), pc.and_(pc.equal(e0, e1), pc.less_equal(s0, s1)))
    return bool(pc.all(ok).as_py())


def _fast_events(columns: dict[str, list[Any]], n: int) -> list[Event] | None:
    """Events straight from the columns, or None at the first row that is not plainly
    valid. Why: the column types are already checked, so a row needs only the value
    checks — about twice as fast as building a dict per row for ``Event.from_dict``,
    and the compiled kernel's reader (``EventReader.columns``: the events built in C,
    no ``Event.__init__`` per row) about 1.7 times faster again (10,000-event posts,
    the server's collector settings: 2.5 → 1.4 µs an event with attributes, 1.2 → 0.74
    without)."""
    native = _shared_column_reader()
    if native is not None:
        get = columns.get
        return native(
            columns["src"],
            columns["type"],
            columns["start"],
            get("end"),
            get("attrs"),
            get("prob"),
            get("id"),
            orjson.loads,
        )
    none = [None] * n
    srcs, types, starts = columns["src"], columns["type"], columns["start"]
    ends, probs = columns.get("end", none), columns.get("prob", none)
    ids, texts = columns.get("id", none), columns.get("attrs", none)
    # Local names: this loop runs once per event of batches of thousands.
    isfinite = math.isfinite
    loads = orjson.loads
    flat = (str, int, float, bool)
    out: list[Event] = []
    append = out.append
    for i in range(n):
        src, etype, start, end, prob, text = srcs[i], types[i], starts[i], ends[i], probs[i], texts[i]
        if src is None or not etype or start is None:
            return None
        start = float(start)
        end = start if end is None else float(end)
        prob = 1.0 if prob is None else float(prob)
        if not (isfinite(start) and isfinite(end) and end >= start and 0.0 < prob <= 1.0):
            return None
        attrs = None
        if text is not None:
            try:
                attrs = loads(text)
            except orjson.JSONDecodeError:
                return None
            if not isinstance(attrs, dict):
                return None
            for value in attrs.values():
                if not isinstance(value, flat) or (isinstance(value, float) and not isfinite(value)):
                    return None
        append(Event(src, etype, start, end, attrs, prob, ids[i]))
    return out


def _check_type(name: str, kind: Any) -> None:
    import pyarrow as pa

    types = pa.types
    text = types.is_string(kind) or types.is_large_string(kind)
    integer = types.is_integer(kind)
    number = integer or types.is_floating(kind)
    ok = {
        "src": text or integer,
        "id": text or integer,
        "type": text,
        "attrs": text or types.is_null(kind),
        "start": number,
        "end": number or types.is_null(kind),
        "prob": number or types.is_null(kind),
    }[name]
    if not ok:
        raise InvalidInputError(f"column {name!r} has Arrow type {kind}, which cannot hold it", field=name)


def _attrs(text: str | None, index: int) -> Any:
    if text is None:
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as err:
        raise InvalidInputError(
            f"event {index}, field 'attrs': not JSON: {err}", index=index, field="attrs"
        ) from None
    if not isinstance(value, dict):
        raise InvalidInputError(
            f"event {index}, field 'attrs': must be a JSON object", index=index, field="attrs"
        )
    return value
