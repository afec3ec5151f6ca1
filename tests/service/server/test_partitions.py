"""One service, queries of four partition keys (the source written out, an attribute,
NONE and SASE's ``[id]``): each query's matches over REST are the reference's
(tests/reference.py), and ``GET /v1/queries`` shows each query's key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from ecq.language import parse_queries, to_json
from tests import reference
from tests.service.conftest import StartServer

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "partitions"


def _example() -> tuple[list[tuple[str, dict[str, Any]]], list[dict[str, Any]]]:
    queries = [(q.name or "", to_json(q)) for q in parse_queries((EXAMPLE / "queries.txt").read_text())]
    events = [orjson.loads(line) for line in (EXAMPLE / "events.jsonl").read_bytes().splitlines()]
    return queries, events


def _ids(entries: list[Any], events: list[dict[str, Any]]) -> list[Any]:
    return [_ids(x, events) if isinstance(x, list) else events[x]["id"] for x in entries]


def test_queries_of_four_keys_in_one_service_give_the_references_matches(start_server: StartServer) -> None:
    queries, events = _example()
    expected = reference.evaluate_queries(queries, events)
    # Every key has matches, so the comparison below is not vacuous.
    assert {m["query"] for m in expected} == {name for name, _ in queries}
    server = start_server()
    client = server.client()
    text = (EXAMPLE / "queries.txt").read_text()
    client.register_bulk([{"name": q.name, "pattern": to_json(q)} for q in parse_queries(text)])
    shown = {q.name: q.partition for q in client.queries()}
    assert shown == {
        "feed_burst": ["src"],
        "symbol_rise_then_fall": ["symbol"],
        "ibm_no_sun_oracle": [],
        "shoplifting": ["id"],
    }
    client.post_events("p", 1, events)
    # Past every window (the clock may move at most --max-ahead, a day, at once).
    client.advance_time(max(e.get("end", e["start"]) for e in events) + 86_000)
    got = client.all_matches()
    assert [(m["query"], m["src"], m["events"]) for m in got] == [
        (m["query"], list(m["src"]) if isinstance(m["src"], tuple) else m["src"], _ids(m["events"], events))
        for m in expected
    ]
