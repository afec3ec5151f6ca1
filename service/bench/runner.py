"""Measuring engines the way the SCEMon paper does (§7), several engines side by side.

One :func:`measure` call runs every engine of a list (the shared network at some
ablation level, the separate-processing baseline) over the same workload **in one
process, interleaved**: the stream is cut into chunks and each chunk goes to every
engine in turn, in a rotating order, so a slow moment of a shared machine hits all of
them alike and their ratio holds even when absolute times wander.

Metrics (paper §7):

- **unit processing time**: seconds spent in ``process`` and in cleaning, per event, in
  µs, over the events after warm-up. Output delivery is not included: the matches are
  counted and dropped (the engine still builds each ``Match``).
- **stored instances**: counted just before and just after each cleaning after
  warm-up, averaged over those counts (the paper's average over 15 cleanings).

Cleaning is driven from here (every ``clean_every`` events, at the same stream positions
for every engine) and timed separately as well. The cyclic garbage collector is off
while timing, as :mod:`timeit` does, and young objects are collected at each cleaning,
untimed: a collection triggered by one engine's garbage would otherwise be billed to
whichever engine happened to run next.

Pure: no I/O; the CLI prints and plots what this returns.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ecq.engine import Engine
from ecq.evaluation.baseline import PHASES, SeparateEngine
from ecq.evaluation.workload import Workload, credit_card_workload, events, template_queries
from ecq.event import AttrValue, Event
from ecq.network import LEVELS

__all__ = [
    "CARD_TEMPLATES",
    "ENGINES",
    "LEVELS",
    "PHASES",
    "Measurement",
    "Progress",
    "Setting",
    "Variant",
    "extrapolate",
    "fresh",
    "make_engine",
    "measure",
    "phase_timers",
    "stored",
    "workload_of",
]

ENGINES = ("shared", "separate")
# The credit-card workload of ``make demo`` (``ecq.evaluation.workload.credit_card_workload``): all
# its queries, its sequences only, its conjunctions only.
CARD_TEMPLATES = {"card": "", "card-seq": "PATTERN Sequence", "card-cnj": "PATTERN Conjunction"}
# An engine's own cleaning never runs during a measurement: the runner cleans.
_NEVER = 1 << 62

AnyEngine = Engine | SeparateEngine
# Called with (fraction of the measurement done, what is running).
Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class Variant:
    """One engine of a measurement: ``shared`` (the ECQ network, at an ablation
    ``level``, default the full engine) or ``separate`` (the SP baseline); ``profile``
    turns the per-phase timers on (they cost a little time themselves); ``queries``
    registers only the first that many of the setting's queries (query sets of the
    workload are prefixes of each other, so several sizes can share one stream);
    ``sample`` registers only that many of those, drawn at random (seeded by
    ``queries``): the SP baseline's measurement at sizes too slow to run whole, from
    which :func:`extrapolate` estimates the whole."""

    engine: str = "shared"
    level: str | None = None
    profile: bool = False
    queries: int | None = None
    sample: int | None = None
    # The shared engine on its pure-Python code only (False), else compiled when built.
    compiled: bool | None = None
    # Clauses appended to every query's text: a selection or consumption policy
    # (docs/semantics.md §11-§12), e.g. "CONSUME EXCLUSIVE"; "" none.
    policy: str = ""

    @property
    def label(self) -> str:
        label = self.engine
        if self.engine == "shared" and self.level is not None:
            label += f":{self.level}"
        if self.engine == "shared" and self.compiled is False:
            label += ":python"
        if self.queries is not None:
            label += f"@{self.queries}"
        if self.sample is not None:
            label += f"~{self.sample}"
        if self.policy:
            label += f"+{self.policy}"
        return label


SHARED = Variant("shared")
SEPARATE = Variant("separate")


@dataclass(frozen=True)
class Setting:
    """What one measurement runs: a workload and a query template (one of
    ``ecq.evaluation.workload.TEMPLATES``, or of :data:`CARD_TEMPLATES`: the credit-card workload
    with ``n_sources`` card holders, ``n_classes`` merchant classes, ``n_queries``
    generated queries after the paper's two and a payment every ``source_gap`` seconds
    per holder), the cleaning period, and how many events warm the engines up (default:
    one longest window of the stream, after which storage is steady) and are then
    measured."""

    workload: Workload = field(default_factory=Workload)
    template: str = "seq"
    clean_every: int = 5000
    events: int = 20_000
    warmup: int | None = None
    chunk: int = 1000

    @property
    def warmup_events(self) -> int:
        return self.workload.window_events if self.warmup is None else self.warmup


@dataclass
class Measurement:
    """One engine's numbers over the measured (post-warm-up) events."""

    variant: Variant
    events: int = 0
    seconds: float = 0.0
    clean_seconds: float = 0.0
    matches: int = 0
    stored_samples: list[int] = field(default_factory=list)
    # Seconds per phase (profiled variants only), measured events only.
    timers: dict[str, float] = field(default_factory=dict)
    # Not run whole: estimated from a run of this many of its queries (extrapolate).
    estimated_from: int | None = None
    # Seconds to register the engine's queries (before any event).
    register_seconds: float = 0.0
    # The same two times in this process's CPU seconds (time.process_time): on a machine
    # shared with other work they show what the engine cost, where wall time also holds
    # the waits for a core.
    cpu_seconds: float = 0.0
    register_cpu_seconds: float = 0.0

    @property
    def label(self) -> str:
        return self.variant.label

    @property
    def unit_us(self) -> float:
        """Unit processing time: µs per event, cleaning included."""
        return self.seconds / self.events * 1e6 if self.events else 0.0

    @property
    def clean_us(self) -> float:
        """Cleaning time per event, µs."""
        return self.clean_seconds / self.events * 1e6 if self.events else 0.0

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0

    @property
    def matches_per_s(self) -> float:
        return self.matches / self.seconds if self.seconds else 0.0

    @property
    def matches_per_event(self) -> float:
        return self.matches / self.events if self.events else 0.0

    @property
    def stored_avg(self) -> float:
        """Stored instances averaged over the counts before and after each cleaning."""
        return sum(self.stored_samples) / len(self.stored_samples) if self.stored_samples else 0.0

    @property
    def cleanings(self) -> int:
        return len(self.stored_samples) // 2

    def phase_us(self, phase: str) -> float:
        """µs per event spent in one phase (profiled variants)."""
        return self.timers.get(phase, 0.0) / self.events * 1e6 if self.events else 0.0


# ------------------------------------------------------------------ engines


def make_engine(variant: Variant) -> AnyEngine:
    """A fresh engine for ``variant``; the one place that knows the engines' options."""
    if variant.engine == "shared":
        level = variant.level if variant.level is not None else "summary"
        return Engine(clean_every=_NEVER, level=level, profile=variant.profile, compiled=variant.compiled)
    if variant.engine == "separate":
        return SeparateEngine(clean_every=_NEVER, profile=variant.profile)
    raise ValueError(f"unknown engine {variant.engine!r} (expected one of {', '.join(ENGINES)})")


def phase_timers(engine: AnyEngine) -> dict[str, float] | None:
    """The engine's per-phase seconds (keys :data:`PHASES`), or None when not profiling."""
    if isinstance(engine, SeparateEngine):
        return engine.timers if engine.profile else None
    return engine.network.timers


def stored(engine: AnyEngine) -> int:
    """Instances the engine stores now (every copy, for the baseline). O(classes) or O(1)."""
    if isinstance(engine, SeparateEngine):
        return engine.stored()
    return engine.network.stored()


def fresh(events: Sequence[Event]) -> list[Event]:
    """Copies of ``events``: the engine and the time keeper keep the objects they are
    given (arrival, moment, PMB), so a stream fed twice is copied each time."""
    return [Event(e.src, e.type, e.start, e.end, e.attrs, e.prob, e.id) for e in events]


# ---------------------------------------------------------------- measuring


def _boundaries(total: int, chunk: int, marks: Sequence[int]) -> list[int]:
    """Chunk ends: every ``chunk`` events, and at every mark (warm-up end, cleanings)."""
    ends = set(range(chunk, total, chunk)) | {m for m in marks if 0 < m < total}
    ends.add(total)
    return sorted(ends)


def _chosen(queries: list[tuple[str, str]], sample: int | None) -> list[tuple[str, str]]:
    """``sample`` of ``queries`` at random, in their order (all when None or not fewer)."""
    if sample is None or sample >= len(queries):
        return queries
    picked = sorted(random.Random(len(queries)).sample(range(len(queries)), sample))
    return [queries[i] for i in picked]


def extrapolate(sampled: Measurement, empty: Measurement) -> Measurement:
    """The SP baseline's measurement at ``sampled.variant.queries`` queries, estimated
    from a run of ``sampled.variant.sample`` of them and a run of none.

    Why it holds: SP gives every query its own plan and its own store, so its time per
    event is what it costs with no query at all (the event loop, the query index) plus
    each query's own cost, and its matches and stored copies are each query's own; a
    random sample's costs, less the empty run's, scaled by queries/sample, estimate
    the whole (the per-query parts of time, matches and storage). Not for the shared
    engine, whose queries share work."""
    variant = sampled.variant
    if variant.engine != "separate" or variant.sample is None or variant.queries is None:
        raise ValueError(f"{variant.label} is not a sampled SP measurement")
    if empty.variant.queries != 0 or empty.events != sampled.events:
        raise ValueError(f"{empty.label} is not an SP run without queries over the same events")
    scale = variant.queries / variant.sample
    stored_avg = empty.stored_avg + scale * (sampled.stored_avg - empty.stored_avg)
    return Measurement(
        replace(variant, sample=None),
        events=sampled.events,
        seconds=empty.seconds + scale * (sampled.seconds - empty.seconds),
        clean_seconds=empty.clean_seconds + scale * (sampled.clean_seconds - empty.clean_seconds),
        matches=round(scale * sampled.matches),
        stored_samples=[round(stored_avg)],
        estimated_from=variant.sample,
    )


# An event as every engine gets its own copy of it: (src, type, start, end, attrs).
Row = tuple[int | str, str, float, float, dict[str, AttrValue] | None]


def workload_of(setting: Setting, total: int) -> tuple[list[tuple[str, str]], list[Row]]:
    """``setting``'s queries (name, text) and its first ``total`` events."""
    w = setting.workload
    prefix = CARD_TEMPLATES.get(setting.template)
    if prefix is None:
        queries = template_queries(w, setting.template)
        made = events(w, total)
    else:
        queries, made = credit_card_workload(
            n_cards=w.n_sources,
            n_classes=w.n_classes,
            n_queries=w.n_queries,
            n_events=total,
            purchase_gap=w.source_gap,
            seed=w.seed,
        )
        queries = [(name, text) for name, text in queries if text.startswith(prefix)]
    return queries, [(e.src, e.type, e.start, e.end, e.attrs or None) for e in made]


def measure(
    setting: Setting, variants: Sequence[Variant], progress: Progress | None = None
) -> list[Measurement]:
    """Run every variant over ``setting``'s workload, interleaved chunk by chunk;
    one :class:`Measurement` per variant, in order. Time: the sum of the engines'
    processing time, plus building each engine's own copy of the events."""
    warm = setting.warmup_events
    total = warm + setting.events
    queries, stream = workload_of(setting, total)
    engines = [make_engine(v) for v in variants]
    results = [Measurement(v) for v in variants]
    for engine, variant, res in zip(engines, variants, results, strict=True):
        began, began_cpu = time.perf_counter(), time.process_time()
        for name, text in _chosen(queries[: variant.queries], variant.sample):
            engine.register(name, f"{text} {variant.policy}" if variant.policy else text)
        res.register_seconds = time.perf_counter() - began
        res.register_cpu_seconds = time.process_time() - began_cpu
    every = setting.clean_every
    ends = _boundaries(total, setting.chunk, [warm, *range(every, total, every)])
    now, cpu = time.perf_counter, time.process_time
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        begin = 0
        for step, end in enumerate(ends):
            measured = begin >= warm
            n = len(engines)
            for turn in range(n):
                i = (step + turn) % n
                engine = engines[i]
                batch = [
                    Event(s, c, t0, t1, attrs, id=k)
                    for k, (s, c, t0, t1, attrs) in enumerate(stream[begin:end], begin)
                ]
                began, began_cpu = now(), cpu()
                out = engine.process(batch)
                spent, spent_cpu = now() - began, cpu() - began_cpu
                if measured:
                    res = results[i]
                    res.seconds += spent
                    res.cpu_seconds += spent_cpu
                    res.events += end - begin
                    res.matches += len(out)
                del out, batch
            if end % every == 0:
                for turn in range(n):
                    i = (step + turn) % n
                    engine = engines[i]
                    before = stored(engine)
                    began, began_cpu = now(), cpu()
                    engine.clean()
                    spent, spent_cpu = now() - began, cpu() - began_cpu
                    if end > warm:
                        res = results[i]
                        res.seconds += spent
                        res.cpu_seconds += spent_cpu
                        res.clean_seconds += spent
                        res.stored_samples += [before, stored(engine)]
                gc.collect(0)
            if end == warm:
                for engine in engines:
                    timers = phase_timers(engine)
                    if timers is not None:
                        for key in timers:
                            timers[key] = 0.0
            begin = end
            if progress is not None:
                progress(end / total, ", ".join(v.label for v in variants))
    finally:
        if was_enabled:
            gc.enable()
    for engine, res in zip(engines, results, strict=True):
        if not res.stored_samples:
            res.stored_samples.append(stored(engine))  # no cleaning after warm-up
        timers = phase_timers(engine)
        if timers is not None:
            res.timers = dict(timers)
    return results
