"""The SCEMon paper's evaluation (§7), one function per figure, each returning tables.

Every function runs the shared engine and the separate-processing (SP) baseline side by
side (:func:`service.bench.runner.measure`); where a sweep keeps the stream fixed (number of
queries) all its points run in one interleaved measurement, so they are compared under
the same machine conditions. :class:`Scale` holds the sizes: the paper's (``FULL``) or a
few seconds' worth (``QUICK``).

| function | paper | what varies |
|---|---|---|
| :func:`cleaning` | Fig. 7 | cleaning period ``Nc`` |
| :func:`queries` | Fig. 8a | number of queries ``Nq`` (100-5K) |
| :func:`sources` | Fig. 8b | number of sources ``Ns`` (up to 5K) |
| :func:`breakdown` | Fig. 9 | phases, per ablation level |
| :func:`storage` | Fig. 10 | stored instances vs ``Nq`` and ``Ns`` |
| :func:`classes` | Fig. 11 | classes ``Npc`` (10-200) and steps ``Nstep`` |
| :func:`conjunction` | Fig. 12, 13 | CNJ3: time and storage vs ``Nq``, ``Ns`` |
| :func:`disjunction` | Fig. 14 | DSJ3, DSJ5: time vs ``Nq``, ``Ns`` |
| :func:`rate` | - | the event rate (seconds between a source's events) |
| :func:`targets` | - | the targets: SP/shared ratio, events/s, scaling |
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from ecq.evaluation.workload import FAMILIES, Workload
from ecq.network import LEVELS
from service.bench.runner import PHASES, SEPARATE, SHARED, Measurement, Progress, Setting, Variant, measure
from service.bench.table import Plot, Table

__all__ = [
    "FULL",
    "QUICK",
    "Scale",
    "Steps",
    "notes_of",
    "pair_columns",
    "pair_row",
    "time_table",
    "breakdown",
    "classes",
    "cleaning",
    "conjunction",
    "disjunction",
    "queries",
    "rate",
    "sized",
    "sources",
    "storage",
    "targets",
]


@dataclass(frozen=True)
class Scale:
    """The sizes of every sweep. ``base`` is the default setting (the paper's: 1K
    queries, 1K sources, 50 classes, 3 steps); ``events`` are measured after one window
    of warm-up; ``clean_every`` is the cleaning period of every figure but Fig. 7."""

    base: Workload = field(default_factory=Workload)
    events: int = 30_000
    # Fig. 7's knee: the SP scheme's cleaning time levels off around here while its
    # storage starts to grow linearly (the paper's 100K, for its event rate); about one
    # window of the default stream.
    clean_every: int = 10_000
    warmup: int | None = None
    queries: tuple[int, ...] = (100, 500, 1000, 2000, 5000)
    sources: tuple[int, ...] = (100, 200, 500, 1000, 2000, 5000)
    periods: tuple[int, ...] = (1000, 2000, 5000, 10_000, 20_000, 50_000)
    classes: tuple[int, ...] = (10, 20, 50, 100, 200)
    steps: tuple[int, ...] = (2, 3, 4, 5)
    cnj_queries: tuple[int, ...] = (100, 500, 1000, 2000)
    cnj_sources: tuple[int, ...] = (100, 500, 1000, 2000)
    cnj_events: int = 5000
    dsj_queries: tuple[int, ...] = (100, 500, 1000, 2000, 5000)
    dsj_sources: tuple[int, ...] = (100, 500, 1000, 2000, 5000)
    dsj_events: int = 3000
    target_queries: tuple[int, int, int] = (100, 1000, 5000)
    # The targets' measurement is longer than a figure's point: the ratio of two unit
    # times needs both within a few percent, and 30,000 events at 100 queries are
    # 75 ms of engine time, which a noisy neighbour moves by 5%.
    target_events: int = 100_000
    gaps: tuple[float, ...] = (300.0, 600.0, 1200.0, 2400.0, 3600.0)
    gap_events: int = 10_000
    # The credit-card workload (``make demo``'s, service/bench/card.py): 1,000 holders
    # paying every 30 minutes at 50 merchant classes, windows up to 5 hours; generated
    # queries per point (the paper's two come first).
    card: Workload = field(
        default_factory=lambda: Workload(
            n_queries=1000,
            n_sources=1000,
            n_classes=50,
            window_min=3600.0,
            window_max=5 * 3600.0,
            source_gap=1800.0,
        )
    )
    card_queries: tuple[int, ...] = (100, 500, 1000)
    card_events: int = 20_000
    # The credit-card workload at scale (service/bench/scale.py, `scemon bench queries`):
    # generated queries per point, events measured, and the largest SP runs (above it
    # SP's stores do not fit in this machine's memory).
    scale_queries: tuple[int, ...] = (1000, 10_000, 100_000)
    scale_events: int = 10_000
    scale_sp_max: int = 10_000
    # The conditions sweep and the operator families (service/bench/operators.py).
    cond_queries: tuple[int, ...] = (100, 1000, 2000, 5000, 10_000)
    cond_predicates: tuple[int, ...] = (0, 1, 3)
    cond_events: int = 20_000
    op_queries: tuple[int, ...] = (100, 1000, 5000)
    op_events: int = 5000
    # SP above this many queries runs on a sample of them (service/bench/operators.py).
    sp_sample: int = 1000
    families: tuple[str, ...] = tuple(FAMILIES)
    # The policy axis of the operator families (service/bench/operators.py
    # POLICY_CLAUSES): none unless asked for (``scemon bench operators --policy``).
    policies: tuple[str, ...] = ()

    def setting(self, template: str = "seq", **changes: int) -> Setting:
        """The default setting with workload fields changed (``n_queries=...``)."""
        events = self.cnj_events if template.startswith("cnj") else self.events
        if template.startswith("dsj"):
            # Nothing is stored: a short warm-up is enough.
            return Setting(replace(self.base, **changes), template, self.clean_every, self.dsj_events, 1000)
        return Setting(replace(self.base, **changes), template, self.clean_every, events, self.warmup)


FULL = Scale()
QUICK = Scale(
    base=Workload(n_queries=100, n_sources=50),
    events=1200,
    clean_every=400,
    queries=(20, 50, 100),
    sources=(20, 50, 100),
    periods=(200, 400, 800),
    classes=(10, 20, 50),
    steps=(2, 3, 4),
    cnj_queries=(20, 50),
    cnj_sources=(20, 50),
    cnj_events=600,
    dsj_queries=(20, 50),
    dsj_sources=(20, 50),
    dsj_events=400,
    target_queries=(20, 50, 100),
    target_events=1200,
    gaps=(600.0, 1200.0, 2400.0),
    gap_events=600,
    card=Workload(
        n_queries=100, n_sources=50, n_classes=50, window_min=3600.0, window_max=5 * 3600.0, source_gap=1800.0
    ),
    card_queries=(20, 50, 100),
    card_events=600,
    scale_queries=(20, 100),
    scale_events=400,
    scale_sp_max=20,
    cond_queries=(20, 50, 100),
    cond_events=600,
    op_queries=(20, 50, 100),
    op_events=400,
    sp_sample=50,
)


def sized(
    quick: bool, events: int | None = None, clean_every: int | None = None, source_gap: float | None = None
) -> Scale:
    """The sizes of a run: ``QUICK`` or ``FULL``, with the events measured per point,
    the cleaning period and the workload's mean gap between a source's events overridden
    when given."""
    scale = QUICK if quick else FULL
    if events is not None:
        scale = replace(
            scale,
            events=events,
            cnj_events=events,
            dsj_events=events,
            target_events=events,
            card_events=events,
            scale_events=events,
            cond_events=events,
            op_events=events,
        )
    if clean_every is not None:
        scale = replace(scale, clean_every=clean_every)
    if source_gap is not None:
        scale = replace(scale, base=replace(scale.base, source_gap=source_gap))
    return scale


class Steps:
    """Maps the progress of one measurement among ``total`` onto the whole figure."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress = progress
        self.total = total
        self.done = 0

    def __call__(self, fraction: float, label: str) -> None:
        if self.progress is not None:
            self.progress((self.done + fraction) / self.total, label)

    def run(self, setting: Setting, variants: Sequence[Variant]) -> list[Measurement]:
        out = measure(setting, variants, self)
        self.done += 1
        return out


def notes_of(scale: Scale, setting: Setting, paper: str, period: str | None = None) -> list[str]:
    w = setting.workload
    return [
        paper,
        f"template {setting.template}; defaults Nq={w.n_queries}, Ns={w.n_sources}, Npc={w.n_classes}, "
        f"Nstep={w.n_steps}; windows {w.window_min / 60:g}-{w.window_max / 60:g} min; one event per source "
        f"every {w.source_gap:g} s",
        f"{setting.events} events measured after {setting.warmup_events} of warm-up; cleaning "
        + (period or f"every {setting.clean_every} events"),
    ]


def pair_columns(param: str) -> list[str]:
    return [
        param,
        "shared_us",
        "separate_us",
        "ratio",
        "shared_events_per_s",
        "matches_per_event",
        "shared_stored",
        "separate_stored",
    ]


def pair_row(table: Table, param: str, value: int, shared: Measurement, separate: Measurement) -> None:
    table.add(
        **{
            param: value,
            "shared_us": round(shared.unit_us, 2),
            "separate_us": round(separate.unit_us, 2),
            "ratio": round(separate.unit_us / shared.unit_us, 2) if shared.unit_us else 0.0,
            "shared_events_per_s": round(shared.events_per_s),
            "matches_per_event": round(shared.matches_per_event, 3),
            "shared_stored": round(shared.stored_avg),
            "separate_stored": round(separate.stored_avg),
        }
    )


def time_table(name: str, title: str, param: str, label: str, log: bool = False) -> Table:
    return Table(
        name,
        title,
        pair_columns(param),
        plot=Plot(param, ("shared_us", "separate_us"), "unit processing time (µs/event)", label, x_log=log),
    )


def _storage_table(name: str, title: str, param: str, label: str, log: bool = False) -> Table:
    return Table(
        name,
        title,
        [param, "shared_stored", "separate_stored", "separate_per_shared"],
        plot=Plot(
            param, ("shared_stored", "separate_stored"), "stored instances", label, x_log=log, y_log=True
        ),
    )


def _storage_row(table: Table, param: str, value: int, shared: Measurement, separate: Measurement) -> None:
    table.add(
        **{
            param: value,
            "shared_stored": round(shared.stored_avg),
            "separate_stored": round(separate.stored_avg),
            "separate_per_shared": round(separate.stored_avg / shared.stored_avg, 1)
            if shared.stored_avg
            else 0.0,
        }
    )


def _by_queries(
    steps: Steps, setting: Setting, sizes: Sequence[int]
) -> list[tuple[int, Measurement, Measurement]]:
    """One interleaved measurement of every query count (prefixes of one query set)."""
    setting = replace(setting, workload=replace(setting.workload, n_queries=max(sizes)))
    variants = [v for n in sizes for v in (replace(SHARED, queries=n), replace(SEPARATE, queries=n))]
    out = steps.run(setting, variants)
    return [(n, out[2 * i], out[2 * i + 1]) for i, n in enumerate(sizes)]


def _each(
    steps: Steps, sizes: Sequence[int], make: Callable[[int], Setting]
) -> list[tuple[int, Measurement, Measurement]]:
    """One measurement per size (the stream changes with it)."""
    out = []
    for n in sizes:
        shared, separate = steps.run(make(n), [SHARED, SEPARATE])
        out.append((n, shared, separate))
    return out


def _with_sources(scale: Scale, template: str, n: int) -> Setting:
    return scale.setting(template, n_sources=n)


# ------------------------------------------------------------------ figures


def cleaning(scale: Scale = FULL, progress: Progress | None = None) -> list[Table]:
    """Fig. 7: cleaning every ``Nc`` events: cleaning time per event and storage."""
    steps = Steps(progress, len(scale.periods))
    base = scale.setting()
    time_t = Table(
        "fig07a_cleaning_time",
        "Fig. 7a: cleaning time vs cleaning period",
        ["period", "shared_clean_us", "separate_clean_us", "shared_us", "separate_us"],
        plot=Plot(
            "period",
            ("shared_clean_us", "separate_clean_us"),
            "cleaning time (µs/event)",
            "cleaning period Nc (events)",
            x_log=True,
        ),
    )
    store_t = Table(
        "fig07b_cleaning_storage",
        "Fig. 7b: stored instances vs cleaning period",
        ["period", "shared_stored", "separate_stored"],
        plot=Plot(
            "period",
            ("shared_stored", "separate_stored"),
            "stored instances",
            "cleaning period Nc (events)",
            x_log=True,
            y_log=True,
        ),
    )
    for period in scale.periods:
        setting = replace(base, clean_every=period, events=max(base.events, 4 * period))
        shared, separate = steps.run(setting, [SHARED, SEPARATE])
        time_t.add(
            period=period,
            shared_clean_us=round(shared.clean_us, 3),
            separate_clean_us=round(separate.clean_us, 3),
            shared_us=round(shared.unit_us, 2),
            separate_us=round(separate.unit_us, 2),
        )
        store_t.add(
            period=period, shared_stored=round(shared.stored_avg), separate_stored=round(separate.stored_avg)
        )
    notes = notes_of(
        scale, base, "paper Fig. 7", f"every Nc events; at least 4 Nc measured (and {base.events} at least)"
    )
    time_t.notes = store_t.notes = notes
    return [time_t, store_t]


def queries(scale: Scale = FULL, progress: Progress | None = None) -> list[Table]:
    """Fig. 8a: unit time vs number of queries (all sizes interleaved, one stream)."""
    setting = scale.setting()
    table = time_table("fig08a_queries", "Fig. 8a: unit time vs queries", "queries", "queries Nq")
    for n, shared, separate in _by_queries(Steps(progress, 1), setting, scale.queries):
        pair_row(table, "queries", n, shared, separate)
    table.notes = notes_of(scale, setting, "paper Fig. 8a")
    return [table]


def sources(scale: Scale = FULL, progress: Progress | None = None) -> list[Table]:
    """Fig. 8b: unit time vs number of sources (log scale, as the paper)."""
    setting = scale.setting()
    table = time_table("fig08b_sources", "Fig. 8b: unit time vs sources", "sources", "sources Ns", log=True)
    steps = Steps(progress, len(scale.sources))
    for n, shared, separate in _each(steps, scale.sources, lambda n: scale.setting(n_sources=n)):
        pair_row(table, "sources", n, shared, separate)
    table.notes = notes_of(scale, setting, "paper Fig. 8b")
    return [table]


def breakdown(scale: Scale = FULL, progress: Progress | None = None) -> list[Table]:
    """Fig. 9: where the time goes, SP and each ablation level of the shared engine
    (profiled: the timers cost some time of their own; ``other`` is the rest: event
    stamping, emission, building matches)."""
    setting = scale.setting()
    variants = [replace(SEPARATE, profile=True)] + [Variant("shared", level, True) for level in LEVELS]
    results = Steps(progress, 1).run(setting, variants)
    columns = ["engine", *PHASES, "other", "total"]
    table = Table(
        "fig09_breakdown",
        "Fig. 9: unit time per phase",
        columns,
        plot=Plot("engine", (*PHASES, "other"), "unit processing time (µs/event)", "", kind="stacked"),
    )
    for res in results:
        phases = {p: round(res.phase_us(p), 2) for p in PHASES}
        table.add(
            engine=res.label,
            **phases,
            other=round(max(0.0, res.unit_us - sum(res.phase_us(p) for p in PHASES)), 2),
            total=round(res.unit_us, 2),
        )
    table.notes = notes_of(scale, setting, f"paper Fig. 9; shared levels: {', '.join(LEVELS)}")
    return [table]


def storage(scale: Scale = FULL, progress: Progress | None = None) -> list[Table]:
    """Fig. 10: stored instances vs queries (a) and sources (b)."""
    setting = scale.setting()
    steps = Steps(progress, 1 + len(scale.sources))
    by_q = _storage_table(
        "fig10a_storage_queries", "Fig. 10a: stored instances vs queries", "queries", "queries Nq"
    )
    for n, shared, separate in _by_queries(steps, setting, scale.queries):
        _storage_row(by_q, "queries", n, shared, separate)
    by_s = _storage_table(
        "fig10b_storage_sources", "Fig. 10b: stored instances vs sources", "sources", "sources Ns", log=True
    )
    for n, shared, separate in _each(steps, scale.sources, lambda n: scale.setting(n_sources=n)):
        _storage_row(by_s, "sources", n, shared, separate)
    by_q.notes = by_s.notes = notes_of(scale, setting, "paper Fig. 10")
    return [by_q, by_s]


def classes(scale: Scale = FULL, progress: Progress | None = None) -> list[Table]:
    """Fig. 11: unit time vs number of classes ``Npc`` (a) and sequence steps (b)."""
    setting = scale.setting()
    steps = Steps(progress, len(scale.classes) + len(scale.steps))
    by_c = time_table("fig11a_classes", "Fig. 11a: unit time vs classes", "classes", "classes Npc", log=True)
    for n, shared, separate in _each(steps, scale.classes, lambda n: scale.setting(n_classes=n)):
        pair_row(by_c, "classes", n, shared, separate)
    by_s = time_table(
        "fig11b_steps", "Fig. 11b: unit time vs sequence steps", "steps", "sequence steps Nstep"
    )
    for n, shared, separate in _each(steps, scale.steps, lambda n: scale.setting(n_steps=n)):
        pair_row(by_s, "steps", n, shared, separate)
    by_c.notes = by_s.notes = notes_of(scale, setting, "paper Fig. 11")
    return [by_c, by_s]


def conjunction(scale: Scale = FULL, progress: Progress | None = None) -> list[Table]:
    """Figs. 12 and 13: CNJ3 queries, unit time and stored instances vs queries and
    sources."""
    setting = scale.setting("cnj3")
    steps = Steps(progress, 1 + len(scale.cnj_sources))
    t_q = time_table("fig12a_cnj_queries", "Fig. 12a: CNJ3 unit time vs queries", "queries", "queries Nq")
    s_q = _storage_table(
        "fig13a_cnj_storage_queries", "Fig. 13a: CNJ3 stored vs queries", "queries", "queries Nq"
    )
    for n, shared, separate in _by_queries(steps, setting, scale.cnj_queries):
        pair_row(t_q, "queries", n, shared, separate)
        _storage_row(s_q, "queries", n, shared, separate)
    t_s = time_table(
        "fig12b_cnj_sources", "Fig. 12b: CNJ3 unit time vs sources", "sources", "sources Ns", True
    )
    s_s = _storage_table(
        "fig13b_cnj_storage_sources", "Fig. 13b: CNJ3 stored vs sources", "sources", "sources Ns", True
    )
    for n, shared, separate in _each(steps, scale.cnj_sources, lambda n: scale.setting("cnj3", n_sources=n)):
        pair_row(t_s, "sources", n, shared, separate)
        _storage_row(s_s, "sources", n, shared, separate)
    for t in (t_q, s_q, t_s, s_s):
        t.notes = notes_of(scale, setting, "paper Figs. 12 and 13")
    return [t_q, t_s, s_q, s_s]


def disjunction(scale: Scale = FULL, progress: Progress | None = None) -> list[Table]:
    """Fig. 14: DSJ3 and DSJ5 queries, unit time vs queries (a) and sources (b)."""
    templates = ("dsj3", "dsj5")
    steps = Steps(progress, len(templates) * (1 + len(scale.dsj_sources)))
    series = tuple(f"{t}_{e}_us" for t in templates for e in ("shared", "separate"))
    tables = []
    for param, sizes, log in (("queries", scale.dsj_queries, False), ("sources", scale.dsj_sources, True)):
        suffix = "a" if param == "queries" else "b"
        table = Table(
            f"fig14{suffix}_dsj_{param}",
            f"Fig. 14{suffix}: DSJ3/DSJ5 unit time vs {param}",
            [param, *series, "dsj5_matches_per_event"],
            plot=Plot(param, series, "unit processing time (µs/event)", f"{param} N{param[0]}", x_log=log),
        )
        cells: dict[int, dict[str, float]] = {n: {} for n in sizes}
        for template in templates:
            if param == "queries":
                rows = _by_queries(steps, scale.setting(template), sizes)
            else:
                rows = _each(steps, sizes, partial(_with_sources, scale, template))
            for n, shared, separate in rows:
                cells[n][f"{template}_shared_us"] = round(shared.unit_us, 2)
                cells[n][f"{template}_separate_us"] = round(separate.unit_us, 2)
                cells[n][f"{template}_matches_per_event"] = round(shared.matches_per_event, 2)
        for n in sizes:
            table.add(
                **{param: n},
                **{s: cells[n][s] for s in series},
                dsj5_matches_per_event=cells[n]["dsj5_matches_per_event"],
            )
        table.notes = notes_of(scale, scale.setting("dsj3"), "paper Fig. 14")
        tables.append(table)
    return tables


def targets(scale: Scale = FULL, progress: Progress | None = None) -> list[Table]:
    """The performance targets in one interleaved measurement: SP/shared ratio at the largest
    query count, the shared engine's events/s, unit time at the largest vs the
    smallest count, stored instances at the middle vs the largest count."""
    small, middle, large = scale.target_queries
    setting = replace(
        scale.setting(), events=scale.target_events, workload=replace(scale.base, n_queries=large)
    )
    variants = [
        replace(SHARED, queries=small),
        replace(SHARED, queries=middle),
        replace(SEPARATE, queries=middle),
        replace(SHARED, queries=large),
        replace(SEPARATE, queries=large),
        replace(SHARED, queries=middle, compiled=False),
        replace(SHARED, queries=large, compiled=False),
    ]
    steps = Steps(progress, 3)
    s_small, s_mid, p_mid, s_large, p_large, py_mid, py_large = steps.run(setting, variants)
    # The same engines alone in the measurement (nothing else's data in the caches
    # between chunks): the throughput a user running only this engine sees.
    (alone_mid,) = steps.run(setting, [replace(SHARED, queries=middle)])
    (alone_large,) = steps.run(setting, [replace(SHARED, queries=large)])
    table = Table("targets", "Targets", ["metric", "value", "target", "met"])

    def row(metric: str, value: float, target: str, met: bool) -> None:
        table.add(metric=metric, value=round(value, 2), target=target, met="yes" if met else "NO")

    ratio = p_large.unit_us / s_large.unit_us if s_large.unit_us else 0.0
    row(f"SP/shared unit time, {large} queries", ratio, ">= 32 (aim 50)", ratio >= 32)
    row(
        f"SP/shared unit time, {middle} queries",
        p_mid.unit_us / s_mid.unit_us if s_mid.unit_us else 0.0,
        "-",
        True,
    )
    row(f"shared events/s, {middle} queries", s_mid.events_per_s, ">= 150000", s_mid.events_per_s >= 150_000)
    row(
        f"shared events/s, {large} queries",
        s_large.events_per_s,
        ">= 100000",
        s_large.events_per_s >= 100_000,
    )
    growth = s_large.unit_us / s_small.unit_us if s_small.unit_us else 0.0
    row(f"unit time {large} / {small} queries", growth, "<= 3", growth <= 3)
    drift = (s_large.stored_avg / s_mid.stored_avg - 1) * 100 if s_mid.stored_avg else 0.0
    row(f"stored {large} vs {middle} queries, %", drift, "within ±5", abs(drift) <= 5)
    for res in (alone_mid, alone_large):
        row(f"shared events/s, {res.variant.queries} queries, measured alone", res.events_per_s, "-", True)
    # For comparison: the same engine on its pure-Python code (no compiled extension).
    for res in (py_mid, py_large):
        row(f"shared events/s, pure Python, {res.variant.queries} queries", res.events_per_s, "-", True)
    # The notes give the default workload (Nq the middle count), not the 5K one.
    notes_setting = replace(setting, workload=scale.base)
    table.notes = notes_of(scale, notes_setting, f"Targets; Nq = {small}, {middle}, {large}")
    return [table]


def rate(scale: Scale = FULL, progress: Progress | None = None) -> list[Table]:
    """How the event rate shapes the workload (not a figure of the paper, which does not
    give its rate): matches per event, unit times and storage as the mean gap between
    two events of one source varies (docs/benchmarks.md, "The event rate")."""
    steps = Steps(progress, len(scale.gaps))
    table = Table(
        "workload_rate",
        "Event rate: one event per source every gap seconds",
        ["gap", "matches_per_event", "shared_us", "separate_us", "ratio", "shared_stored", "separate_stored"],
        plot=Plot(
            "gap", ("shared_us", "separate_us"), "unit processing time (µs/event)", "gap (s)", x_log=True
        ),
    )
    base = scale.setting()
    for gap in scale.gaps:
        setting = replace(base, workload=replace(scale.base, source_gap=gap), events=scale.gap_events)
        shared, separate = steps.run(setting, [SHARED, SEPARATE])
        table.add(
            gap=int(gap),
            matches_per_event=round(shared.matches_per_event, 3),
            shared_us=round(shared.unit_us, 2),
            separate_us=round(separate.unit_us, 2),
            ratio=round(separate.unit_us / shared.unit_us, 2) if shared.unit_us else 0.0,
            shared_stored=round(shared.stored_avg),
            separate_stored=round(separate.stored_avg),
        )
    table.notes = notes_of(scale, replace(base, events=scale.gap_events), "workload event rate")[:2] + [
        f"{scale.gap_events} events measured after one window of warm-up (at each gap); cleaning every "
        f"{base.clean_every} events"
    ]
    return [table]
