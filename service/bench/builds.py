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
(matches are counted and dropped).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ecq.workload import Workload
from service.bench.runner import Progress
from service.bench.table import Table

__all__ = ["Build", "parse_build", "compare"]

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


class _Worker:
    def __init__(self, build: Build) -> None:
        self.build = build
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(build.checkout), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        )
        self.proc = subprocess.Popen(
            [build.python, str(WORKER)],
            cwd=build.checkout,
            env=env,
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
    ``warmup``; ``vs_first``: the unit time over the first build's."""
    total = warmup + events
    workers = [_Worker(b) for b in builds]
    try:
        setup = {
            "op": "setup",
            "workload": asdict(workload),
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
            "matches_per_event",
        ],
    )
    for i, (build, info) in enumerate(zip(builds, infos, strict=True)):
        for j, n in enumerate(query_counts):
            us = seconds[i][j] / events * 1e6
            first = seconds[0][j] / events * 1e6
            table.add(
                build=build.name,
                python=info["python"],
                kernel=info["kernel"],
                queries=n,
                shared_us=round(us, 3),
                events_per_s=round(events / seconds[i][j]) if seconds[i][j] else 0,
                vs_first=round(us / first, 3) if first else 0.0,
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
