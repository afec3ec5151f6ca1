"""One measurement (service/bench/runner.py): what it counts, times and builds. Behaviour
only: no timing thresholds, ever (tests assert behaviour, benchmarks report numbers)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ecq.evaluation.workload import Workload
from ecq.network import LEVELS
from service.bench.runner import (
    PHASES,
    SEPARATE,
    SHARED,
    Setting,
    Variant,
    extrapolate,
    make_engine,
    measure,
)

TINY = Setting(Workload(n_queries=40, n_sources=20), clean_every=200, events=800, warmup=400, chunk=150)


def test_measure_counts_only_the_events_after_warm_up() -> None:
    shared, separate = measure(TINY, [SHARED, SEPARATE])
    for res in (shared, separate):
        assert res.events == TINY.events
        assert res.seconds > 0 and res.seconds >= res.clean_seconds > 0
        # Cleanings at 600, 800, 1000, 1200 (after the 400 warm-up events): two counts each.
        assert res.cleanings == 4 and len(res.stored_samples) == 8
    # Same stream, same queries, same semantics: the same matches.
    assert shared.matches == separate.matches > 0
    # The baseline keeps a copy per plan; the shared network one per instance.
    assert separate.stored_avg > shared.stored_avg > 0


def test_variants_with_fewer_queries_register_a_prefix() -> None:
    few, all_ = measure(TINY, [replace(SHARED, queries=5), SHARED])
    assert few.label == "shared@5"
    assert few.matches <= all_.matches


def test_sp_on_a_sample_of_the_queries_estimates_the_whole() -> None:
    """SP shares nothing between queries: its matches and stored copies are sums over
    them, so a half sample's, scaled up, land near the whole run's (the sample's
    queries are drawn at random, not a prefix)."""
    whole, half, none = measure(
        TINY,
        [
            replace(SEPARATE, queries=40),
            replace(SEPARATE, queries=40, sample=20),
            replace(SEPARATE, queries=0),
        ],
    )
    assert half.label == "separate@40~20" and none.matches == 0
    estimate = extrapolate(half, none)
    assert estimate.estimated_from == 20 and estimate.label == "separate@40"
    assert estimate.events == whole.events and estimate.seconds > 0
    assert estimate.matches == 2 * half.matches
    assert 0.5 * whole.matches <= estimate.matches <= 1.5 * whole.matches
    assert 0.5 * whole.stored_avg <= estimate.stored_avg <= 1.5 * whole.stored_avg
    # The empty run's own time is counted once, not scaled up with the queries'.
    assert estimate.seconds == pytest.approx(none.seconds + 2 * (half.seconds - none.seconds))
    with pytest.raises(ValueError, match="not a sampled SP measurement"):
        extrapolate(whole, none)
    with pytest.raises(ValueError, match="without queries"):
        extrapolate(half, whole)


@pytest.mark.parametrize("variant", [Variant("separate", profile=True), Variant("shared", LEVELS[0], True)])
def test_profiled_variants_report_every_phase(variant: Variant) -> None:
    (res,) = measure(TINY, [variant])
    assert set(res.timers) == set(PHASES)
    assert sum(res.timers.values()) > 0
    assert res.phase_us("clean") > 0


def test_every_level_and_engine_can_be_built() -> None:
    for level in LEVELS:
        make_engine(Variant("shared", level))
    with pytest.raises(ValueError):
        make_engine(Variant("nonsense"))


def test_progress_reaches_the_end() -> None:
    seen: list[float] = []
    measure(TINY, [SHARED], lambda fraction, label: seen.append(fraction))
    assert seen == sorted(seen) and seen[-1] == 1.0
