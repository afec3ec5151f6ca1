"""The cost of many partition keys: 1,000 queries spread over 1, 2, 4 and 8 keys
(docs/semantics.md, "Partitions"), stored instances and events/s, the shared engine
beside the separate-processing baseline in one run.

Key 0 is the source (the default); key ``j`` is an attribute ``p<j>`` that groups the
sources differently (``src * (2j + 1) mod sources``), so every key has as many
partitions as there are sources and each event carries every key. Query ``i`` takes
key ``i mod keys``: with one key this is the plain workload, with more the same queries
and events, each event processed once per key in use.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ecq.engine import Engine
from ecq.evaluation.baseline import SeparateEngine
from ecq.evaluation.workload import Workload, events, sequence_queries
from ecq.event import Event
from service.bench.table import Plot, Table

__all__ = ["partitions", "KEY_COUNTS"]

KEY_COUNTS = (1, 2, 4, 8)


def _workload(n_queries: int, n_events: int, keys: int) -> tuple[list[tuple[str, str]], list[Event]]:
    w = Workload(n_queries=n_queries, n_sources=1000, n_classes=50, seed=7)
    queries = [
        (name, text if i % keys == 0 else f"{text}\nPARTITION BY p{i % keys}")
        for i, (name, text) in enumerate(sequence_queries(w))
    ]
    stream = []
    for e in events(w, n_events):
        src = int(e.src)
        attrs = {f"p{j}": (src * (2 * j + 1)) % w.n_sources for j in range(1, max(KEY_COUNTS))}
        stream.append(Event(e.src, e.type, e.start, e.end, attrs, e.prob, e.id))
    return queries, stream


def _measure(engine: Engine | SeparateEngine, queries: list[tuple[str, str]], stream: list[Event]) -> tuple[float, int]:
    """Events/s over the last four fifths of ``stream`` (the first fifth warms up), and
    the instances stored at the end."""
    for name, text in queries:
        engine.register(name, text)
    warm = len(stream) // 5
    engine.process(stream[:warm])
    began = time.perf_counter()
    for at in range(warm, len(stream), 500):
        engine.process(stream[at : at + 500])
    elapsed = time.perf_counter() - began
    return (len(stream) - warm) / elapsed, engine.stats()["stored_instances"]


def partitions(
    quick: bool = False, n_events: int | None = None, progress: Callable[[float, str], None] | None = None
) -> list[Table]:
    """The table: per number of keys, events/s and stored instances, shared and SP, and
    the shared engine's speed relative to one key."""
    n_queries = 200 if quick else 1000
    count = n_events or (3000 if quick else 20000)
    table = Table(
        "partitions_keys",
        f"{n_queries} queries over 1-8 partition keys: events/s and stored instances",
        ["keys", "shared_ev_s", "sp_ev_s", "shared_stored", "sp_stored", "shared_vs_1_key"],
        plot=Plot("keys", ("shared_ev_s", "sp_ev_s"), "events/s", "partition keys in use"),
    )
    first = 0.0
    for step, keys in enumerate(KEY_COUNTS):
        queries, stream = _workload(n_queries, count, keys)
        shared, shared_stored = _measure(Engine(), queries, stream)
        sp, sp_stored = _measure(SeparateEngine(), queries, stream)
        first = first or shared
        table.add(
            keys=keys,
            shared_ev_s=round(shared),
            sp_ev_s=round(sp),
            shared_stored=shared_stored,
            sp_stored=sp_stored,
            shared_vs_1_key=round(shared / first, 2),
        )
        if progress is not None:
            progress((step + 1) / len(KEY_COUNTS), f"{keys} keys")
    table.notes = [
        f"{n_queries} sequence queries (3 steps, 50 classes, windows 200-240 min), 1,000 sources, "
        f"{count} events (the first fifth warms up); query i partitioned by key i mod keys "
        "(key 0 the source, key j an attribute p<j> regrouping the sources); one process, "
        "shared engine (compiled kernel when built) and SP baseline on the same events."
    ]
    return [table]
