"""The credit-card workload from 1,000 to 100,000 queries (``card_scale``, a table of
``scemon bench queries``): events/s, matches/s, registration time and memory of the
shared engine, beside the separate-processing (SP) baseline where SP fits in memory.

Each point (one engine at one number of queries) runs in a fresh child process of its
own, so that the memory it reports is its own: the child's peak resident set over the
run (VmHWM, reset just before it) less its resident set just before the workload is
made: the events, the engine with its registered queries and what it stores. Points run one after
another (not interleaved as :func:`service.bench.runner.measure` interleaves engines), so
their times are CPU seconds (``time.process_time``), which a busy machine's waits for a
core do not inflate.
SP is not run above ``sp_max`` queries: its stores grow linearly with the queries (a copy
of every instance per plan), and the table says so, with its memory at ``sp_max``
scaled up as the estimate.
"""

from __future__ import annotations

import gc
import multiprocessing
import resource
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace

from service.bench.card import card_setting
from service.bench.figures import Scale
from service.bench.runner import SEPARATE, SHARED, Progress, Setting, Variant, measure
from service.bench.table import Plot, Table

__all__ = ["Point", "card_scale", "run_point"]

# The paper's two example queries come before the generated ones (service/bench/card.py).
_PAPER = 2


@dataclass(frozen=True)
class Point:
    """One engine's run at one number of queries (measured events only, but memory and
    registration over the whole run)."""

    engine: str
    queries: int
    register_seconds: float
    events: int
    seconds: float
    matches: int
    stored: float
    peak_bytes: int
    # CPU seconds of the same (time.process_time): what the engine cost on a busy machine.
    register_cpu_seconds: float = 0.0
    cpu_seconds: float = 0.0

    @property
    def events_per_s(self) -> float:
        """Events per CPU second."""
        return self.events / self.cpu_seconds if self.cpu_seconds else 0.0

    @property
    def matches_per_s(self) -> float:
        """Matches per CPU second."""
        return self.matches / self.cpu_seconds if self.cpu_seconds else 0.0

    @property
    def unit_us(self) -> float:
        """CPU µs per event."""
        return self.cpu_seconds / self.events * 1e6 if self.events else 0.0


def _peak_bytes() -> int:
    """The process's peak resident set: since :func:`_reset_peak` where Linux has it
    (VmHWM), else over the process's life (ru_maxrss, KiB on Linux)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _resident_bytes() -> int:
    """The process's resident set now (Linux: /proc/self/statm), else its peak so far."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * resource.getpagesize()
    except (OSError, IndexError, ValueError):
        return _peak_bytes()


def _reset_peak() -> None:
    """Start the peak resident set afresh from now (Linux ≥ 4.0: 5 into clear_refs), so
    that what the imports held and freed is not taken for the run's."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass


def run_point(setting: Setting, variant: Variant) -> Point:
    """``variant`` alone over ``setting`` (in this process: call it in a fresh one)."""
    gc.collect()
    _reset_peak()
    before = _resident_bytes()
    (res,) = measure(setting, [variant])
    assert variant.queries is not None
    return Point(
        engine=variant.engine,
        queries=variant.queries,
        register_seconds=res.register_seconds,
        events=res.events,
        seconds=res.seconds,
        matches=res.matches,
        stored=res.stored_avg,
        peak_bytes=max(0, _peak_bytes() - before),
        register_cpu_seconds=res.register_cpu_seconds,
        cpu_seconds=res.cpu_seconds,
    )


def _in_child(setting: Setting, variant: Variant) -> Point:
    """:func:`run_point` in a fresh process (spawned: nothing of this one's memory)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(run_point, setting, variant).result()


def card_scale(scale: Scale, progress: Progress | None = None, max_queries: int | None = None) -> Table:
    """The ``card_scale`` table: one row per size of ``scale.scale_queries`` (generated
    queries, the paper's two added) up to ``max_queries``, the shared engine at each and
    SP up to ``scale.scale_sp_max``."""
    setting = card_setting(scale, events=scale.scale_events)
    sizes = [_PAPER + n for n in scale.scale_queries if max_queries is None or _PAPER + n <= max_queries]
    runs: list[tuple[int, Variant]] = []
    for n in sizes:
        runs.append((n, replace(SHARED, queries=n)))
        if n <= _PAPER + scale.scale_sp_max:
            runs.append((n, replace(SEPARATE, queries=n)))
    points: dict[tuple[str, int], Point] = {}
    for done, (n, variant) in enumerate(runs):
        if progress is not None:
            progress(done / len(runs), variant.label)
        # The workload made for this size alone (its queries, its stream): a point's
        # memory holds no query texts of the larger sizes.
        sized = replace(setting, workload=replace(setting.workload, n_queries=n - _PAPER))
        points[variant.engine, n] = _in_child(sized, variant)
    if progress is not None:
        progress(1.0, "done")
    return _table(setting, scale, sizes, points)


COLUMNS = [
    "queries",
    "shared_register_cpu_s",
    "shared_events_per_s",
    "shared_matches_per_s",
    "matches_per_event",
    "shared_cpu_us",
    "separate_cpu_us",
    "ratio",
    "shared_peak_mb",
    "separate_peak_mb",
    "shared_stored",
    "separate_stored",
]


def _table(
    setting: Setting, scale: Scale, sizes: Sequence[int], points: dict[tuple[str, int], Point]
) -> Table:
    table = Table(
        "card_scale",
        "Credit-card workload at scale",
        COLUMNS,
        plot=Plot(
            "queries",
            ("shared_cpu_us", "separate_cpu_us"),
            "unit processing time (CPU µs/event)",
            "queries",
            x_log=True,
            y_log=True,
        ),
    )
    mb = 1 / (1 << 20)
    for n in sizes:
        shared = points["shared", n]
        separate = points.get(("separate", n))
        table.add(
            queries=n,
            shared_register_cpu_s=round(shared.register_cpu_seconds, 2),
            shared_events_per_s=round(shared.events_per_s),
            shared_matches_per_s=round(shared.matches_per_s),
            matches_per_event=round(shared.matches / shared.events, 3) if shared.events else 0.0,
            shared_cpu_us=round(shared.unit_us, 2),
            separate_cpu_us="-" if separate is None else round(separate.unit_us, 2),
            ratio="-" if separate is None else round(separate.unit_us / shared.unit_us, 2),
            shared_peak_mb=round(shared.peak_bytes * mb, 1),
            separate_peak_mb="-" if separate is None else round(separate.peak_bytes * mb, 1),
            shared_stored=round(shared.stored),
            separate_stored="-" if separate is None else round(separate.stored),
        )
    w = setting.workload
    table.notes = [
        "the credit-card workload (make demo's; ecq.evaluation.workload.credit_card_workload): "
        f"{w.n_sources} card holders, one payment every {w.source_gap:g} s each, {w.n_classes} merchant "
        "classes; the paper's 2 queries and the generated ones (2/3 sequences, 1/3 conjunctions)",
        f"{setting.events} events measured after {setting.warmup_events} of warm-up; cleaning every "
        f"{setting.clean_every} events; each engine and size in a fresh process of its own, one after another, "
        "on the stream made with that size's queries",
        "times in the process's CPU seconds (time.process_time), not wall: the points run one after "
        "another, not interleaved, so a busy machine's waits for a core would land on some and not others",
        "register_cpu_s: registering the queries (parse, compile, install); peak_mb: the process's peak "
        "resident set less what it held before the run (events, engine, queries, stored instances)",
    ]
    sp_sizes = [n for n in sizes if ("separate", n) in points]
    skipped = [n for n in sizes if ("separate", n) not in points]
    if skipped:
        note = f"SP not run above {_PAPER + scale.scale_sp_max:,} queries ({', '.join(f'{n:,}' for n in skipped)})"
        if sp_sizes:
            last = points["separate", sp_sizes[-1]]
            per_query = last.peak_bytes / last.queries
            estimate = ", ".join(f"~{per_query * n / (1 << 30):.1f} GB at {n:,}" for n in skipped)
            note += (
                f": its memory grows linearly with the queries ({last.peak_bytes * mb:,.0f} MB at "
                f"{last.queries:,}; {estimate}, scaled)"
            )
        table.notes.append(note)
    return table
