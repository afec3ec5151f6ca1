"""Two real shards, each told its place (SCEMON_SHARD), fed by the Spark job's sink
(api.spark_sink.ServiceSink, which asks them the keys in use and routes by them), give
one service's matches for queries partitioned by the source, an attribute, NONE and
SASE's ``[id]``; without their places the sink stops rather than risk duplicates."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest

from api.routing import owner_of, shard_of
from api.spark_sink import ServiceSink, SinkError
from ecq.language import parse_queries, to_json
from tests.service.conftest import Server

QUERIES = (Path(__file__).resolve().parents[3] / "examples" / "partitions" / "queries.txt").read_text()


def stream(n: int = 400, seed: int = 7) -> list[dict[str, Any]]:
    """Trades of 8 symbols from 6 feeds, ticker events IBM/Sun/Oracle, and tag readings
    of 12 tags from 5 readers, one event a second."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = rng.choice(["trade", "trade", "ticker", "tag"])
        if kind == "trade":
            event = {
                "src": f"feed-{rng.randrange(6)}",
                "type": "TRADE",
                "attrs": {"symbol": f"S{rng.randrange(8)}", "price": rng.randrange(90, 110)},
            }
        elif kind == "ticker":
            event = {
                "src": f"ticker-{rng.randrange(3)}",
                "type": rng.choice(["IBM", "Sun", "Oracle"]),
                "attrs": {},
            }
        else:
            event = {
                "src": f"reader-{rng.randrange(5)}",
                "type": rng.choice(["SHELF-READING", "COUNTER-READING", "EXIT-READING"]),
                "attrs": {"id": rng.randrange(12)},
            }
        out.append({"id": f"e{i}", "start": float(i), **event})
    return out


def table(events: list[dict[str, Any]]) -> pa.Table:
    return pa.table(
        {
            "src": [e["src"] for e in events],
            "type": [e["type"] for e in events],
            "start": [e["start"] for e in events],
            "end": [e["start"] for e in events],
            "id": [e["id"] for e in events],
            "attrs": [orjson.dumps(e["attrs"]).decode() if e["attrs"] else None for e in events],
        }
    )


def register(server: Server, text: str) -> None:
    server.client().register_bulk([{"name": q.name, "pattern": to_json(q)} for q in parse_queries(text)])


def feed(servers: list[Server], events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Register the queries on every server, post the stream through the sink in
    batches of 50, flush time; every match of every server."""
    for server in servers:
        register(server, QUERIES)
    sink = ServiceSink([s.url for s in servers], "job")
    try:
        for batch in range(0, len(events), 50):
            sink.post_table(table(events[batch : batch + 50]), batch // 50)
    finally:
        sink.close()
    out = []
    for server in servers:
        client = server.client()
        client.advance_time(events[-1]["start"] + 86_000)
        out += [(m["query"], str(m["src"]), tuple(map(str, m["events"]))) for m in client.all_matches()]
    return out


def test_two_shards_told_their_places_give_one_services_matches(tmp_path: Path) -> None:
    events = stream()
    single = Server(tmp_path / "one", {"SCEMON_TOKENS": ""})
    shards = [Server(tmp_path / f"s{k}", {"SCEMON_TOKENS": "", "SCEMON_SHARD": f"{k}/2"}) for k in range(2)]
    try:
        for server in (single, *shards):
            server.start()
        expected = feed([single], events)
        got = feed(shards, events)
        routing = shards[0].client().routing()
    finally:
        for server in (single, *shards):
            server.stop()
    assert routing.shard == "0/2"
    assert {tuple(k.key): k.classes for k in routing.keys} == {
        ("symbol",): ["TRADE"],
        (): ["IBM", "Oracle", "Sun"],
        ("id",): ["COUNTER-READING", "EXIT-READING", "SHELF-READING"],
    }
    # Every key has matches, on both shards for the keys with many values.
    per_query = Counter(m[0] for m in expected)
    assert set(per_query) == {"feed_burst", "symbol_rise_then_fall", "ibm_no_sun_oracle", "shoplifting"}
    assert {shard_of(m[1], 2) for m in expected if m[0] == "feed_burst"} == {0, 1}
    assert {owner_of(("symbol",), m[1], 2) for m in expected if m[0] == "symbol_rise_then_fall"} == {0, 1}
    assert Counter(got) == Counter(expected)


def test_the_sink_stops_when_shards_do_not_know_their_places(tmp_path: Path) -> None:
    shards = [Server(tmp_path / f"s{k}", {"SCEMON_TOKENS": ""}) for k in range(2)]
    try:
        for server in shards:
            server.start()
            register(server, "QUERY by_src\nPATTERN SEQ(A, B) WITHIN 10")
        sink = ServiceSink([s.url for s in shards], "job")
        events = [{"id": "e0", "src": "s", "type": "A", "start": 1.0, "attrs": {"k": 1}}]
        # Only the source in use: routing by it needs no places.
        assert sink.post_table(table(events), 0).events == 1
        for server in shards:
            register(server, "QUERY by_k\nPATTERN SEQ(A, B)\nPARTITION BY k\nWITHIN 10")
        with pytest.raises(SinkError, match="is shard 0 of 2 in the job's list but was told no SCEMON_SHARD"):
            sink.post_table(table(events), 1)
        sink.close()
    finally:
        for server in shards:
            server.stop()
