"""Streams for the server tests: queries over the whole language, seeded event batches,
posting them as JSON or Arrow, and what ``tests/reference.py`` says they must match.

The service sorts each batch stably by ``(end, start)``; the reference takes events in
arrival order, so :class:`Feed` applies the same sort to know each event's arrival
index, and maps the event names in the server's matches (the ``id``, or
``"<batch_id>:<index>"``) back to arrival indexes.
"""

from __future__ import annotations

import random
from typing import Any

import orjson
import pyarrow as pa

from api.client import Client
from ecq.language import parse_query
from ecq.language.ast import to_json
from tests import reference

QUERIES: list[tuple[str, str]] = [
    ("seq3", "SEQ(A a, B b, C c) WHERE a.x < c.x WITHIN 20 s"),
    ("seq_all", "A; B WITHIN 10 s MODE ALL"),
    ("conj", "AND(A, C) WITHIN 5 s"),
    ("disj", "OR(B, D)"),
    ("neg", "SEQ(A, !B, C) WITHIN 15 s"),
    ("trail", "SEQ(A, B, !D) WITHIN 8 s"),
    ("kleene", "SEQ(A, B+, C) WITHIN 12 s MODE ALL"),
    ("ret", "SEQ(C c, D d) WITHIN 6 s RETURN d.x - c.x AS gap"),
    ("nested", "SEQ(A, AND(B, C), D) WITHIN 20 s"),
    ("reads", "SEQ(@seq3, D) WITHIN 30 s"),
]

# Later than every deadline (the reference flushes to +inf), and within --max-ahead of
# the feeds' clocks (a few thousand seconds): these streams are not in epoch time, so the
# wall clock is no reference for them.
FLUSH = 50_000.0


def query_json(text: str) -> dict[str, Any]:
    return to_json(parse_query(text))


def make_batches(
    seed: int, n_batches: int, size: int, t0: float = 0.0, sources: int = 3
) -> list[tuple[str, list[dict[str, Any]]]]:
    """``(batch_id, events)`` in posting order; events are roughly in time order with
    jitter inside a batch (so the server's sort matters), half without ids."""
    rng = random.Random(seed)
    t = t0
    out = []
    for b in range(n_batches):
        events = []
        for i in range(size):
            t += rng.choice([0.5, 1.0, 1.5])
            start = t + rng.choice([0.0, 0.0, -0.25, 0.25])
            event: dict[str, Any] = {
                "src": f"s{rng.randrange(sources)}",
                "type": rng.choice("AABBCCD"),
                "start": start,
                "attrs": {"x": rng.randrange(10)},
            }
            if rng.random() < 0.3:
                event["end"] = start + rng.choice([0.0, 0.5, 2.0])
            if rng.random() < 0.2:
                event["prob"] = rng.choice([0.5, 0.9])
            if i % 2 == 0:
                event["id"] = f"s{seed}-b{b}-e{i}"
            events.append(event)
        rng.shuffle(events[: size // 3])
        out.append((f"{seed}-{b}", events))
    return out


def arrow_table(events: list[dict[str, Any]]) -> pa.Table:
    """The Spark sink's columns for ``events``."""
    return pa.table(
        {
            "src": pa.array([e["src"] for e in events], pa.string()),
            "type": pa.array([e["type"] for e in events], pa.string()),
            "start": pa.array([float(e["start"]) for e in events], pa.float64()),
            "end": pa.array([e.get("end") for e in events], pa.float64()),
            "prob": pa.array([e.get("prob") for e in events], pa.float64()),
            "id": pa.array([e.get("id") for e in events], pa.string()),
            "attrs": pa.array(
                [orjson.dumps(e["attrs"]).decode() if "attrs" in e else None for e in events], pa.string()
            ),
        }
    )


class Feed:
    """What was posted, in arrival order, and the names the server gives events."""

    def __init__(self) -> None:
        self.arrivals: list[dict[str, Any]] = []
        self.index: dict[Any, int] = {}

    def post(
        self, client: Client, producer: str, batch_id: str, events: list[dict[str, Any]], arrow: bool
    ) -> int:
        """Post one batch; returns the matches it released."""
        if arrow:
            result = client.post_arrow(producer, batch_id, arrow_table(events))
        else:
            result = client.post_events(producer, batch_id, events)
        assert not result.duplicate and result.accepted == len(events)
        self.record(batch_id, events)
        return result.matches

    def record(self, batch_id: str, events: list[dict[str, Any]]) -> None:
        named = [(e.get("id", f"{batch_id}:{i}"), e) for i, e in enumerate(events)]
        named.sort(key=lambda pair: (pair[1].get("end", pair[1]["start"]), pair[1]["start"]))
        for name, event in named:
            self.index[name] = len(self.arrivals)
            self.arrivals.append(event)

    def as_arrivals(self, matches: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Server matches in the reference's terms (arrival indexes, no seq)."""
        return [normal({**m, "events": self._map(m["events"])}) for m in matches]

    def _map(self, entries: list[Any]) -> list[Any]:
        return [self._map(e) if isinstance(e, list) else self.index[e] for e in entries]


def normal(match: dict[str, Any]) -> dict[str, Any]:
    return {
        "query": match["query"],
        "src": match["src"],
        "start": float(match["start"]),
        "end": float(match["end"]),
        "events": match["events"],
        "attrs": match["attrs"],
        "prob": round(match["prob"], 9),
    }


def expected(queries: list[tuple[str, str]], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reference's matches for ``queries`` registered first, then ``events``."""
    found = reference.evaluate_queries([(name, query_json(text)) for name, text in queries], events)
    return [normal(m) for m in found]
