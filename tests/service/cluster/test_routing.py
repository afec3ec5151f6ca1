"""Routing by partition keys (docs/architecture.md, "A cluster"): the Spark job sends an
event to the shard of its source and to the owner of its value of each other key in use
(api.spark_sink.split_by_keys); each shard evaluates a key's queries only on the values
it owns (SCEMON_SHARD, service.server.sharding). Together the shards give exactly one
engine's matches, each from one shard."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.routing import owner_of, shard_of, value_text
from api.spark_sink import split_by_keys
from ecq import Engine, Event, Match
from ecq.errors import QueryError
from ecq.language.ast import from_json
from service.server.sharding import ownership
from tests.match_share import min_share, record
from tests.strategies import partitioned_sets, planted_streams, query_sets

CLASSES = ("A", "B", "C", "D")
Key = tuple[str, ...]


def test_a_values_text() -> None:
    assert value_text(("src",), "s1") == "s1" and value_text(("src",), 7) == "7"
    assert value_text(("x",), 1.5) == "1.5" and value_text(("x",), True) == "true"
    assert (
        value_text(("x",), None) == "null"
        and value_text(("x",), [1, {"b": 1, "a": 2}]) == '[1,{"a":2,"b":1}]'
    )
    assert value_text(("x", "y"), ("a", 2)) == "a\x1f2"
    assert value_text((), None) == ""
    # The source's owner is the owner of its value under the default key, and NONE's is shard 0.
    for src in ("s1", "card-17", 12345):
        assert owner_of(("src",), src, 7) == shard_of(src, 7)
    assert owner_of((), None, 5) == 0 and owner_of(("x",), "v", 1) == 0
    # 1 and "1" are two partitions (docs/semantics.md) with one owner: a shard may own many.
    assert value_text(("x",), 1) == value_text(("x",), "1") != value_text(("x",), 1.0)


def test_the_shard_setting_is_checked() -> None:
    from pydantic import ValidationError

    from service.server.config import Settings

    assert Settings(shard=" 1/3").shard == "1/3"
    for bad in ("3/3", "1", "a/2", "-1/2", "1/0"):
        with pytest.raises(ValidationError, match="K/N"):
            Settings(shard=bad)
    assert ownership("") is None and ownership("0/1") is None
    owns = ownership("1/2")
    assert owns is not None and owns(("src",), "s1") == (shard_of("s1", 2) == 1)


def routing_keys(queries: list[tuple[str, dict[str, Any]]]) -> list[tuple[Key, frozenset[str]]]:
    """What the shards would answer on GET /v1/cluster/routing for ``queries``."""
    classes: dict[Key, set[str]] = {}
    for name, q in queries:
        key = Engine.compile(name, from_json(q)).partition  # PARTITION BY, or [attr] on every component
        if key != ("src",):
            classes.setdefault(key, set()).update(_classes(q["pattern"]))
    return [(key, frozenset(names)) for key, names in classes.items()]


def _classes(pattern: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for item in pattern["items"]:
        out.extend(_classes(item["sub"]) if "sub" in item else item["classes"])
    return out


def as_table(events: list[dict[str, Any]]) -> pa.Table:
    return pa.table(
        {
            "src": [str(e["src"]) for e in events],
            "type": [e["type"] for e in events],
            "start": [float(e["start"]) for e in events],
            "end": [float(e.get("end", e["start"])) for e in events],
            "prob": [float(e.get("prob", 1.0)) for e in events],
            "id": [e["id"] for e in events],
            "attrs": [orjson.dumps(e["attrs"]).decode() if e.get("attrs") else None for e in events],
        }
    )


def shown(matches: list[Match]) -> list[tuple[Any, ...]]:
    """What a match is, whichever engine found it (arrival indexes differ by shard)."""
    return [(m.query, repr(m.src), m.start, m.end, tuple(map(str, m.event_ids()))) for m in matches]


def run(
    engine: Engine, queries: list[tuple[str, dict[str, Any]]], events: list[Event], batched: bool = True
) -> list[tuple[Any, ...]]:
    """Register ``queries``, then ``events`` in one batch (or one at a time), then flush."""
    for name, q in queries:
        engine.register(name, from_json(q))
    out = engine.process(events) if batched else [m for e in events for m in engine.process([e])]
    return shown(out + engine.advance_time(math.inf))


def events_of(table: pa.Table) -> list[Event]:
    rows = table.to_pylist()
    attrs = [orjson.loads(r["attrs"]) if r["attrs"] else {} for r in rows]
    return [
        Event(r["src"], r["type"], r["start"], r["end"], a, r["prob"], r["id"])
        for r, a in zip(rows, attrs, strict=True)
    ]


@min_share(0.25)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(2, 3), st.booleans())
def test_shards_together_give_one_engines_matches(data: st.DataObject, shards: int, batched: bool) -> None:
    """Queries partitioned by the source, an attribute, two attributes and NONE; a
    stream in time order routed by the job's rule to 2 or 3 shards, each told its place:
    the union of the shards' matches is one engine's, and no match comes from two
    shards. (Out of order, each shard's clock decides what is late on it.)"""
    queries = data.draw(partitioned_sets(query_sets(CLASSES)))
    raw = data.draw(planted_streams(queries, CLASSES, n_sources=3, max_len=14, in_order=True))
    events = [dict(e, id=f"e{i}") for i, e in enumerate(raw)]
    table = as_table(events)
    try:
        single = run(Engine(clean_every=3), queries, events_of(table))
    except QueryError:
        return  # a query set the engine refuses (an @name across keys): nothing to route
    record([{"query": m[0]} for m in single])
    parts = split_by_keys(table, shards, routing_keys(queries))
    got: list[tuple[Any, ...]] = []
    for k, part in enumerate(parts):
        engine = Engine(clean_every=3)
        engine.owns = ownership(f"{k}/{shards}")
        got += run(engine, queries, events_of(part), batched)
    assert Counter(got) == Counter(single)


def test_without_other_keys_the_job_routes_by_source_alone() -> None:
    table = as_table([{"src": f"s{i}", "type": "A", "start": i, "id": f"e{i}"} for i in range(40)])
    by_keys = split_by_keys(table, 3, [])
    by_src = [[shard_of(f"s{i}", 3) for i in range(40)].count(k) for k in range(3)]
    assert [p.num_rows for p in by_keys] == by_src
    # A key whose classes the events are not of adds no copy.
    assert [p.num_rows for p in split_by_keys(table, 3, [(("x",), frozenset({"B"}))])] == by_src
    # NONE's events go to shard 0 as well as to their source's shard.
    none = split_by_keys(table, 3, [((), frozenset({"A"}))])
    assert none[0].num_rows == 40 and [p.num_rows for p in none[1:]] == by_src[1:]
