"""Synthetic workloads of the SCEMon paper's evaluation (§7), seeded and deterministic.

- events: random ``(src, class, start, end)`` instances in time order; on average each
  source emits one event every ``source_gap`` seconds, so the stream's rate grows with
  the number of sources as in the paper's setting;
- queries: the sequence template ``PATTERN Sequence WITH A, B, C WITHIN [200-240] mins``
  with the classes drawn from ``n_classes`` (``Npc``) and ``n_steps`` components
  (``Nstep``), and the conjunction / disjunction templates (CNJ3, DSJ3, DSJ5).

Defaults are the paper's: 1K queries, 1K sources, 50 classes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from ecq.event import Event

__all__ = [
    "Workload",
    "class_names",
    "sequence_queries",
    "conjunction_queries",
    "disjunction_queries",
    "events",
]


@dataclass(frozen=True)
class Workload:
    """The parameters of one run; every generator takes its values from here."""

    n_queries: int = 1000
    n_sources: int = 1000
    n_classes: int = 50
    n_steps: int = 3
    window_min: float = 200 * 60.0
    window_max: float = 240 * 60.0
    source_gap: float = 60.0
    seed: int = 42


def class_names(n: int) -> list[str]:
    """``C00 .. C49``: fixed-width so they sort in order."""
    width = max(2, len(str(n - 1)))
    return [f"C{i:0{width}d}" for i in range(n)]


def _window_text(rng: random.Random, w: Workload) -> str:
    lo, hi = int(w.window_min // 60), int(w.window_max // 60)
    return f"WITHIN {rng.randint(lo, hi)} mins"


def sequence_queries(w: Workload) -> list[tuple[str, str]]:
    """``(name, text)`` of ``n_queries`` sequence queries of ``n_steps`` distinct classes."""
    rng = random.Random(w.seed)
    classes = class_names(w.n_classes)
    out = []
    for i in range(w.n_queries):
        picks = rng.sample(classes, min(w.n_steps, len(classes)))
        text = f"PATTERN Sequence WITH {', '.join(picks)} WHERE [symbol] {_window_text(rng, w)}"
        out.append((f"seq{i:05d}", text))
    return out


def conjunction_queries(w: Workload, size: int = 3) -> list[tuple[str, str]]:
    """CNJ``size``: ``PATTERN Conjunction WITH A, B, C WITHIN [200-240] mins``."""
    rng = random.Random(w.seed + 1)
    classes = class_names(w.n_classes)
    return [
        (
            f"cnj{i:05d}",
            f"PATTERN Conjunction WITH {', '.join(rng.sample(classes, size))} {_window_text(rng, w)}",
        )
        for i in range(w.n_queries)
    ]


def disjunction_queries(w: Workload, size: int = 3) -> list[tuple[str, str]]:
    """DSJ``size``: ``PATTERN Disjunction WITH A, B, C`` (no window: nothing is stored)."""
    rng = random.Random(w.seed + 2)
    classes = class_names(w.n_classes)
    return [
        (f"dsj{i:05d}", f"PATTERN Disjunction WITH {', '.join(rng.sample(classes, size))}")
        for i in range(w.n_queries)
    ]


def events(w: Workload, count: int, start: float = 0.0) -> Iterator[Event]:
    """``count`` random instances in time order (point events), ids ``e<n>``."""
    rng = random.Random(w.seed + 3)
    classes = class_names(w.n_classes)
    gap = w.source_gap / w.n_sources
    t = start
    for i in range(count):
        t += rng.expovariate(1.0 / gap)
        yield Event(rng.randrange(w.n_sources), classes[rng.randrange(w.n_classes)], round(t, 3), id=i)
