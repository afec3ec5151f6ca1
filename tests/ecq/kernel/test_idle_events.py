"""Events of a class no query of a network reads (and a keyed network's placeholders
for events it cannot see): the compiled kernel's event loop only counts them, without
the network's Python ``on_event``, and the matches, the clock and the counters stay
those of the pure kernel — including a trailing negation whose deadline such an event
passes."""

from __future__ import annotations

from typing import Any

import pytest

from ecq.engine import Engine
from ecq.event import Event
from ecq.kernel.select import status
from ecq.network import Network

pytestmark = pytest.mark.skipif(not status().compiled, reason=str(status().reason))


def _events(n: int) -> list[Event]:
    """A, B, C (every other time) and many Z (read by no query) over two sources and a key ``k``."""
    out = []
    kinds = "AZZBZZCZZZAZZBZZZZZZ"
    for i in range(n):
        src = f"s{(i // 10) % 2}"
        out.append(
            Event.from_dict(
                {"id": i, "src": src, "type": kinds[i % len(kinds)], "start": float(i), "attrs": {"k": i % 3}}
            )
        )
    return out


def _run(compiled: bool, queries: list[tuple[str, str]], events: list[Event]) -> tuple[list[Any], dict[str, Any]]:
    engine = Engine(clean_every=7, compiled=compiled)
    for name, text in queries:
        engine.register(name, text)
    matches = []
    for at in range(0, len(events), 9):
        batch = [Event(e.src, e.type, e.start, e.end, e.attrs, e.prob, e.id) for e in events[at : at + 9]]
        matches += [(m.query, m.event_ids(), m.seq, m.src) for m in engine.process(batch)]
    matches += [(m.query, m.event_ids(), m.seq, m.src) for m in engine.advance_time(float("inf"))]
    stats = engine.stats()
    return matches, {k: stats[k] for k in ("stored_instances", "queries")} | {
        "clock": engine.clock,
        "arrivals": engine.arrivals,
        "ops": engine.ops,
        "seen": [net.seen for _, net in engine.networks()],
    }


QUERIES = [
    ("plain", "SEQ(A a, B b) WITHIN 20"),
    ("trailing", "SEQ(A a, B b, !C c) WITHIN 6"),
    ("keyed", "SEQ(A a, C c) WITHIN 30 PARTITION BY k"),
]


def test_idle_events_give_the_pure_kernels_matches_and_counters() -> None:
    events = _events(400)
    compiled = _run(True, QUERIES, events)
    pure = _run(False, QUERIES, events)
    assert compiled == pure
    names = {q for q, *_ in compiled[0]}
    # Non-vacuous: every query matched, the trailing negation's matches released by
    # the clock (most ops are Z events, which no query reads).
    assert names == {"plain", "trailing", "keyed"}
    assert compiled[1]["seen"][0] == len(events)


def test_an_event_no_query_reads_does_not_take_the_networks_python_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = Network.on_event

    def counted(self: Network, e: Event, before: float, clock: float) -> Any:
        calls.append(e.type)
        return original(self, e, before, clock)

    monkeypatch.setattr(Network, "on_event", counted)
    engine = Engine(compiled=True)
    engine.register("plain", "SEQ(A a, B b) WITHIN 20")
    engine.register("keyed", "SEQ(A a, B b) WITHIN 20 PARTITION BY k")
    matches = engine.process(_events(200))
    assert matches, "the plain sequences match"
    # Z events (no query reads them) and each network's placeholders of the events it
    # cannot see never reach Network.on_event; only classes a query uses may.
    assert "Z" not in calls and "" not in calls
