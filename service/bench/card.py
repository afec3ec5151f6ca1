"""The credit-card workload of ``make demo`` (``ecq.evaluation.workload.credit_card_workload``), as
a figure of its own: the queries people write, sequences with payment bounds and
conjunctions, not the paper's bare templates.

- ``card_queries``: unit time vs the number of queries (the paper's two, then the
  generated ones: a prefix of one query set, one interleaved measurement), shared vs
  the separate-processing (SP) baseline;
- ``card_kinds``: at the full query set, its sequences only, its conjunctions only and
  all of them, shared vs SP: where the time goes by kind.

:func:`card_rows` adds the workload's target rows to ``scemon bench ratio``'s table.
"""

from __future__ import annotations

from dataclasses import replace

from service.bench.figures import FULL, Scale, Steps, pair_row, time_table
from service.bench.runner import SEPARATE, SHARED, Measurement, Progress, Setting, workload_of
from service.bench.table import Table

__all__ = ["CARD_TARGET", "card", "card_rows", "card_setting"]

# The events/s (processing time) the targets ask of the shared engine on the whole
# credit-card workload (the demo's 1,002 queries).
CARD_TARGET = 60_000
# The paper's two example queries come before the generated ones.
_PAPER = 2


def card_setting(scale: Scale, template: str = "card", events: int | None = None) -> Setting:
    """The credit-card workload at ``scale`` (``template``: ``card``, ``card-seq`` or
    ``card-cnj``, service.bench.runner.CARD_TEMPLATES)."""
    return Setting(
        scale.card, template, scale.clean_every, scale.card_events if events is None else events, scale.warmup
    )


def _notes(setting: Setting) -> list[str]:
    w = setting.workload
    return [
        "the credit-card workload (make demo's; ecq.evaluation.workload.credit_card_workload)",
        f"{w.n_sources} card holders, one payment every {w.source_gap:g} s each, {w.n_classes} merchant "
        f"classes; the paper's 2 queries and {w.n_queries} generated (2/3 sequences, 1/3 conjunctions, "
        "payment bounds on two components, windows 1-5 hours)",
        f"{setting.events} events measured after {setting.warmup_events} of warm-up; cleaning every "
        f"{setting.clean_every} events",
    ]


def card(scale: Scale = FULL, progress: Progress | None = None) -> list[Table]:
    """The credit-card workload: unit time vs queries, and by kind of query."""
    setting = card_setting(scale)
    steps = Steps(progress, 4)
    sizes = [_PAPER + n for n in scale.card_queries]
    variants = [replace(v, queries=n) for n in sizes for v in (SHARED, SEPARATE)]
    out = steps.run(setting, variants)
    by_q = time_table("card_queries", "Credit-card workload: unit time vs queries", "queries", "queries")
    for i, n in enumerate(sizes):
        pair_row(by_q, "queries", n, out[2 * i], out[2 * i + 1])
    kinds = Table(
        "card_kinds",
        "Credit-card workload by kind of query",
        [
            "kind",
            "queries",
            "shared_us",
            "separate_us",
            "ratio",
            "shared_events_per_s",
            "shared_matches_per_s",
            "matches_per_event",
        ],
    )
    for label, template in (("sequences", "card-seq"), ("conjunctions", "card-cnj"), ("all", "card")):
        shared, separate = steps.run(replace(setting, template=template), [SHARED, SEPARATE])
        _kind_row(kinds, label, _registered(setting, template), shared, separate)
    by_q.notes = kinds.notes = _notes(setting)
    return [by_q, kinds]


def _registered(setting: Setting, template: str) -> int:
    """How many queries ``template`` registers at ``setting`` (its kind's share)."""
    queries, _ = workload_of(replace(setting, template=template), 0)
    return len(queries)


def _kind_row(table: Table, kind: str, n: int, shared: Measurement, separate: Measurement) -> None:
    table.add(
        kind=kind,
        queries=n,
        shared_us=round(shared.unit_us, 2),
        separate_us=round(separate.unit_us, 2),
        ratio=round(separate.unit_us / shared.unit_us, 2) if shared.unit_us else 0.0,
        shared_events_per_s=round(shared.events_per_s),
        shared_matches_per_s=round(shared.matches_per_s),
        matches_per_event=round(shared.matches_per_event, 3),
    )


def card_rows(table: Table, scale: Scale, steps: Steps) -> None:
    """The credit-card workload's rows of the targets' ``table`` (metric, value,
    target, met): the shared engine alone on all its queries (the demo's 1,002 at full
    scale) against :data:`CARD_TARGET`, and its sequences alone."""
    for label, template in (("all", "card"), ("sequences only", "card-seq")):
        setting = card_setting(scale, template, scale.target_events)
        (res,) = steps.run(setting, [SHARED])
        n = _registered(setting, template)
        met = res.events_per_s >= CARD_TARGET
        table.add(
            metric=f"credit-card workload events/s, {label}, {n} queries, measured alone",
            value=round(res.events_per_s, 2),
            target=f">= {CARD_TARGET}" if template == "card" else "-",
            met=("yes" if met else "NO") if template == "card" else "yes",
        )
