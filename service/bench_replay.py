"""``scemon replay`` end to end, timed: the events/s a user sees, file reading included.

The paper's workload is written as files (``queries.txt`` and ``events.jsonl``, as
``scemon generate`` writes them) and ``python -m service.cli replay`` runs on them as a
separate process; the wall time covers everything the command does: starting Python,
reading and validating the files, matching, writing the matches.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from ecq import workload as wl

__all__ = ["ReplayTiming", "time_replay"]

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ReplayTiming:
    events: int
    matches: int
    seconds: float

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


def time_replay(
    w: wl.Workload, n_events: int, engine: str = "shared", timeout: float = 3600.0
) -> ReplayTiming:
    """Write ``w``'s sequence queries and ``n_events`` events, replay them in a fresh
    process and time it. Raises ``RuntimeError`` if the replay fails."""
    with tempfile.TemporaryDirectory(prefix="scemon-bench-") as tmp:
        folder = Path(tmp)
        queries = folder / "queries.txt"
        events = folder / "events.jsonl"
        out = folder / "matches.jsonl"
        queries.write_text("".join(f"QUERY {name}\n{text}\n\n" for name, text in wl.sequence_queries(w)))
        with events.open("wb") as fh:
            fh.writelines(orjson.dumps(e.to_dict()) + b"\n" for e in wl.events(w, n_events))
        command = [sys.executable, "-m", "service.cli", "replay", "-q", queries, "-e", events, "-o", out]
        command += ["--engine", engine]
        began = time.perf_counter()
        result = subprocess.run(
            [str(part) for part in command], cwd=ROOT, capture_output=True, text=True, timeout=timeout
        )
        seconds = time.perf_counter() - began
        if result.returncode != 0:
            raise RuntimeError(f"scemon replay failed: {result.stderr.strip()}")
        with out.open("rb") as fh:
            matches = sum(1 for _ in fh)
    return ReplayTiming(n_events, matches, seconds)
