"""Make the example card-payment events that ``make demo`` replays.

Deterministic (fixed seed), so the committed ``events.jsonl`` / ``events.csv`` are exactly
what this script writes: re-run it after changing it and commit the result. A day of
background purchases on a few dozen cards, plus planted evenings that each query of
``queries.txt`` is written to catch, so every query has several matches.

    python examples/make_example.py
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20240105
CARDS = [f"card-{n:02d}" for n in range(1, 25)]
HOUR = 3600.0

# Merchant class -> (merchant names, typical payment range in dollars).
CLASSES: dict[str, tuple[list[str], tuple[float, float]]] = {
    "CNMA_A": (["Odeon", "Rex", "Cine Lux"], (12, 60)),
    "RSTR_B": (["Chez Paul", "Noodle Bar", "Trattoria"], (30, 160)),
    "BAR_C": (["Blue Note", "Harbour Pub", "Tap Room"], (8, 90)),
    "BRND_A": (["Acme Apparel"], (25, 220)),
    "BRND_B": (["Bolt Shoes"], (25, 180)),
    "BRND_C": (["Crest Watches"], (30, 250)),
}


def purchase(
    rng: random.Random, card: str, kind: str, at: float, low: float | None = None, high: float | None = None
) -> dict[str, object]:
    names, (lo, hi) = CLASSES[kind]
    amount = rng.uniform(lo if low is None else low, hi if high is None else high)
    return {
        "src": card,
        "type": kind,
        "start": round(at),
        "attrs": {"payment": round(amount, 2), "merchant": rng.choice(names)},
    }


def background(rng: random.Random) -> list[dict[str, object]]:
    """Ordinary spending: a dozen purchases per card at random hours of the day."""
    out = []
    for card in CARDS:
        for _ in range(rng.randint(8, 14)):
            kind = rng.choice(list(CLASSES))
            out.append(purchase(rng, card, kind, rng.uniform(8 * HOUR, 23 * HOUR)))
    return out


def planted(rng: random.Random) -> list[dict[str, object]]:
    """Evenings shaped like the queries, on cards chosen at random (late at night, after
    the background day, so they stand out in the output)."""
    out = []
    night = 24 * HOUR
    for card in rng.sample(CARDS, 6):  # movie, dinner, drink: dinner_and_a_movie
        t = night + rng.uniform(0, 6 * HOUR)
        out.append(purchase(rng, card, "CNMA_A", t, 22, 48))
        out.append(purchase(rng, card, "RSTR_B", t + rng.uniform(0.5, 1.5) * HOUR, 85, 115))
        out.append(purchase(rng, card, "BAR_C", t + rng.uniform(2, 3.5) * HOUR, 10, 45))
    for card in rng.sample(CARDS, 6):  # three brands within the hour: brand_spree
        t = night + rng.uniform(0, 6 * HOUR)
        for i, kind in enumerate(rng.sample(["BRND_A", "BRND_B", "BRND_C"], 3)):
            out.append(purchase(rng, card, kind, t + i * rng.uniform(0.1, 0.4) * HOUR, 30, 60))
    for card in rng.sample(CARDS, 6):  # movie then bar, no dinner: movie_then_bar
        t = night + rng.uniform(7 * HOUR, 10 * HOUR)
        out.append(purchase(rng, card, "CNMA_A", t))
        out.append(purchase(rng, card, "BAR_C", t + rng.uniform(1, 2.5) * HOUR))
    for card in rng.sample(CARDS, 5):  # a cheap dinner, then a big buy: splurge_after_dinner
        t = night + rng.uniform(11 * HOUR, 13 * HOUR)
        out.append(purchase(rng, card, "RSTR_B", t, 30, 45))
        out.append(purchase(rng, card, "BRND_A", t + rng.uniform(0.3, 1.5) * HOUR, 120, 200))
    for card in rng.sample(CARDS, 5):  # dinner, two or three bars, a late movie: bar_hopping
        t = night + rng.uniform(14 * HOUR, 16 * HOUR)
        out.append(purchase(rng, card, "RSTR_B", t))
        bars = rng.randint(2, 3)
        for i in range(bars):
            out.append(purchase(rng, card, "BAR_C", t + (i + 1) * 0.6 * HOUR, 10, 70))
        out.append(purchase(rng, card, "CNMA_A", t + (bars + 1) * 0.6 * HOUR))
    for card in rng.sample(CARDS, 4):  # one big bar tab each: large_bar_tab
        out.append(purchase(rng, card, "BAR_C", night + rng.uniform(17 * HOUR, 20 * HOUR), 80, 140))
    return out


def make() -> list[dict[str, object]]:
    """All events in time order (ties broken by card, then class), with ids tx0001...;
    the file order is the arrival order."""
    rng = random.Random(SEED)
    events = background(rng) + planted(rng)
    events.sort(key=lambda e: (e["start"], e["src"], e["type"]))
    return [{"id": f"tx{i:04d}", **e} for i, e in enumerate(events, 1)]


def write(events: list[dict[str, object]]) -> None:
    with open(HERE / "events.jsonl", "w", encoding="utf-8") as out:
        for event in events:
            out.write(json.dumps(event) + "\n")
    with open(HERE / "events.csv", "w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["id", "src", "type", "start", "payment", "merchant"])
        for event in events:
            attrs = event["attrs"]
            assert isinstance(attrs, dict)
            writer.writerow(
                [
                    event["id"],
                    event["src"],
                    event["type"],
                    event["start"],
                    attrs["payment"],
                    attrs["merchant"],
                ]
            )


if __name__ == "__main__":
    write(make())
