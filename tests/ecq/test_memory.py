"""Memory stays bounded: storage follows sources × rate × window, not stream length."""

from __future__ import annotations

import random
from typing import Any

import pytest

from ecq.engine import Engine
from ecq.event import Event
from ecq.matching import assembly, skeleton


def test_kleene_plus_with_a_wide_window_keeps_storage_bounded() -> None:
    """A long stream through ``A; B+; C`` with a wide window: the stored-instance count,
    sampled after each cleaning, levels off at the window's worth of events and stays
    there. A Kleene group is built from the SIQ chain when a match completes, so nothing
    grows per partial match."""
    rng = random.Random(3)
    window = 500.0
    eng = Engine(clean_every=1000)
    eng.register("groups", f"PATTERN A; B+; C WITHIN {window:g} MODE ALL")
    eng.register("recent", f"PATTERN A; B+; C WHERE count(B) >= 3 WITHIN {window:g}")
    samples = []
    matches = 0
    t = 0.0
    for _ in range(24):
        batch = []
        for _ in range(1000):
            t += 0.25
            batch.append(Event(rng.randrange(20), rng.choice("AAABBBBBBC"), t))
        matches += len(eng.process(batch))
        eng.clean()
        samples.append(eng.stats()["stored_instances"])
    assert matches > 0
    in_window = window / 0.25  # every event of the pattern's classes within one window
    assert max(samples) <= in_window * 1.05
    late = samples[len(samples) // 2 :]
    assert max(late) - min(late) <= 0.2 * max(late)  # flat: no growth with stream length
    assert eng.stats()["pmb_entries"] <= 2 * max(samples)


@pytest.mark.parametrize("compiled", [False, None])  # the pure kernel, then the default one
def test_kleene_leaf_takes_one_skeleton_match_per_latest_element(
    monkeypatch: pytest.MonkeyPatch, compiled: bool | None
) -> None:
    """A Kleene group's latest element only (``QState.latest_only``): with 30 ``B`` between
    two ``A`` and a ``C``, ``A; B+; C`` in MODE ALL hands the leaf one skeleton match per
    ``A`` (the latest ``B``), not one per ``B`` of the window, which the leaf would then
    reject — on both kernels (the compiled one tried every ``B``: cubic in the window)."""
    real = skeleton.leaf
    calls: list[object] = []

    def counting(*args: Any) -> Any:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(skeleton, "leaf", counting)
    monkeypatch.setattr(assembly, "leaf", counting)
    eng = Engine(compiled=compiled)
    eng.register("groups", "PATTERN A; B+; C WITHIN 1000 MODE ALL")
    events = [Event(1, "A", 0.0), Event(1, "A", 1.0)]
    events += [Event(1, "B", 2.0 + i) for i in range(30)] + [Event(1, "C", 100.0)]
    matches = eng.process(events)
    assert [(m.events[0].start, len(m.events[1])) for m in matches] == [(0.0, 30), (1.0, 30)]
    assert len(calls) == 2
