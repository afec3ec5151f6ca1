"""``scemon bench startup``: ``scemon replay`` of 1,000 queries over 20,000 events, end
to end in a fresh process, and where its time goes.

The files are the ones ``scemon generate --queries 1000 --events 20000`` writes (the
paper's sequences, its defaults otherwise). Two kinds of run, interleaved, each in a
process of its own:

- **whole**: the command as a user runs it, ``python -m service.cli replay -q ... -e ...
  -o ...``; wall time from the spawn to the exit, CPU time (user + system) of the child.
- **split**: the same command through :data:`DRIVER`, which imports the CLI (as the
  command does: with the collector quiet), wraps the four steps ``scemon replay`` takes
  (``read_queries``, ``build_engine``, ``read_events``, ``run``: the functions it calls,
  not copies of them) and runs the command as the console script does
  (``service.cli.process.cli``). At each step's end it stamps the monotonic clock
  (``CLOCK_MONOTONIC``, one clock for every process of the machine, so the spawn and
  the exit are seen from the parent), the process's CPU time and the time spent in
  the cyclic garbage collector so far.

One bound is outside the command: a fresh interpreter's start and ``site`` (which here
includes the finder of an editable install) are the ``start`` row.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ecq.evaluation import workload as wl
from service.bench.replay import write_replay_files
from service.bench.table import Table

__all__ = ["DRIVER", "PHASES", "TARGET_S", "Run", "startup_table", "time_split", "time_whole"]

ROOT = Path(__file__).resolve().parents[2]
# The whole run's wall time the target asks for, in seconds.
TARGET_S = 0.5
# `scemon generate`'s defaults (a mean gap of an hour between two events of a source).
GENERATE = wl.Workload(n_queries=1000, source_gap=3600.0, seed=42)
N_EVENTS = 20_000

# (name, what it covers), in the order they happen; each ends at a stamp of DRIVER's
# (the first begins at the spawn, the last ends at the exit).
PHASES: tuple[tuple[str, str], ...] = (
    ("start", "the interpreter and site"),
    ("import cli", "service.cli.app: typer"),
    ("import replay", "service.cli.replay: the engine, the files' readers"),
    ("command line", "typer parses the options, builds the command"),
    ("parse queries", "read_queries: the queries file read and parsed"),
    ("compile + install", "build_engine: every query compiled and installed"),
    ("read events", "read_events: the events file read and checked"),
    ("match + write", "run: the events through the engine, the matches written"),
    ("exit", "the summary line, the interpreter's exit"),
)

# Run as `python -c DRIVER <stamps file> replay ...`: stamps (name, monotonic s, CPU s,
# GC s) at the end of each step, written to the stamps file as soon as the matches are
# (so that writing them costs the exit nothing), or at the end if that step never came.
DRIVER = """
import sys, time
clock = lambda: time.clock_gettime(time.CLOCK_MONOTONIC)
stamps = [("start", clock(), time.process_time(), 0.0)]
import gc
collecting = [0.0, 0.0]
def timed(phase, info):
    if phase == "start":
        collecting[1] = clock()
    else:
        collecting[0] += clock() - collecting[1]
gc.callbacks.append(timed)
def stamp(name):
    stamps.append((name, clock(), time.process_time(), collecting[0]))
path = sys.argv[1]
written = []
def dump():
    if not written:
        written.append(path)
        import json
        with open(path, "w") as fh:
            json.dump(stamps, fh)
import service.cli.process as process
with process.collector_quiet():  # as process.cli and the app's build_command import them
    import service.cli.app
stamp("import cli")
with process.collector_quiet():
    import service.cli.replay as replay
stamp("import replay")
def wrapped(name, step, before=None):
    def call(*args, **kwargs):
        if before:
            stamp(before)
        out = step(*args, **kwargs)
        stamp(name)
        if name == "match + write":
            dump()
        return out
    return call
replay.read_queries = wrapped("parse queries", replay.read_queries, before="command line")
replay.build_engine = wrapped("compile + install", replay.build_engine)
replay.read_events = wrapped("read events", replay.read_events)
replay.run = wrapped("match + write", replay.run)
sys.argv = ["scemon", *sys.argv[2:]]
try:
    process.cli()
finally:
    dump()  # if the last step was not reached: the parent says which were
"""


def _clock() -> float:
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def _children_cpu() -> float:
    # getrusage, not os.times: microseconds rather than clock ticks (10 ms here).
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Run:
    """One process's times: ``wall`` and ``cpu`` in seconds, and for a split run the
    seconds of wall, CPU and garbage collection of each of :data:`PHASES`."""

    def __init__(self, wall: float, cpu: float, phases: dict[str, tuple[float, float, float]] | None = None):
        self.wall = wall
        self.cpu = cpu
        self.phases = phases or {}


def _spawn(command: list[str], timeout: float) -> tuple[float, float, float]:
    """Run ``command`` from the checkout's root; (spawn time, wall s, CPU s)."""
    cpu = _children_cpu()
    began = _clock()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    ended = _clock()
    if result.returncode != 0:
        raise RuntimeError(f"scemon replay failed: {result.stderr.strip()}")
    return began, ended - began, _children_cpu() - cpu


def _replay_args(queries: Path, events: Path, out: Path) -> list[str]:
    return ["replay", "-q", str(queries), "-e", str(events), "-o", str(out)]


def time_whole(queries: Path, events: Path, out: Path, timeout: float = 600.0) -> Run:
    """``python -m service.cli replay`` on the files, as a user runs it."""
    _, wall, cpu = _spawn([sys.executable, "-m", "service.cli", *_replay_args(queries, events, out)], timeout)
    return Run(wall, cpu)


def time_split(queries: Path, events: Path, out: Path, timeout: float = 600.0) -> Run:
    """The same command through :data:`DRIVER`: the whole and each of :data:`PHASES`."""
    stamps_path = out.with_suffix(".stamps.json")
    command = [sys.executable, "-c", DRIVER, str(stamps_path), *_replay_args(queries, events, out)]
    began, wall, cpu = _spawn(command, timeout)
    stamps = json.loads(stamps_path.read_text())
    names = [name for name, _ in PHASES]
    if [s[0] for s in stamps] != names[:-1]:
        raise RuntimeError(f"scemon replay's steps changed: stamped {[s[0] for s in stamps]}")
    phases: dict[str, tuple[float, float, float]] = {}
    previous = (began, 0.0, 0.0)
    for name, at, cpu_at, gc_at in stamps:
        phases[name] = (at - previous[0], cpu_at - previous[1], gc_at - previous[2])
        previous = (at, cpu_at, gc_at)
    # The exit: from the last stamp to the end the parent saw; its CPU, the rest of the
    # child's (its collections after the last stamp are not seen).
    phases["exit"] = (began + wall - previous[0], cpu - previous[1], 0.0)
    return Run(wall, cpu, phases)


def startup_table(
    rounds: int = 5,
    workload: wl.Workload = GENERATE,
    n_events: int = N_EVENTS,
    progress: Callable[[float], None] | None = None,
) -> Table:
    """``rounds`` whole runs and ``rounds`` split runs, interleaved after one run of each
    to warm the files and the bytecode; the medians."""
    whole: list[Run] = []
    split: list[Run] = []
    # Wall time is what the target asks of, and what other work on the machine inflates
    # most: the note says how busy the machine was.
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="scemon-startup-") as tmp:
        folder = Path(tmp)
        queries, events = write_replay_files(workload, n_events, folder)
        out = folder / "matches.jsonl"
        time_whole(queries, events, out)
        time_split(queries, events, out)
        for r in range(rounds):
            whole.append(time_whole(queries, events, out))
            split.append(time_split(queries, events, out))
            if progress is not None:
                progress((r + 1) / rounds)
        with out.open("rb") as fh:
            matches = sum(1 for _ in fh)

    def median(values: list[float]) -> float:
        return statistics.median(values)

    table = Table(
        "startup",
        f"scemon replay of {workload.n_queries:,} queries over {n_events:,} events, end to end",
        ["phase", "covers", "wall_ms", "cpu_ms", "gc_ms", "share", "target", "met"],
    )
    total_wall = median([run.wall for run in split])
    for name, covers in PHASES:
        wall, cpu, collected = (median([run.phases[name][k] for run in split]) for k in range(3))
        table.add(
            phase=name,
            covers=covers,
            wall_ms=round(wall * 1000, 1),
            cpu_ms=round(cpu * 1000, 1),
            gc_ms=round(collected * 1000, 1),
            share=f"{wall / total_wall:.0%}",
            target="-",
            met="-",
        )
    table.add(
        phase="all (split run)",
        covers="the above",
        wall_ms=round(total_wall * 1000, 1),
        cpu_ms=round(median([run.cpu for run in split]) * 1000, 1),
        gc_ms=round(sum(median([run.phases[name][2] for run in split]) for name, _ in PHASES) * 1000, 1),
        share="100%",
        target="-",
        met="-",
    )
    whole_wall = median([run.wall for run in whole])
    table.add(
        phase="scemon replay",
        covers="the command alone, as a user runs it",
        wall_ms=round(whole_wall * 1000, 1),
        cpu_ms=round(median([run.cpu for run in whole]) * 1000, 1),
        gc_ms="-",
        share="-",
        target=f"<= {TARGET_S * 1000:.0f}",
        met="yes" if whole_wall <= TARGET_S else "NO",
    )
    registration = sum(
        median([run.phases[name][0] for run in split]) for name in ("parse queries", "compile + install")
    )
    table.notes.append(
        f"`scemon generate --queries {workload.n_queries} --events {n_events}` (template seq, "
        f"Ns={workload.n_sources}, Npc={workload.n_classes}, Nstep={workload.n_steps}, one event per "
        f"source every {workload.source_gap:g} s); {matches} matches; median of {rounds} runs of each "
        "kind, interleaved, each in a fresh process, after one of each to warm up; wall from the "
        "spawn to the exit, CPU the process's user + system time; gc_ms: the cyclic collector's "
        "time inside a phase (its collections at the exit are not seen). Registering the queries "
        f"(parse + compile + install): {registration * 1000:.0f} ms of the split run's "
        f"{total_wall * 1000:.0f} ms wall. Load average at the start: {load:.2f} on "
        f"{os.cpu_count()} cores."
    )
    return table
