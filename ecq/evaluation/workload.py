"""Synthetic workloads of the SCEMon paper's evaluation (§7), seeded and deterministic.

- events: random ``(src, class, start, end)`` instances in time order; the source and
  the class are uniform; on average each source emits one event every ``source_gap``
  seconds, so the stream's rate grows with the number of sources as in the paper's
  setting;
- queries: the sequence template ``PATTERN Sequence WITH A, B, C WITHIN [200-240] mins``
  with the classes drawn from ``n_classes`` (``Npc``) and ``n_steps`` components
  (``Nstep``), and the conjunction / disjunction templates (CNJ3, DSJ3, DSJ5). Query
  ``i`` is the same whatever ``n_queries`` is, so a smaller query set is a prefix of a
  larger one;
- the operator families (:data:`FAMILIES`, not the paper's): the sequence template's
  classes with conditions on each component (``cond<n>``, over the events' attributes
  ``a0 ..``, ``n_attrs`` of them), a negated component (leading, middle, trailing), a
  Kleene component or a nested conjunction, so that each operator is measured on the
  same classes and windows as the bare sequences.

Defaults are the paper's: 1K queries, 1K sources, 50 classes, windows of 200-240 min.
The paper does not give its event rate. ``source_gap`` = 20 min (one event per source
every 20 minutes, ~12 per source in a 240-minute window, ~0.24 per class) keeps the
partial-match selectivity low, as the paper describes ("a large portion of incoming
event instances fails to extend partial matching"): at the defaults an event completes
0.4 RECENT matches on average (2 at 5K queries), and the separate-processing scheme
stores ~0.4M instance copies (2M at 5K queries, 1.5M at 5K sources) against ~17K in the
shared network, with cleaning every 10K events. Every halving of the gap multiplies
matches per event by about 3.5 (1.5 at 10 min, 4.5 at 5 min: at high rates nearly every
event completes a RECENT match of most queries that end with its class) and doubles
storage (``scemon bench rate``, docs/benchmarks.md).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterator
from dataclasses import dataclass

from ecq.event import AttrValue, Event

__all__ = [
    "Workload",
    "class_names",
    "sequence_queries",
    "conjunction_queries",
    "shared_condition_queries",
    "disjunction_queries",
    "events",
    "TEMPLATES",
    "template_queries",
    "PAPER_CARD_QUERIES",
    "credit_card_workload",
    "FAMILIES",
    "family_queries",
    "condition_queries",
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
    source_gap: float = 1200.0
    # Events last ``uniform(0, max_duration)`` seconds (0: point events, the paper's).
    max_duration: float = 0.0
    seed: int = 42
    # Numeric attributes ``a0 ..`` of every event, uniform in [0, 100) (0: none, the
    # paper's); what the ``cond<n>`` templates' conditions read.
    n_attrs: int = 0

    @property
    def window_events(self) -> int:
        """Events of the whole stream in one longest window: what the shared network
        holds once warm (every instance is stored once)."""
        return int(self.n_sources * self.window_max / self.source_gap)


def class_names(n: int) -> list[str]:
    """``C00 .. C49``: fixed-width so they sort in order."""
    width = max(2, len(str(n - 1)))
    return [f"C{i:0{width}d}" for i in range(n)]


def _window_text(rng: random.Random, w: Workload) -> str:
    lo, hi = int(w.window_min // 60), int(w.window_max // 60)
    return f"WITHIN {rng.randint(lo, hi)} mins"


def _sequence_picks(w: Workload) -> list[tuple[list[str], str]]:
    """The classes and the WITHIN clause of each sequence query: what every template
    built on the sequence template shares."""
    rng = random.Random(w.seed)
    classes = class_names(w.n_classes)
    out = []
    for _ in range(w.n_queries):
        picks = rng.sample(classes, min(w.n_steps, len(classes)))
        out.append((picks, _window_text(rng, w)))
    return out


def sequence_queries(w: Workload) -> list[tuple[str, str]]:
    """``(name, text)`` of ``n_queries`` sequence queries of ``n_steps`` distinct classes."""
    return [
        (f"seq{i:05d}", f"PATTERN Sequence WITH {', '.join(picks)} WHERE [symbol] {within}")
        for i, (picks, within) in enumerate(_sequence_picks(w))
    ]


def condition_queries(w: Workload, per_component: int) -> list[tuple[str, str]]:
    """The sequence template with ``per_component`` conditions on each component, each
    a one-sided bound on attribute ``a<j>`` of that component (``A.a0 > 31``, ``A.a1 <
    72``: thresholds drawn so that a condition holds for 40-100% of the events); with 0
    the bare sequence template itself. Every query has its own bounds, so the number of
    distinct filters grows with the number of queries."""
    if per_component == 0:
        return sequence_queries(w)
    rng = random.Random(w.seed + 5)
    out = []
    for i, (picks, within) in enumerate(_sequence_picks(w)):
        conds = []
        for cls in picks:
            for j in range(per_component):
                if rng.random() < 0.5:
                    conds.append(f"{cls}.a{j} > {rng.uniform(0.0, 60.0):.1f}")
                else:
                    conds.append(f"{cls}.a{j} < {rng.uniform(40.0, 100.0):.1f}")
        text = f"PATTERN Sequence WITH {', '.join(picks)} WHERE [symbol] {' AND '.join(conds)} {within}"
        out.append((f"cond{i:05d}", text))
    return out


# The operator families of ``scemon bench operators``: the template of each (see
# :func:`family_queries`).
FAMILIES: dict[str, str] = {
    "bare": "seq",
    "conditions": "cond1",
    "cnj3": "cnj3",
    "cnj-neg": "cnj-neg",
    "cnj-sum": "cnj-sum",
    "neg-middle": "neg-middle",
    "neg-leading": "neg-leading",
    "neg-trailing": "neg-trailing",
    "kleene": "kleene",
    "nested": "nested",
    "kleene-count": "kleene-count",
    "kleene-trailing": "kleene-trailing",
    "kleene-bounded": "kleene-bounded",
    "kleene-rising": "kleene-rising",
}


def family_queries(w: Workload, template: str) -> list[tuple[str, str]]:
    """The sequence template's classes and windows with one operator changed:
    ``neg-middle`` ``SEQ(A, !B, C)``, ``neg-leading`` ``SEQ(!A, B, C)``, ``neg-trailing``
    ``SEQ(A, B, !C)``, ``kleene`` ``SEQ(A, B+, C)``, ``nested`` ``SEQ(A, AND(B, C))`` (three
    steps; other step counts negate or close the middle, first or last one), and the
    conjunction ``cnj-neg`` ``AND(A, B, !C)`` (the last class negated)."""
    shapes = {
        "neg-middle": lambda p: [p[0], *(f"!{c}" if i == 1 else c for i, c in enumerate(p[1:], 1))],
        "neg-leading": lambda p: [f"!{p[0]}", *p[1:]],
        "neg-trailing": lambda p: [*p[:-1], f"!{p[-1]}"],
        "kleene": lambda p: [p[0], *(f"{c}+" if i == 1 else c for i, c in enumerate(p[1:], 1))],
        "nested": lambda p: [p[0], f"AND({', '.join(p[1:])})"],
        "cnj-neg": lambda p: [*p[:-1], f"!{p[-1]}"],
        # Kleene closure as users write it (docs/semantics.md §6): a count threshold
        # alone, a trailing run, a bounded run, a rising run.
        "kleene-count": lambda p: [f"{p[1]}{{5}}"],
        "kleene-trailing": lambda p: [*p[:-1], f"{p[-1]}{{2,}}"],
        "kleene-bounded": lambda p: [p[0], *(f"{c}{{2,4}}" if i == 1 else c for i, c in enumerate(p[1:], 1))],
        "kleene-rising": lambda p: [
            f"{p[0]} a",
            *(f"{c}+ b[]" if i == 1 else f"{c} c{i}" for i, c in enumerate(p[1:], 1)),
        ],
    }
    # The rising run's iteration condition (the events need ``n_attrs >= 1``).
    where = " WHERE b[i].a0 > b[i-1].a0" if template == "kleene-rising" else ""
    kind = "AND" if template.startswith("cnj") else "SEQ"
    shape = shapes.get(template)
    if shape is None:
        raise ValueError(f"unknown operator template {template!r}")
    if w.n_steps < 3:
        raise ValueError(f"the {template} template needs at least 3 steps")
    return [
        (f"{template.replace('-', '')}{i:05d}", f"{kind}({', '.join(shape(picks))}){where} {within}")
        for i, (picks, within) in enumerate(_sequence_picks(w))
    ]


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


def shared_condition_queries(w: Workload, per_triple: int = 50) -> list[tuple[str, str]]:
    """``cnj-sum``: ``AND(A, B, C) WHERE A.a0 + B.a0 + C.a0 < 150`` within 200-240
    minutes, RECENT and ALL in turn, one class triple for every ``per_triple`` queries:
    many users' queries with the same classes and the same condition across events
    (the paper's brand spree), which the shared network evaluates once per combination
    of events for all of them. The events need ``n_attrs >= 1``."""
    rng = random.Random(w.seed + 3)
    classes = class_names(w.n_classes)
    triples = [rng.sample(classes, 3) for _ in range(max(1, w.n_queries // per_triple))]
    out = []
    for i in range(w.n_queries):
        a, b, c = triples[i % len(triples)]
        mode = " MODE ALL" if i % 2 else ""
        text = f"AND({a}, {b}, {c}) WHERE {a}.a0 + {b}.a0 + {c}.a0 < 150 {_window_text(rng, w)}{mode}"
        out.append((f"cnjsum{i:05d}", text))
    return out


def disjunction_queries(w: Workload, size: int = 3) -> list[tuple[str, str]]:
    """DSJ``size``: ``PATTERN Disjunction WITH A, B, C`` (no window: nothing is stored)."""
    rng = random.Random(w.seed + 2)
    classes = class_names(w.n_classes)
    return [
        (f"dsj{i:05d}", f"PATTERN Disjunction WITH {', '.join(rng.sample(classes, size))}")
        for i in range(w.n_queries)
    ]


TEMPLATES = (
    "seq",
    "cnj3",
    "cnj-neg",
    "cnj-sum",
    "dsj3",
    "dsj5",
    "cond1",
    "cond3",
    "neg-middle",
    "neg-leading",
    "neg-trailing",
    "kleene",
    "nested",
    "kleene-count",
    "kleene-trailing",
    "kleene-bounded",
    "kleene-rising",
)


def template_queries(w: Workload, template: str) -> list[tuple[str, str]]:
    """The queries of a template: the paper's ``seq`` (``n_steps`` steps), ``cnj<n>``,
    ``dsj<n>``; ``cond<n>`` (:func:`condition_queries`) and the operator templates of
    :func:`family_queries`."""
    if template == "seq":
        return sequence_queries(w)
    if template == "cnj-sum":
        return shared_condition_queries(w)
    head = template.rstrip("0123456789")
    size = template[len(head) :]
    if size and head == "cnj":
        return conjunction_queries(w, int(size))
    if size and head == "dsj":
        return disjunction_queries(w, int(size))
    if size and head == "cond":
        return condition_queries(w, int(size))
    if template in TEMPLATES:
        return family_queries(w, template)
    raise ValueError(f"unknown template {template!r} (expected one of {', '.join(TEMPLATES)})")


def events(w: Workload, count: int, start: float = 0.0) -> Iterator[Event]:
    """``count`` random instances in time order, ids ``0 ..``: point events, or with
    ``max_duration`` intervals, given in order of ``end`` (as the service sorts them)."""
    rng = random.Random(w.seed + 3)
    # Attributes from their own generator: the stream's sources, classes and times are
    # the same with or without them.
    values = random.Random(w.seed + 4)
    names = [f"a{j}" for j in range(w.n_attrs)]

    def attrs() -> dict[str, AttrValue] | None:
        return {name: round(values.uniform(0.0, 100.0), 2) for name in names} if names else None

    classes = class_names(w.n_classes)
    gap = w.source_gap / w.n_sources
    t = start
    if w.max_duration <= 0:
        for i in range(count):
            t += rng.expovariate(1.0 / gap)
            yield Event(
                rng.randrange(w.n_sources),
                classes[rng.randrange(w.n_classes)],
                round(t, 3),
                attrs=attrs(),
                id=i,
            )
        return
    # Intervals end at most max_duration after they start: hold each until no later
    # interval can end before it. O(log held) per event.
    held: list[tuple[float, int, Event]] = []
    for i in range(count):
        t += rng.expovariate(1.0 / gap)
        begin = round(t, 3)
        end = round(begin + rng.uniform(0.0, w.max_duration), 3)
        ev = Event(rng.randrange(w.n_sources), classes[rng.randrange(w.n_classes)], begin, end, attrs(), id=i)
        heapq.heappush(held, (end, i, ev))
        while held[0][0] <= begin:
            yield heapq.heappop(held)[2]
    while held:
        yield heapq.heappop(held)[2]


# ------------------------------------------------------------------ credit-card flavour

# The SCEMon paper's motivating scenario (§1, §3): a card company tracks thousands of
# purchasing patterns over card holders' payments. Ten merchant categories, five
# merchant classes each (``CNMA_A`` .. ``CNMA_E``), and the payment range of each
# category in dollars. The paper's two example queries use CNMA_A, RSTR_B, BAR_C and
# BRND_A..C, so those names are always among the classes.
_CARD_CATEGORIES: dict[str, tuple[float, float]] = {
    "CNMA": (8.0, 60.0),  # cinemas
    "RSTR": (20.0, 160.0),  # restaurants
    "BAR": (5.0, 90.0),
    "BRND": (20.0, 250.0),  # brand stores
    "GROC": (5.0, 180.0),  # groceries
    "FUEL": (20.0, 110.0),
    "TRVL": (50.0, 900.0),  # travel agents, airlines
    "HOTL": (80.0, 600.0),
    "SPRT": (15.0, 300.0),  # sporting events and goods
    "ELEC": (10.0, 1500.0),  # electronics
}

# The paper's CEM queries 1 and 2, verbatim apart from the names.
PAPER_CARD_QUERIES: list[tuple[str, str]] = [
    (
        "dinner_and_a_movie",
        "PATTERN Sequence WITH CNMA_A, RSTR_B, BAR_C\n"
        "WHERE [symbol] $20 < CNMA_A.payment < $50 AND $80 < RSTR_B.payment < $120 AND BAR_C.payment < $50\n"
        "WITHIN 5 hours",
    ),
    (
        "brand_spree",
        "PATTERN Conjunction WITH BRND_A, BRND_B, BRND_C\n"
        "WHERE [symbol] BRND_A.payment + BRND_B.payment + BRND_C.payment < $200\n"
        "WITHIN 1.5 hours",
    ),
]


def credit_card_workload(
    n_cards: int = 1000,
    n_classes: int = 50,
    n_queries: int = 1000,
    n_events: int = 100_000,
    purchase_gap: float = 1800.0,
    seed: int = 42,
) -> tuple[list[tuple[str, str]], Iterator[Event]]:
    """The paper's credit-card scenario: ``(queries, events)``.

    ``queries`` are the paper's two example queries (:data:`PAPER_CARD_QUERIES`) followed
    by ``n_queries`` generated purchasing patterns ``cc00000 ..``: sequences (two thirds)
    and conjunctions of two or three merchant classes with payment bounds, within 1 to 5
    hours. ``events`` yields ``n_events`` payments in time order: card holders
    ``card-0000 ..`` (the source) each pay on average every ``purchase_gap`` seconds,
    at a merchant class with a ``payment`` attribute in its category's range. Now and
    then a holder goes on an outing that follows one of the patterns (the paper's
    dinner-and-a-movie evening among them), so queries have matches to find. Ids are
    ``p<n>``. Seeded: the same arguments give the same workload.
    """
    classes = _card_classes(n_classes)
    rng = random.Random(seed)
    outings = [["CNMA_A", "RSTR_B", "BAR_C"], ["BRND_A", "BRND_B", "BRND_C"]]
    outings += [rng.sample(classes, rng.choice((2, 3))) for _ in range(60)]
    queries = list(PAPER_CARD_QUERIES)
    for i in range(n_queries):
        picks = rng.choice(outings) if rng.random() < 0.7 else rng.sample(classes, rng.choice((2, 3)))
        kind = "Sequence" if rng.random() < 2 / 3 else "Conjunction"
        bounds = [f"{c}.payment {rng.choice(('<', '>'))} ${_card_amount(rng, c):.0f}" for c in picks[:2]]
        text = (
            f"PATTERN {kind} WITH {', '.join(picks)}\n"
            f"WHERE [symbol] {' AND '.join(bounds)}\n"
            f"WITHIN {rng.choice((1, 1.5, 2, 3, 4, 5))} hours"
        )
        queries.append((f"cc{i:05d}", text))
    return queries, _card_events(rng, classes, outings, n_cards, n_events, purchase_gap)


def _card_classes(n: int) -> list[str]:
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    per = max(5, -(-n // len(_CARD_CATEGORIES)))
    names = [f"{cat}_{letters[i]}" for i in range(min(per, 26)) for cat in _CARD_CATEGORIES]
    if n > len(names):
        raise ValueError(f"at most {len(names)} merchant classes")
    return names[:n]


def _card_amount(rng: random.Random, cls: str) -> float:
    lo, hi = _CARD_CATEGORIES[cls.split("_", 1)[0]]
    return round(rng.uniform(lo, hi), 2)


def _card_events(
    rng: random.Random,
    classes: list[str],
    outings: list[list[str]],
    n_cards: int,
    n_events: int,
    gap: float,
) -> Iterator[Event]:
    # Each card's next payment waits in a heap keyed by time, so the stream comes out in
    # time order; a card on an outing pays at its next merchant 20-90 minutes later.
    heap = [(rng.expovariate(1.0 / gap), card) for card in range(n_cards)]
    heapq.heapify(heap)
    plans: dict[int, list[str]] = {}
    for i in range(n_events):
        t, card = heapq.heappop(heap)
        plan = plans.get(card)
        if plan:
            cls = plan.pop(0)
        elif rng.random() < 0.15:
            plan = list(rng.choice(outings))
            if rng.random() < 0.5 and plan[0].startswith("BRND"):
                rng.shuffle(plan)  # a conjunction's classes come in any order
            cls = plan.pop(0)
            plans[card] = plan
        else:
            cls = rng.choice(classes)
        attrs: dict[str, AttrValue] = {"payment": _card_amount(rng, cls)}
        yield Event(f"card-{card:04d}", cls, round(t, 3), attrs=attrs, id=f"p{i}")
        wait = rng.uniform(1200.0, 5400.0) if plans.get(card) else rng.expovariate(1.0 / gap)
        heapq.heappush(heap, (t + wait, card))
