"""The cost of many partition keys: 1,000 queries spread over 1, 2, 4 and 8 keys
(docs/semantics.md, "Partitions"), stored instances and events/s, the shared engine
beside the separate-processing baseline in one run.

Key 0 is the source (the default); key ``j`` is an attribute ``p<j>`` that groups the
sources differently (``src * m_j mod sources``, ``m_j`` a prime that does not divide the
number of sources), so every key has as many partitions as there are sources and each
event carries every key. Query ``i`` takes
key ``i mod keys``: with one key this is the plain workload, with more the same queries
and events, each event processed once per key in use.
"""

from __future__ import annotations

import gc
import re
import time
from collections.abc import Callable, Sequence

from ecq.engine import Engine
from ecq.evaluation.baseline import SeparateEngine
from ecq.evaluation.workload import Workload, events, sequence_queries
from ecq.event import Event
from service.bench.runner import fresh
from service.bench.table import Plot, Table

__all__ = ["partitions", "KEY_COUNTS"]

KEY_COUNTS = (1, 2, 4, 8)
# Key j regroups the sources by src * _MULTIPLIERS[j - 1] mod sources: primes apart from
# 2 and 5, so that each key is a permutation of the 1,000 sources (a factor in common
# would fold them into fewer, larger partitions with many more matches).
_MULTIPLIERS = (3, 7, 11, 13, 17, 19, 23)
# A class name of the workload's queries (C00 .. C49).
_CLASS = re.compile(r"\bC\d\d\b")


def _queries(w: Workload, keys: int) -> list[tuple[str, str]]:
    """The workload's queries, query ``i`` partitioned by key ``i mod keys``."""
    return [
        (name, text if i % keys == 0 else f"{text}\nPARTITION BY p{i % keys}")
        for i, (name, text) in enumerate(sequence_queries(w))
    ]


def _stream(w: Workload, n_events: int) -> list[Event]:
    """The workload's events, each with every key's attribute (the same for every key count)."""
    stream = []
    for e in events(w, n_events):
        src = int(e.src)
        attrs = {f"p{j}": (src * _MULTIPLIERS[j - 1]) % w.n_sources for j in range(1, max(KEY_COUNTS))}
        stream.append(Event(e.src, e.type, e.start, e.end, attrs, e.prob, e.id))
    return stream


def _own_classes(w: Workload, keys: int, stream: list[Event]) -> tuple[list[tuple[str, str]], list[Event]]:
    """The workload with each key's queries over classes of their own: query ``i`` of
    key ``i mod keys`` reads its classes renamed into group ``i mod keys`` (``G<j>C07``)
    and event ``n`` is of group ``n mod keys``. The queries are :func:`_queries`'."""
    queries = [
        (name, _CLASS.sub(rf"G{i % keys}\g<0>", text)) for i, (name, text) in enumerate(_queries(w, keys))
    ]
    events = [
        Event(e.src, f"G{n % keys}{e.type}", e.start, e.end, e.attrs, e.prob, e.id) for n, e in enumerate(stream)
    ]
    return queries, events


def _key_value(e: Event, j: int) -> str | int:
    """Event ``e``'s value of key ``j`` (:func:`_stream`'s attributes; key 0 the source)."""
    value = e.src if j == 0 else e.attrs[f"p{j}"]
    assert isinstance(value, str | int)
    return value


class _PerKeyEngines:
    """One engine per key, as one deployment per key would run: engine ``j`` holds the
    queries of key ``j`` written on the source (no PARTITION BY) and reads its own copy
    of the stream whose events' source is their key ``j`` value, made beforehand (each
    deployment decodes its own stream). :meth:`process` hands each engine the next
    events of its copy, as many as the batch given (whose events it does not read)."""

    def __init__(self, w: Workload, keys: int, stream: list[Event]) -> None:
        self.engines: list[Engine] = []
        self.streams: list[list[Event]] = []
        for j in range(keys):
            engine = Engine()
            for name, text in sequence_queries(w)[j::keys]:
                engine.register(name, text)
            self.engines.append(engine)
            own = [Event(_key_value(e, j), e.type, e.start, e.end, e.attrs, e.prob, e.id) for e in stream]
            self.streams.append(own)
        self.at = 0

    def process(self, batch: list[Event]) -> list[object]:
        at, self.at = self.at, self.at + len(batch)
        out: list[object] = []
        for engine, own in zip(self.engines, self.streams, strict=True):
            out += engine.process(own[at : self.at])
        return out


def _measure(
    engines: Sequence[Engine | SeparateEngine | _PerKeyEngines], stream: list[Event], chunk: int = 500
) -> list[float]:
    """Events/s of each engine over the last four fifths of ``stream`` (the first fifth
    warms up), the engines given the same chunks in turn, rotating the order, with the
    cyclic collector off while timing, as every engine comparison does
    (``service.bench.runner``): a slow moment of the machine, or a collection walking
    one engine's instances, hits all engines alike."""
    warm = len(stream) // 5
    for engine in engines:
        engine.process(fresh(stream[:warm]))
    seconds = [0.0] * len(engines)
    n = len(engines)
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for step, at in enumerate(range(warm, len(stream), chunk)):
            for turn in range(n):
                i = (step + turn) % n
                batch = fresh(stream[at : at + chunk])
                began = time.perf_counter()
                engines[i].process(batch)
                seconds[i] += time.perf_counter() - began
                del batch
            gc.collect(0)
    finally:
        if was_enabled:
            gc.enable()
    return [(len(stream) - warm) / spent for spent in seconds]


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
        [
            "keys",
            "shared_ev_s",
            "sp_ev_s",
            "shared_stored",
            "sp_stored",
            "shared_vs_1_key",
            "one_network_ev_s",
            "networks_bound_vs_1_key",
            "per_key_engines_ev_s",
            "per_key_engines_vs_1_key",
        ],
        plot=Plot("keys", ("shared_ev_s", "sp_ev_s"), "events/s", "partition keys in use"),
    )
    # Every key count's shared engine and SP baseline in one interleaved run, so that
    # the speeds against one key hold on a noisy machine.
    w = Workload(n_queries=n_queries, n_sources=1000, n_classes=50, seed=7)
    stream = _stream(w, count)
    engines: list[Engine | SeparateEngine] = []
    for step, keys in enumerate(KEY_COUNTS):
        queries = _queries(w, keys)
        for engine in (Engine(), SeparateEngine()):
            for name, text in queries:
                engine.register(name, text)
            engines.append(engine)
        if progress is not None:
            progress((step + 1) / (4 * len(KEY_COUNTS)), f"{keys} keys registered")
    # Per key count above one, an engine of one key's share of the queries alone (one
    # network of n/keys queries): what each of the keys' networks costs by itself, so
    # that the table shows how much of a network's cost is fixed per event.
    alone = len(engines)
    for keys in KEY_COUNTS[1:]:
        engine = Engine()
        for name, text in _queries(w, keys)[::keys]:
            engine.register(name, text)
        engines.append(engine)
    # Per key count above one, one engine per key side by side (one deployment per key).
    per_key = len(engines)
    speeds = _measure([*engines, *(_PerKeyEngines(w, keys, stream) for keys in KEY_COUNTS[1:])], stream)
    if progress is not None:
        progress(0.5, "measured")
    first = speeds[0]
    for k, keys in enumerate(KEY_COUNTS):
        shared, sp = speeds[2 * k], speeds[2 * k + 1]
        one = first if keys == 1 else speeds[alone + k - 1]
        apart = first if keys == 1 else speeds[per_key + k - 1]
        table.add(
            keys=keys,
            shared_ev_s=round(shared),
            sp_ev_s=round(sp),
            shared_stored=engines[2 * k].stats()["stored_instances"],
            sp_stored=engines[2 * k + 1].stats()["stored_instances"],
            shared_vs_1_key=round(shared / first, 2),
            one_network_ev_s=round(one),
            # ``keys`` networks each as fast as one alone: every event through each.
            networks_bound_vs_1_key=round(one / keys / first, 2),
            per_key_engines_ev_s=round(apart),
            per_key_engines_vs_1_key=round(apart / first, 2),
        )
    table.notes = [
        f"{n_queries} sequence queries (3 steps, 50 classes, windows 200-240 min), 1,000 sources, "
        f"{count} events (the first fifth warms up); query i partitioned by key i mod keys "
        "(key 0 the source, key j an attribute p<j> regrouping the sources); one process, "
        "shared engines (compiled kernel when built) and SP baselines of every key count "
        "on the same events, interleaved chunk by chunk, the collector off while timing; "
        "one_network_ev_s: an engine of one key's share of the queries alone (query i for i "
        "mod keys = 0, one network), in the same run; networks_bound_vs_1_key: one_network_ev_s "
        "/ keys against one key, the ratio if each key's network cost what it costs alone; "
        "per_key_engines: one engine per key side by side in the same run (one deployment per "
        "key), engine j holding key j's queries on the source and reading a copy of the events "
        "whose source is their key j value, made before timing."
    ]
    return [table, _own_classes_table(w, stream, n_queries, count, progress)]


def _own_classes_table(
    w: Workload,
    stream: list[Event],
    n_queries: int,
    count: int,
    progress: Callable[[float, str], None] | None,
) -> Table:
    """Keys whose queries read classes of their own: per key count, the keyed engine
    against the same queries and events with every query on the source (one network),
    interleaved."""
    table = Table(
        "partitions_own_classes",
        f"{n_queries} queries over 1-8 keys, each key's queries over classes of their own",
        ["keys", "keyed_ev_s", "one_key_ev_s", "keyed_vs_one_key", "keyed_stored", "one_key_stored"],
        plot=Plot("keys", ("keyed_ev_s", "one_key_ev_s"), "events/s", "partition keys in use"),
    )
    engines: list[Engine | SeparateEngine] = []
    streams = []
    for keys in KEY_COUNTS:
        queries, events = _own_classes(w, keys, stream)
        for partitioned in (True, False):
            engine = Engine()
            for name, text in queries:
                engine.register(name, text if partitioned else text.split("\nPARTITION BY")[0])
            engines.append(engine)
        streams.append(events)
    # One stream per key count (its classes renamed): each pair of engines is measured
    # on its own stream, the pairs interleaved within each key count.
    speeds: list[float] = []
    for k in range(len(KEY_COUNTS)):
        speeds += _measure(engines[2 * k : 2 * k + 2], streams[k])
        if progress is not None:
            progress(0.5 + (k + 1) / (2 * len(KEY_COUNTS)), f"{KEY_COUNTS[k]} keys over their own classes")
    for k, keys in enumerate(KEY_COUNTS):
        keyed, one = speeds[2 * k], speeds[2 * k + 1]
        table.add(
            keys=keys,
            keyed_ev_s=round(keyed),
            one_key_ev_s=round(one),
            keyed_vs_one_key=round(keyed / one, 2),
            keyed_stored=engines[2 * k].stats()["stored_instances"],
            one_key_stored=engines[2 * k + 1].stats()["stored_instances"],
        )
    table.notes = [
        f"The same {n_queries} queries and {count} events, query i of key i mod keys reading its "
        "classes renamed into group i mod keys and event n of group n mod keys (each key's "
        "queries see a share of the stream of their own); keyed: the queries partitioned as "
        "above, one network per key, each event only counted by the networks that do not read "
        "its class; one key: the same queries all on the source, one network; the two "
        "interleaved chunk by chunk on each key count's stream, the collector off while timing."
    ]
    return table
