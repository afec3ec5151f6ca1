"""One measurement (service/bench/runner.py): what it counts, times and builds. Behaviour
only: no timing thresholds, ever (tests assert behaviour, benchmarks report numbers)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ecq.network import LEVELS
from ecq.workload import Workload
from service.bench.runner import PHASES, SEPARATE, SHARED, Setting, Variant, make_engine, measure

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
