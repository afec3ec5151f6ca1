"""A bulk registration (Engine.register_many) leaves every ECQ's sequence filters,
conjunction masks, counts, filters and drop horizon exactly as registering the same
queries one by one does: the bits, filters and windows it leaves waiting
(ecq.network._BulkBits, SlotFilter.wait) all land."""

from __future__ import annotations

from typing import Any

from ecq.engine import Engine
from ecq.evaluation.workload import Workload, condition_queries, credit_card_workload
from ecq.event import Event
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
            # The drop horizon (its windows a bulk registration adds at once), the
            # R-CLT's masks and the CLT's order.
            (e.drop.window, e.drop.frozen, list(e.drop.windows.items())),
            {target: rl.masks for target, rl in e.rclt.items()},
            [(c.q.name, c.position) for c in e.clt],
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


def test_a_bulk_registration_after_events_leaves_what_one_by_one_does() -> None:
    """Queries registered in bulk once events have moved the clock, beside queries
    registered before (their windows, filters and masks already there), some sharing
    their filters and some with larger windows: the same state as one by one."""
    before = condition_queries(Workload(n_queries=60), 1)[:30] + EXTRA[:3]
    later = [(f"b{name}", text) for name, text in condition_queries(Workload(n_queries=60), 1)]
    later += [(f"b{name}", text.replace("5 s", "50 s")) for name, text in EXTRA]
    events = [Event("s", cls, float(t), float(t), {"x": t, "y": -t, "a0": t}) for t in range(1, 40) for cls in "ABC"]
    engines = []
    for bulk in (True, False):
        engine = Engine()
        engine.register_many(before)
        engine.process(events)
        if bulk:
            engine.register_many(later)
        else:
            for name, text in later:
                engine.register(name, text)
        engine.network._check()
        engines.append(engine)
    assert _state(engines[0]) == _state(engines[1])
