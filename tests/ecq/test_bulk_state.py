"""A bulk registration (Engine.register_many) leaves every ECQ's sequence filters,
conjunction masks, counts and filters exactly as registering the same queries one by
one does: the bits it leaves waiting (ecq.network._BulkBits) all land."""

from __future__ import annotations

from typing import Any

from ecq.engine import Engine
from ecq.evaluation.workload import Workload, condition_queries, credit_card_workload
from ecq.structures.ecq import SlotFilter

EXTRA = [
    ("x1", "AND(A a1, A a2, B b) WHERE a1.x > 1 WITHIN 5 s"),
    ("x2", "PATTERN Conjunction WITH A, B WHERE [symbol] WITHIN 5 s"),
    ("x3", "AND(A a, B b, C c) WHERE a.x > 2 AND b.y < 3 WITHIN 5 s"),
    ("x4", "AND(A a, B b) WHERE a.x > 2 AND b.y < 3 WITHIN 5 s"),
    ("x5", "AND(A, B{2,}) WITHIN 5 s"),
    ("x6", "SEQ(A a, B b) WHERE a.x > 2 AND b.y < 3 WITHIN 5 s"),
    ("x7", "SEQ(A a, B b) WHERE a.x > 2 AND b.y < 3 WITHIN 5 s"),
]


def _slot(s: SlotFilter) -> tuple[Any, ...]:
    return (s.always, s.groups, s.index.queries, s.index.all, list(s.index.residual))


def _state(engine: Engine) -> dict[str, Any]:
    out = {}
    for cls, e in engine.network.ecqs.items():
        out[cls] = (
            {p: _slot(s) for p, s in e.seq_filters.items()},
            _slot(e.cnj_filter) if e.cnj_filter is not None else None,
            e.cnj_final,
            e.cnj_loose,
            e.cnj_need,
            e.cnj_count,
            e.cnj_each,
            e.general_uses,
            e.seq_final,
            e.seq_more,
        )
    return out


def test_a_bulk_registration_leaves_what_one_by_one_does() -> None:
    queries = credit_card_workload(n_queries=300)[0] + condition_queries(Workload(n_queries=300), 1) + EXTRA
    bulk = Engine()
    bulk.register_many(queries)
    one = Engine()
    for name, text in queries:
        one.register(name, text)
    bulk.network._check()
    one.network._check()
    assert _state(bulk) == _state(one)
