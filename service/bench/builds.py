"""Builds of the engine side by side: ``scemon bench builds``.

A *build* is an interpreter and a checkout with its compiled kernel built for that
interpreter: this build against the one before (two checkouts, one interpreter), or
this build on CPython 3.11, 3.12 and 3.13 (one checkout, its kernel built for each).
Builds cannot share a process, so each runs in a worker process of its own
(``build_worker.py``, run by the build's interpreter with the build's checkout first on
its path). Every worker generates the same workload (checked by a digest) and holds one
shared engine per query count; the driver hands out the stream chunk by chunk, **each
chunk to every build in a shuffled order**, one worker at a time, so that a slow moment
of the machine hits every build alike and no build is always the one that runs second
(a fixed order biased earlier A/B runs by a few per cent). Cleaning runs at the same
stream positions for every engine and is timed with it; output delivery is not
(matches are counted and dropped). Each worker times by the clock and by its own CPU
time: on a machine that other work shares, a build can lose the core in the middle of
a chunk, which the clock counts against it and CPU time does not.

``replay_compare`` times what a user runs: ``scemon replay`` of one generated file,
end to end (start-up, reading, matching, writing), each build's command in a fresh
process, the builds in a shuffled order in every round.
"""

from __future__ import annotations

import json
import os
import random
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ecq.evaluation.workload import Workload
from service.bench.replay import write_replay_files
from service.bench.runner import Progress
from service.bench.table import Table

__all__ = ["Build", "parse_build", "compare", "replay_compare", "workload_spec"]

WORKER = Path(__file__).with_name("build_worker.py")


@dataclass(frozen=True)
class Build:
    """A name, an interpreter, and the checkout whose ``ecq`` it runs."""

    name: str
    python: str
    checkout: Path


def parse_build(text: str, default_checkout: Path) -> Build:
    """``NAME=PYTHON`` or ``NAME=PYTHON@CHECKOUT`` (default: this checkout)."""
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise ValueError(f"a build is NAME=PYTHON[@CHECKOUT], not {text!r}")
    python, _, checkout = rest.partition("@")
    # A path stays as given (a virtualenv's python is a link it must be run through),
    # made absolute: the worker runs in the build's checkout.
    if os.sep in python:
        python = str(Path(python).absolute())
    return Build(name, python, Path(checkout).resolve() if checkout else default_checkout)


def workload_spec(workload: Workload) -> dict[str, Any]:
    """The workload as the workers are told it: only the fields off their defaults. An
    older build's ``Workload`` may lack a field added since (its default is then the
    older build's behaviour); the stream digest check refuses builds whose defaults
    make different workloads."""
    return {
        f.name: getattr(workload, f.name) for f in fields(workload) if getattr(workload, f.name) != f.default
    }


def _env(build: Build) -> dict[str, str]:
    """The environment of a build's process: its checkout first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(build.checkout), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


class _Worker:
    def __init__(self, build: Build) -> None:
        self.build = build
        self.proc = subprocess.Popen(
            [build.python, str(WORKER)],
            cwd=build.checkout,
            env=_env(build),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, command: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"build {self.build.name}: the worker stopped (exit {self.proc.wait()})")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"build {self.build.name}: {answer['error']}")
        return answer

    def close(self) -> None:
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        if proc.poll() is None:
            try:
                proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                proc.stdin.flush()
            except BrokenPipeError:
                pass
        proc.stdin.close()
        proc.wait(timeout=60)
        proc.stdout.close()


def compare(
    builds: Sequence[Build],
    workload: Workload,
    query_counts: Sequence[int],
    events: int,
    warmup: int,
    clean_every: int,
    chunk: int = 1000,
    seed: int = 0,
    progress: Progress | None = None,
) -> Table:
    """Unit processing time per build and query count, over ``events`` events after
    ``warmup``, by the clock and by CPU time; ``vs_first`` and ``cpu_vs_first``: each
    over the first build's."""
    total = warmup + events
    workers = [_Worker(b) for b in builds]
    try:
        setup = {
            "op": "setup",
            "workload": workload_spec(workload),
            "queries": list(query_counts),
            "total": total,
        }
        infos = [w.ask(setup) for w in workers]
        for build, info in zip(builds, infos, strict=True):
            # Another checkout's engine (an editable install first on the path) would
            # make the comparison meaningless.
            if not Path(info["engine"]).resolve().is_relative_to(build.checkout):
                raise RuntimeError(f"build {build.name} runs {info['engine']}, not its checkout's engine")
        digests = {info["stream"] for info in infos}
        if len(digests) != 1:
            raise RuntimeError(f"the builds generate different workloads: {digests}")
        seconds = [[0.0] * len(query_counts) for _ in builds]
        cpu = [[0.0] * len(query_counts) for _ in builds]
        matches = [[0] * len(query_counts) for _ in builds]
        order = random.Random(seed)
        ends = sorted(
            set(range(chunk, total, chunk)) | set(range(clean_every, total, clean_every)) | {warmup, total}
        )
        begin = 0
        for end in ends:
            turn = list(range(len(workers)))
            order.shuffle(turn)
            for i in turn:
                got = workers[i].ask(
                    {"op": "chunk", "begin": begin, "end": end, "clean": end % clean_every == 0}
                )
                if begin >= warmup:
                    for j in range(len(query_counts)):
                        seconds[i][j] += got["seconds"][j]
                        cpu[i][j] += got["cpu"][j]
                        matches[i][j] += got["matches"][j]
            begin = end
            if progress is not None:
                progress(end / total, "builds")
    finally:
        for w in workers:
            w.close()
    table = Table(
        "builds",
        "Builds side by side: unit processing time (µs/event)",
        [
            "build",
            "python",
            "kernel",
            "queries",
            "shared_us",
            "events_per_s",
            "vs_first",
            "cpu_us",
            "cpu_vs_first",
            "matches_per_event",
        ],
    )
    for i, (build, info) in enumerate(zip(builds, infos, strict=True)):
        for j, n in enumerate(query_counts):
            us = seconds[i][j] / events * 1e6
            first = seconds[0][j] / events * 1e6
            cpu_us = cpu[i][j] / events * 1e6
            cpu_first = cpu[0][j] / events * 1e6
            table.add(
                build=build.name,
                python=info["python"],
                kernel=info["kernel"],
                queries=n,
                shared_us=round(us, 3),
                events_per_s=round(events / seconds[i][j]) if seconds[i][j] else 0,
                vs_first=round(us / first, 3) if first else 0.0,
                cpu_us=round(cpu_us, 3),
                cpu_vs_first=round(cpu_us / cpu_first, 3) if cpu_first else 0.0,
                matches_per_event=round(matches[i][j] / events, 3),
            )
    table.notes = [
        "builds, each in its own process: " + ", ".join(f"{b.name}={b.python}@{b.checkout}" for b in builds),
        f"queries {', '.join(str(n) for n in query_counts)}; Ns={workload.n_sources}, Npc={workload.n_classes}, "
        f"Nstep={workload.n_steps}, one event per source every {workload.source_gap:g} s",
        f"{events} events measured after {warmup} of warm-up, chunks of {chunk} to every build in shuffled "
        f"order (seed {seed}); cleaning every {clean_every} events",
    ]
    return table


def _check_engine(build: Build) -> None:
    """Refuse a build whose command would run another checkout's engine (an editable
    install first on the path): the comparison would be meaningless."""
    found = subprocess.run(
        [build.python, "-c", "import ecq, service.cli; print(ecq.__file__)"],
        cwd=build.checkout,
        env=_env(build),
        capture_output=True,
        text=True,
        timeout=120,
    )
    engine = found.stdout.strip()
    if found.returncode != 0 or not Path(engine).resolve().is_relative_to(build.checkout):
        shown = engine or (found.stderr.strip().splitlines() or ["no engine"])[-1]
        raise RuntimeError(f"build {build.name} runs {shown}, not its checkout's engine")


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def replay_compare(
    builds: Sequence[Build],
    workload: Workload,
    n_events: int,
    rounds: int,
    seed: int = 0,
    timeout: float = 3600.0,
    progress: Progress | None = None,
) -> Table:
    """``scemon replay`` of one generated file (``workload``'s queries, ``n_events``
    events) in each build, ``rounds`` times, the builds in a shuffled order each round:
    the median wall time and the median CPU time of the command's process."""
    for build in builds:
        _check_engine(build)
    wall: list[list[float]] = [[] for _ in builds]
    cpu: list[list[float]] = [[] for _ in builds]
    matches: list[int] = [0] * len(builds)
    order = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="scemon-bench-") as tmp:
        folder = Path(tmp)
        queries, events = write_replay_files(workload, n_events, folder)
        for r in range(rounds):
            turn = list(range(len(builds)))
            order.shuffle(turn)
            for done, i in enumerate(turn):
                build = builds[i]
                out = folder / f"matches-{i}.jsonl"
                command = [build.python, "-m", "service.cli", "replay", "-q", str(queries), "-e", str(events)]
                cpu_before, began = _children_cpu(), time.perf_counter()
                result = subprocess.run(
                    [*command, "-o", str(out)],
                    cwd=build.checkout,
                    env=_env(build),
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                )
                wall[i].append(time.perf_counter() - began)
                cpu[i].append(_children_cpu() - cpu_before)
                if result.returncode != 0:
                    raise RuntimeError(f"build {build.name}: scemon replay failed: {result.stderr.strip()}")
                with out.open("rb") as fh:
                    matches[i] = sum(1 for _ in fh)
                if progress is not None:
                    progress((r * len(builds) + done + 1) / (rounds * len(builds)), "replay")
    table = Table(
        "builds_replay",
        "Builds side by side: scemon replay end to end",
        ["build", "events_per_s", "vs_first", "cpu_s", "cpu_vs_first", "matches"],
    )
    first_wall, first_cpu = statistics.median(wall[0]), statistics.median(cpu[0])
    for i, build in enumerate(builds):
        w, c = statistics.median(wall[i]), statistics.median(cpu[i])
        table.add(
            build=build.name,
            events_per_s=round(n_events / w),
            vs_first=round(w / first_wall, 3),
            cpu_s=round(c, 3),
            cpu_vs_first=round(c / first_cpu, 3) if first_cpu else 0.0,
            matches=matches[i],
        )
    table.notes = [
        f"scemon replay of {workload.n_queries} queries and {n_events} events (one generated file), "
        f"{rounds} rounds, builds in shuffled order (seed {seed}); median wall time (process start, reading, "
        "matching, writing) and median CPU time of the command's process",
    ]
    return table
