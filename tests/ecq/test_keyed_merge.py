"""Matches of several keys' networks in one batch come out in the one emission order
(docs/semantics.md, "Partitions"): by op, phase, registration order and events,
whichever network found them and in whichever order the networks ran."""

from __future__ import annotations

import pytest

from ecq.engine import Engine
from ecq.event import Event

# Registered before the source's queries, so emitted first at each op, though the
# source's network runs first.
QUERIES = [
    ("by_k", "SEQ(A a, B b) WITHIN 100 PARTITION BY k"),
    ("by_src", "SEQ(A a, B b) WITHIN 100"),
    ("by_j", "SEQ(A a, B b) WITHIN 100 PARTITION BY j"),
    ("trailing", "SEQ(A a, !C c) WITHIN 5 PARTITION BY k"),
]


def _engine(compiled: bool | None) -> Engine:
    engine = Engine(compiled=compiled)
    for name, text in QUERIES:
        engine.register(name, text)
    return engine


@pytest.mark.parametrize("compiled", [False, None])
def test_one_ops_matches_of_several_keys_follow_registration_order(compiled: bool | None) -> None:
    engine = _engine(compiled)
    stream = [
        Event("s1", "A", 0.0, 0.0, {"k": 1, "j": 1}),
        Event("s1", "A", 1.0, 1.0, {"k": 1, "j": 1}),
        Event("s1", "B", 2.0, 2.0, {"k": 1, "j": 1}),  # every key's match
        Event("s2", "B", 20.0, 20.0, {"k": 1, "j": 2}),  # releases "trailing" (phase 0), then k's
    ]
    for n, e in enumerate(stream):
        e.id = f"e{n}"
    batched = [(m.query, m.trigger, [e.id for e in m.events]) for m in engine.process(stream)]
    one_by_one = _engine(compiled)
    single = [(m.query, m.trigger, [e.id for e in m.events]) for e in stream for m in one_by_one.process([e])]
    assert batched == single
    at_b = [q for q, trigger, _ in batched if trigger == 2]
    assert at_b == ["by_k", "by_src", "by_j"]
    # Phase 0 (released by the op's clock) before phase 1, then events' order.
    assert [(q, ids) for q, trigger, ids in batched if trigger == 3] == [
        ("trailing", ["e0"]),
        ("trailing", ["e1"]),
        ("by_k", ["e1", "e3"]),
    ]
