"""Arrow posts decoded in process: the size limits checked column-wise first (and per
event only when a column may hold a field over its limit), the order found
column-wise, ids given to id-less events."""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa
import pytest

from api.client import arrow_bytes
from api.models import ATTR_NAME_MAX, ID_MAX, SRC_MAX, TYPE_MAX
from ecq.kernel.make import column_reader
from service.server.errors import InvalidInputError
from service.server.ingest import from_arrow, from_json
from service.server.store import arrival_key


def body(**columns: Any) -> bytes:
    n = len(columns["start"])
    columns.setdefault("src", ["1"] * n)
    columns.setdefault("type", ["A"] * n)
    return arrow_bytes(pa.table(columns))


@pytest.mark.parametrize(
    ("column", "values", "field"),
    [
        ("src", ["s" * SRC_MAX, "s" * (SRC_MAX + 1)], "src"),
        ("type", ["t" * TYPE_MAX, "t" * (TYPE_MAX + 1)], "type"),
        ("id", ["i" * ID_MAX, "i" * (ID_MAX + 1)], "id"),
        (
            "attrs",
            ['{"' + "n" * ATTR_NAME_MAX + '": 1}', '{"' + "n" * (ATTR_NAME_MAX + 1) + '": 1}'],
            "attrs",
        ),
    ],
)
def test_a_field_over_its_limit_is_refused_by_index_and_one_at_it_passes(
    column: str, values: list[str], field: str
) -> None:
    at_limit = from_arrow(body(start=[1.0, 2.0], **{column: [values[0], values[0]]}), "p", "b", 10)
    assert len(at_limit.events) == 2
    with pytest.raises(InvalidInputError) as caught:
        from_arrow(body(start=[1.0, 2.0, 3.0], **{column: [values[0], values[1], values[0]]}), "p", "b", 10)
    assert caught.value.where["index"] == 1 and caught.value.where["field"] == field


@pytest.mark.parametrize(
    ("start", "end", "ordered"),
    [
        ([1.0, 2.0, 3.0], None, True),
        ([1.0, 0.5, 3.0], [2.0, 2.0, 3.0], False),  # equal ends, starts out of order
        ([0.5, 1.0, 3.0], [2.0, 2.0, 3.0], True),
        ([1.0, 1.0], [2.0, 2.0], True),
        ([3.0, 1.0], None, False),
        ([1.0, 2.0], [5.0, None], False),  # the null end is its start, 2.0 < 5.0
        ([1.0], None, True),
    ],
)
def test_the_order_is_found_column_wise_as_the_host_sorts(
    start: list[float], end: list[float | None] | None, ordered: bool
) -> None:
    columns: dict[str, Any] = {"start": start}
    if end is not None:
        columns["end"] = pa.array(end, pa.float64())
    batch = from_arrow(body(**columns), "p", "b", 10)
    assert batch.ordered == ordered == (batch.events == sorted(batch.events, key=arrival_key))


def test_id_less_events_are_named_by_their_posted_index() -> None:
    batch = from_arrow(body(start=[1.0, 2.0, 3.0], id=pa.array(["a", None, "c"])), "p", "b7", 10)
    assert [e.id for e in batch.events] == ["a", "b7:1", "c"]
    whole = from_arrow(body(start=[1.0, 2.0], id=pa.array(["a", "b"])), "p", "b8", 10)
    assert [e.id for e in whole.events] == ["a", "b"]


@pytest.mark.skipif(column_reader() is None, reason="the compiled kernel is not built")
def test_batches_share_one_str_per_source_and_class() -> None:
    """Events of different posts (Arrow or JSON) hold the same str for the same source
    and class: one reader of each kind for the server's life, so the engine finds its
    per-source state by identity."""

    def arrow(batch_id: str) -> Any:
        src, kind = "".join(["card-", "7"]), "".join(["HO", "TL"])
        return from_arrow(body(start=[1.0], src=[src], type=[kind]), "p", batch_id, 10).events[0]

    def json(batch_id: str) -> Any:
        event = {"src": "".join(["card-", "7"]), "type": "".join(["HO", "TL"]), "start": 2.0}
        text = orjson.dumps({"producer": "p", "batch_id": batch_id, "events": [event]})
        return from_json(text, 10, 100).events[0]

    a, b = arrow("1"), arrow("2")
    assert (a.src, a.type) == ("card-7", "HOTL") and a.src is b.src and a.type is b.type
    c, d = json("3"), json("4")
    assert (c.src, c.type) == ("card-7", "HOTL") and c.src is d.src and c.type is d.type
