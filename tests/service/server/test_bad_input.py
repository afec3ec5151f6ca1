"""Every kind of bad input gets a 4xx whose message says what and where, and changes
nothing: the queries, the match log and the counters are as before."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pyarrow as pa
import pytest
from websockets.sync.client import connect

from api.client import arrow_bytes
from tests.service.conftest import Server
from tests.service.server.feeds import arrow_table

ARROW = "application/vnd.apache.arrow.stream"
GOOD_EVENT = {"src": 1, "type": "A", "start": 1.0}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    env = {
        "SCEMON_MAX_BATCH_EVENTS": "100",
        "SCEMON_MAX_BODY_BYTES": "200000",
        "SCEMON_MAX_JSON_VALUES": "50000",
    }
    server = Server(tmp_path_factory.mktemp("bad") / "data", env).start()
    client = server.client()
    client.register("ab", "SEQ(A, B) WITHIN 10 s")
    client.post_events("p", 0, [GOOD_EVENT, {"src": 1, "type": "B", "start": 2.0}])
    yield server
    server.stop()


def state(server: Server) -> Any:
    # A query's rate (matches per second over the last minute) moves with the clock, not
    # with what a request changed.
    queries = [
        {k: v for k, v in q.items() if k != "rate"}
        for q in httpx.get(f"{server.url}/v1/queries").json()["queries"]
    ]
    matches = httpx.get(f"{server.url}/v1/matches").json()
    counters = [
        line
        for line in httpx.get(f"{server.url}/metrics").text.splitlines()
        if line.startswith(("scemon_events_total", "scemon_batches_total", "scemon_queries "))
    ]
    return queries, matches, counters


def arrow_with(**columns: pa.Array) -> bytes:
    return arrow_bytes(pa.table(columns))


def big_batch(n: int) -> dict[str, Any]:
    return {"producer": "p", "batch_id": "big", "events": [GOOD_EVENT] * n}


# (what, field, how the event is changed): each over its limit (api.models)
LONG_FIELDS: list[tuple[str, str, dict[str, Any]]] = [
    ("src", "src", {"src": "s" * 257}),
    ("type", "type", {"type": "T" * 129}),
    ("id", "id", {"id": "i" * 257}),
    ("attr name", "attrs", {"attrs": {"n" * 129: 1}}),
    ("attr value", "attrs", {"attrs": {"x": "v" * 4097}}),
    ("many attrs", "attrs", {"attrs": {f"a{i}": i for i in range(257)}}),
]

# (method, path, request kwargs, status, words the message must contain, location fields)
CASES: list[tuple[str, str, dict[str, Any], int, list[str], dict[str, Any]]] = [
    # malformed JSON
    (
        "POST",
        "/v1/events",
        {"content": b'{"producer": "p",', "headers": {"content-type": "application/json"}},
        400,
        ["malformed JSON", "column"],
        {},
    ),
    (
        "POST",
        "/v1/queries",
        {"content": b'{"name": ', "headers": {"content-type": "application/json"}},
        400,
        ["malformed JSON"],
        {},
    ),
    (
        "POST",
        "/v1/time",
        {"content": b"[1,", "headers": {"content-type": "application/json"}},
        400,
        ["malformed JSON"],
        {},
    ),
    # wrong types
    (
        "POST",
        "/v1/events",
        {"json": {"producer": "p", "batch_id": 1, "events": [GOOD_EVENT, {**GOOD_EVENT, "start": "noon"}]}},
        422,
        ["event 1", "'start'", "number"],
        {"index": 1, "field": "start"},
    ),
    (
        "POST",
        "/v1/events",
        {"json": {"producer": 5, "batch_id": 1, "events": []}},
        422,
        ["producer"],
        {"field": "producer"},
    ),
    (
        "POST",
        "/v1/events",
        {"json": {"producer": "p", "batch_id": True, "events": []}},
        422,
        ["batch_id"],
        {"field": "batch_id"},
    ),
    (
        "POST",
        "/v1/events",
        {"json": {"producer": "p", "batch_id": 1, "events": {"a": 1}}},
        422,
        ["'events'", "list"],
        {"field": "events"},
    ),
    (
        "POST",
        "/v1/events",
        {
            "json": {
                "producer": "p",
                "batch_id": 1,
                "events": [GOOD_EVENT, {**GOOD_EVENT, "attrs": {"x": [1]}}],
            }
        },
        422,
        ["event 1", "attrs"],
        {"index": 1, "field": "attrs"},
    ),
    (
        "POST",
        "/v1/events",
        {"json": {"producer": "p", "batch_id": 1, "events": [{**GOOD_EVENT, "prob": 0}]}},
        422,
        ["event 0", "prob"],
        {"index": 0, "field": "prob"},
    ),
    ("POST", "/v1/events", {"json": ["not", "an", "object"]}, 422, ["JSON object"], {}),
    ("POST", "/v1/queries", {"json": {"name": "x", "text": 5}}, 422, ["text"], {"field": "text"}),
    (
        "POST",
        "/v1/queries",
        {"json": {"name": "has space", "text": "OR(A)"}},
        422,
        ["name"],
        {"field": "name"},
    ),
    ("POST", "/v1/time", {"json": {"time": "later"}}, 422, ["time"], {"field": "time"}),
    # missing fields
    (
        "POST",
        "/v1/events",
        {"json": {"producer": "p", "batch_id": 1}},
        422,
        ["missing", "'events'"],
        {"field": "events"},
    ),
    (
        "POST",
        "/v1/events",
        {"json": {"producer": "p", "batch_id": 1, "events": [{"src": 1, "start": 1}]}},
        422,
        ["event 0", "'type'", "missing"],
        {"index": 0, "field": "type"},
    ),
    ("POST", "/v1/queries", {"json": {"name": "x"}}, 422, ["exactly one of 'text' and 'pattern'"], {}),
    ("POST", "/v1/queries/bulk", {"json": {"queries": []}}, 422, ["queries"], {"field": "queries"}),
    ("POST", "/v1/time", {"json": {}}, 422, ["time"], {"field": "time"}),
    # end < start
    (
        "POST",
        "/v1/events",
        {
            "json": {
                "producer": "p",
                "batch_id": 1,
                "events": [GOOD_EVENT, GOOD_EVENT, {**GOOD_EVENT, "start": 5, "end": 4}],
            }
        },
        422,
        ["event 2", "'end'", "before start"],
        {"index": 2, "field": "end"},
    ),
    # oversized
    ("POST", "/v1/events", {"json": big_batch(101)}, 413, ["101 events", "limit is 100"], {}),
    (
        "POST",
        "/v1/events",
        {"json": {"producer": "p", "batch_id": 1, "events": [{**GOOD_EVENT, "id": "x" * 300_000}]}},
        413,
        ["limit"],
        {},
    ),
    (
        "POST",
        "/v1/queries",
        {
            "content": iter([b'{"name": "x", "text": "', b"x" * 250_000, b'"}']),
            "headers": {"content-type": "application/json"},
        },
        413,
        ["limit"],
        {},
    ),
    # unknown query
    ("GET", "/v1/queries/nope", {}, 404, ["'nope'"], {}),
    ("DELETE", "/v1/queries/nope", {}, 404, ["'nope'"], {}),
    ("GET", "/v1/matches?query=nope", {}, 404, ["'nope'"], {}),
    # bad query text
    (
        "POST",
        "/v1/queries",
        {"json": {"name": "x", "text": "SEQ(A, B) WITHIN ten s"}},
        422,
        ["line 1"],
        {"line": 1},
    ),
    ("POST", "/v1/queries", {"json": {"name": "ab", "text": "OR(A)"}}, 409, ["'ab'"], {}),
    (
        "POST",
        "/v1/queries",
        {"json": {"name": "deep", "text": "SEQ(" + "(" * 3000 + "A" + ")" * 3000 + ", B) WITHIN 5 s"}},
        422,
        ["nested too deeply"],
        {},
    ),
    (
        "POST",
        "/v1/queries",
        {
            "content": '{"name": "deep", "pattern": ' + '{"a": ' * 3000 + "1" + "}" * 3000 + "}",
            "headers": {"content-type": "application/json"},
        },
        400,
        ["malformed JSON", "depth limit exceeded"],
        {},
    ),
    # Just over the pattern's limit, which orjson (1,024 levels) would parse: refused on
    # every Python version alike, naming where.
    (
        "POST",
        "/v1/queries",
        {
            "content": '{"name": "deep", "pattern": ' + '{"a": ' * 201 + "1" + "}" * 201 + "}",
            "headers": {"content-type": "application/json"},
        },
        422,
        ["nested more than 200 levels"],
        {"field": "pattern"},
    ),
    (
        "POST",
        "/v1/time",
        {
            "content": '{"time": ' + "[" * 300 + "]" * 300 + "}",
            "headers": {"content-type": "application/json"},
        },
        400,
        ["nested deeper than 200"],
        {},
    ),
    (
        "POST",
        "/v1/events",
        {
            "content": '{"producer": "p", "batch_id": 1, "events": ' + "[" * 3000 + "]" * 3000 + "}",
            "headers": {"content-type": "application/json"},
        },
        400,
        ["malformed JSON"],
        {},
    ),
    # invalid from_seq / limit
    ("GET", "/v1/matches?from_seq=-1", {}, 422, ["from_seq"], {"field": "from_seq"}),
    ("GET", "/v1/matches?from_seq=abc", {}, 422, ["from_seq", "integer"], {"field": "from_seq"}),
    ("GET", "/v1/matches?from_seq=1000000", {}, 422, ["from_seq", "beyond"], {"field": "from_seq"}),
    ("GET", "/v1/matches?limit=0", {}, 422, ["limit"], {"field": "limit"}),
    ("GET", "/v1/matches?from_seq=99999999999999999999999", {}, 422, ["from_seq"], {"field": "from_seq"}),
    # per-field size limits, JSON and Arrow: the event's index and the field
    *[
        (
            "POST",
            "/v1/events",
            {"json": {"producer": "p", "batch_id": "long", "events": [GOOD_EVENT, GOOD_EVENT | bad]}},
            422,
            ["event 1", f"'{field}'", "longer than" if field != "attrs" or "many" not in label else "limit"],
            {"index": 1, "field": field},
        )
        for label, field, bad in LONG_FIELDS
    ],
    (
        "POST",
        "/v1/events",
        {
            "content": arrow_with(
                src=pa.array(["1", "s" * 257]), type=pa.array(["A", "A"]), start=pa.array([1.0, 2.0])
            ),
            "headers": {"content-type": ARROW, "X-Scemon-Producer": "p", "X-Scemon-Batch-Id": "1"},
        },
        422,
        ["event 1", "'src'", "256"],
        {"index": 1, "field": "src"},
    ),
    (
        "POST",
        "/v1/events",
        {
            "content": arrow_with(
                src=pa.array(["1"]),
                type=pa.array(["A"]),
                start=pa.array([1.0]),
                attrs=pa.array(['{"x": "' + "v" * 4097 + '"}']),
            ),
            "headers": {"content-type": ARROW, "X-Scemon-Producer": "p", "X-Scemon-Batch-Id": "1"},
        },
        422,
        ["event 0", "attribute 'x'", "4096"],
        {"index": 0, "field": "attrs"},
    ),
    # a body over the limit of its route; a body of more JSON values than the limit
    ("POST", "/v1/time", {"json": {"time": 1.0, "pad": "x" * 70_000}}, 413, ["limit here", "65,536"], {}),
    (
        "POST",
        "/v1/events",
        {"content": b"[" + b"0," * 90_000 + b"0]", "headers": {"content-type": "application/json"}},
        413,
        ["JSON values", "smaller batches"],
        {},
    ),
    # a state-changing request must say it is JSON (or Arrow): what a browser sends
    # cross-site without asking first is not
    (
        "POST",
        "/v1/queries",
        {"content": b'{"name": "q", "text": "A"}', "headers": {"content-type": "text/plain"}},
        415,
        ["text/plain", "application/json"],
        {},
    ),
    (
        "POST",
        "/v1/events",
        {"content": b'{"producer": "p", "batch_id": 9, "events": []}'},
        415,
        ["without Content-Type"],
        {},
    ),
    # unknown route, wrong method, unknown media type
    ("GET", "/v1/nothing", {}, 404, ["no route", "/v1/nothing"], {}),
    ("PUT", "/v1/queries", {}, 405, ["PUT"], {}),
    (
        "POST",
        "/v1/events",
        {"content": b"src,type\n", "headers": {"content-type": "text/csv"}},
        415,
        ["text/csv"],
        {},
    ),
    # Arrow
    (
        "POST",
        "/v1/events",
        {
            "content": b"not arrow",
            "headers": {"content-type": ARROW, "X-Scemon-Producer": "p", "X-Scemon-Batch-Id": "1"},
        },
        400,
        ["Arrow IPC"],
        {},
    ),
    (
        "POST",
        "/v1/events",
        {
            "content": arrow_bytes(arrow_table([GOOD_EVENT | {"src": "1"}])),
            "headers": {"content-type": ARROW, "X-Scemon-Batch-Id": "1"},
        },
        422,
        ["X-Scemon-Producer"],
        {},
    ),
    (
        "POST",
        "/v1/events",
        {
            "content": arrow_with(src=pa.array(["1"]), type=pa.array(["A"]), start=pa.array(["noon"])),
            "headers": {"content-type": ARROW, "X-Scemon-Producer": "p", "X-Scemon-Batch-Id": "1"},
        },
        422,
        ["'start'", "string"],
        {"field": "start"},
    ),
    (
        "POST",
        "/v1/events",
        {
            "content": arrow_with(
                src=pa.array(["1"]), type=pa.array(["A"]), start=pa.array([1.0]), color=pa.array(["red"])
            ),
            "headers": {"content-type": ARROW, "X-Scemon-Producer": "p", "X-Scemon-Batch-Id": "1"},
        },
        422,
        ["unknown column 'color'"],
        {"field": "color"},
    ),
    (
        "POST",
        "/v1/events",
        {
            "content": arrow_with(src=pa.array(["1"]), start=pa.array([1.0])),
            "headers": {"content-type": ARROW, "X-Scemon-Producer": "p", "X-Scemon-Batch-Id": "1"},
        },
        422,
        ["missing column 'type'"],
        {"field": "type"},
    ),
    (
        "POST",
        "/v1/events",
        {
            "content": arrow_with(
                src=pa.array(["1", "1"]),
                type=pa.array(["A", "B"]),
                start=pa.array([2.0, 3.0]),
                end=pa.array([None, 1.0]),
            ),
            "headers": {"content-type": ARROW, "X-Scemon-Producer": "p", "X-Scemon-Batch-Id": "1"},
        },
        422,
        ["event 1", "'end'"],
        {"index": 1, "field": "end"},
    ),
    (
        "POST",
        "/v1/events",
        {
            "content": arrow_with(
                src=pa.array(["1"]), type=pa.array(["A"]), start=pa.array([1.0]), attrs=pa.array(["{bad"])
            ),
            "headers": {"content-type": ARROW, "X-Scemon-Producer": "p", "X-Scemon-Batch-Id": "1"},
        },
        422,
        ["event 0", "attrs", "JSON"],
        {"index": 0, "field": "attrs"},
    ),
]


@pytest.mark.parametrize(("method", "path", "kwargs", "status", "words", "where"), CASES)
def test_bad_input_is_a_4xx_saying_what_and_where_and_changes_nothing(
    server: Server,
    method: str,
    path: str,
    kwargs: dict[str, Any],
    status: int,
    words: list[str],
    where: dict[str, Any],
) -> None:
    before = state(server)
    response = httpx.request(method, f"{server.url}{path}", **kwargs)
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    for word in words:
        assert word in detail["message"], detail
    for key, value in where.items():
        assert detail.get(key) == value, detail
    assert state(server) == before


@pytest.mark.parametrize(
    ("query", "status", "word"),
    [
        ("from_seq=abc", 422, "integer"),
        ("from_seq=-3", 422, "negative"),
        ("from_seq=99999", 422, "beyond"),
        ("from_seq=99999999999999999999999", 422, "too large"),
        ("queries=nope", 404, "'nope'"),
        ("queries=a%20b", 422, "queries"),
    ],
)
def test_a_bad_subscription_is_refused_with_a_message(
    server: Server, query: str, status: int, word: str
) -> None:
    url = server.url.replace("http", "ws") + f"/v1/matches/ws?{query}"
    with pytest.raises(Exception) as caught:
        with connect(url, proxy=None):
            pass
    response = caught.value.response  # type: ignore[attr-defined]
    assert response.status_code == status
    assert word in response.body.decode()
