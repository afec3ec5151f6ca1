"""What event time costs (``scemon bench lateness``): the paper's sequence workload fed
to the bare engine (what ``scemon replay`` and the service did before the time keeper)
and through a :class:`~ecq.time.timekeeper.TimeKeeper` with and without an allowed lateness,
on the stream in time order and on the same stream made late by up to ``disorder``
seconds. Every variant runs in the same process, interleaved over several rounds, so
old and new paths are measured side by side; the table shows the median rate, by wall
time and by this process's CPU time (the one to read on a shared machine, where other
processes take turns on the cores).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ecq.engine import Engine
from ecq.evaluation import workload as wl
from ecq.event import Event
from ecq.time.timekeeper import TimeKeeper
from service.bench.runner import fresh
from service.bench.table import Table

__all__ = ["Variant", "lateness_table"]

CHUNK = 4096  # as scemon replay feeds the engine


@dataclass(frozen=True)
class Variant:
    name: str
    keeper: bool  # through a TimeKeeper (else the bare engine)
    lateness: float
    shuffled: bool


@dataclass
class Run:
    seconds: float
    cpu: float
    matches: int
    late: int
    held_max: int


def disordered(events: Sequence[Event], disorder: float, seed: int = 7) -> list[Event]:
    """The events in order of ``end + delay``, each delay uniform in ``[0, disorder]``:
    every event arrives at most ``disorder`` seconds of event time late."""
    rng = random.Random(seed)
    return sorted(events, key=lambda e: e.end + rng.uniform(0.0, disorder))


def _run(queries: Sequence[tuple[str, str]], events: list[Event], v: Variant) -> Run:
    engine = Engine()
    for name, text in queries:
        engine.register(name, text)
    matches = late = held_max = 0
    began, began_cpu = time.perf_counter(), time.process_time()
    if v.keeper:
        keeper = TimeKeeper(engine, v.lateness, max_ahead=math.inf)
        for k in range(0, len(events), CHUNK):
            found, stragglers = keeper.process(events[k : k + CHUNK])
            matches += len(found)
            late += len(stragglers)
            held_max = max(held_max, keeper.held)
        matches += len(keeper.advance_time(math.inf))
    else:
        for k in range(0, len(events), CHUNK):
            matches += len(engine.process(events[k : k + CHUNK]))
        matches += len(engine.advance_time(math.inf))
    return Run(time.perf_counter() - began, time.process_time() - began_cpu, matches, late, held_max)


def lateness_table(
    n_events: int = 100_000,
    n_queries: int = 1000,
    disorder: float = 60.0,
    rounds: int = 5,
    progress: Callable[[float], None] | None = None,
) -> Table:
    """Events/s, matches, late events and the largest buffer of each variant."""
    w = wl.Workload(n_queries=n_queries)
    queries = wl.sequence_queries(w)
    in_order = list(wl.events(w, n_events))
    late_stream = disordered(in_order, disorder)
    variants = [
        Variant("engine alone (before)", False, 0.0, False),
        Variant("time keeper, L = 0", True, 0.0, False),
        Variant(f"time keeper, L = {disorder:g} s", True, disorder, False),
        Variant(f"time keeper, L = {10 * disorder:g} s", True, 10 * disorder, False),
        Variant("engine alone (before)", False, 0.0, True),
        Variant("time keeper, L = 0", True, 0.0, True),
        Variant(f"time keeper, L = {disorder:g} s", True, disorder, True),
    ]
    runs: dict[int, list[Run]] = {i: [] for i in range(len(variants))}
    total = rounds * len(variants)
    for r in range(rounds):
        for i, v in enumerate(variants):
            runs[i].append(_run(queries, fresh(late_stream if v.shuffled else in_order), v))
            if progress is not None:
                progress((r * len(variants) + i + 1) / total)
    table = Table(
        name="lateness",
        title="Event time: the bare engine and the time keeper, in order and late",
        columns=[
            "variant",
            "stream",
            "lateness_s",
            "events_per_s",
            "events_per_cpu_s",
            "matches",
            "late",
            "held_max",
        ],
        notes=[
            f"{n_events:,} events of the paper's sequence workload ({n_queries:,} queries, "
            f"{w.n_sources:,} sources, one event per {w.source_gap / w.n_sources:g} s), chunks of {CHUNK}; "
            f"'late' stream: each event delayed by up to {disorder:g} s of event time; "
            f"median of {rounds} interleaved rounds",
        ],
    )
    for i, v in enumerate(variants):
        done = runs[i]
        table.add(
            variant=v.name,
            stream=f"late by <= {disorder:g} s" if v.shuffled else "in order",
            lateness_s=v.lateness,
            events_per_s=round(n_events / statistics.median(x.seconds for x in done)),
            events_per_cpu_s=round(n_events / statistics.median(x.cpu for x in done)),
            matches=done[0].matches,
            late=done[0].late,
            held_max=max(x.held_max for x in done),
        )
    return table
