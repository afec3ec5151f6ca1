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

from ecq.evaluation import workload as wl
from service.bench.table import Table

__all__ = ["ReplayTiming", "add_replay_row", "time_replay", "write_replay_files"]

ROOT = Path(__file__).resolve().parents[2]
# The end-to-end rate the targets ask of ``scemon replay``, in events/s.
REPLAY_TARGET = 100_000


@dataclass(frozen=True)
class ReplayTiming:
    events: int
    matches: int
    seconds: float

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


def write_replay_files(w: wl.Workload, n_events: int, folder: Path) -> tuple[Path, Path]:
    """``w``'s sequence queries and ``n_events`` of its events as ``scemon replay`` reads
    them (``queries.txt``, ``events.jsonl`` in ``folder``)."""
    queries = folder / "queries.txt"
    events = folder / "events.jsonl"
    queries.write_text("".join(f"QUERY {name}\n{text}\n\n" for name, text in wl.sequence_queries(w)))
    with events.open("wb") as fh:
        fh.writelines(orjson.dumps(e.to_dict()) + b"\n" for e in wl.events(w, n_events))
    return queries, events


def time_replay(
    w: wl.Workload, n_events: int, engine: str = "shared", timeout: float = 3600.0
) -> ReplayTiming:
    """Write ``w``'s sequence queries and ``n_events`` events, replay them in a fresh
    process and time it. Raises ``RuntimeError`` if the replay fails."""
    with tempfile.TemporaryDirectory(prefix="scemon-bench-") as tmp:
        folder = Path(tmp)
        queries, events = write_replay_files(w, n_events, folder)
        out = folder / "matches.jsonl"
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


def add_replay_row(table: Table, w: wl.Workload, n_events: int) -> ReplayTiming:
    """Time ``scemon replay`` on ``w`` and ``n_events`` events and add its rate to the
    targets' ``table`` (metric, value, target, met), with a note of what was timed."""
    timing = time_replay(w, n_events)
    rate = timing.events_per_s
    table.add(
        metric=f"scemon replay events/s, {w.n_queries} queries, end to end",
        value=round(rate, 2),
        target=f">= {REPLAY_TARGET}",
        met="yes" if rate >= REPLAY_TARGET else "NO",
    )
    table.notes.append(
        f"replay: {timing.events} events, {timing.matches} matches, {timing.seconds:.2f} s wall "
        "(process start, reading, matching, writing)"
    )
    return timing
