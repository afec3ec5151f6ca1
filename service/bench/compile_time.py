"""``scemon bench compile``: what registering a query costs against its size.

Each point is one query — an ``OR`` of n classes, or a sequence of n components — taken
through what the service does with it: parse the text, compile it, install it in an
engine, print its canonical text. Every phase is timed separately, after a full garbage
collection, best of a few runs for the small sizes.

``against``: the folder of another checkout (``git worktree add /tmp/old <commit>``);
each point is measured there too, in a subprocess that imports that checkout's ``ecq``,
so an old and a new build are compared in one run. The measuring code below uses only
the engine's public calls (``parse_query``, ``Engine.compile``, ``Engine.register``,
``format_query``), which both sides have.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.bench.table import Table

__all__ = ["PHASES", "SIZES", "measure", "run", "text_of"]

PHASES = ("parse", "compile", "install", "text")
SIZES = {"or": (1000, 2000, 4000, 10_000), "seq": (250, 500, 1000, 2000)}
QUICK_SIZES = {"or": (250, 500, 1000), "seq": (100, 250, 500)}
# A point measured on the other build that takes longer than this is cut off.
AGAINST_TIMEOUT = 600.0


def text_of(kind: str, n: int) -> str:
    if kind == "or":
        return "OR(" + ", ".join(f"C{i}" for i in range(n)) + ")"
    return "SEQ(" + ", ".join(f"C{i}" for i in range(n)) + ") WITHIN 10 s"


def measure(kind: str, n: int) -> dict[str, float]:
    """Seconds per phase for one query, in this process (whatever ``ecq`` it imports)."""
    from ecq.engine import Engine
    from ecq.language import format_query, parse_query

    text = text_of(kind, n)
    best: dict[str, float] = {}
    for _ in range(3):
        gc.collect()
        t0 = time.perf_counter()
        ast = parse_query(text)
        t1 = time.perf_counter()
        cq = Engine.compile("q", ast)
        t2 = time.perf_counter()
        Engine().register("q", cq)
        t3 = time.perf_counter()
        format_query(ast)
        t4 = time.perf_counter()
        times = dict(zip(PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True))
        best = {k: min(v, best.get(k, v)) for k, v in times.items()}
        if t4 - t0 > 1.0:  # one run is enough where noise is small beside the time
            break
    return best


def measure_in(checkout: Path, kind: str, n: int) -> dict[str, float] | None:
    """:func:`measure` in a subprocess on another checkout; None if it ran out of time."""
    code = (
        "import json, runpy; "
        f"m = runpy.run_path({str(Path(__file__))!r}); "
        f"print(json.dumps(m['measure']({kind!r}, {n})))"
    )
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=AGAINST_TIMEOUT,
            check=True,
        )
    except subprocess.TimeoutExpired:
        return None
    except subprocess.CalledProcessError as err:
        raise RuntimeError(f"measuring in {checkout} failed: {err.stderr.strip()[-500:]}") from None
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run(quick: bool = False, against: Path | None = None) -> list[Table]:
    """Two tables (``OR`` of n classes, sequence of n components): milliseconds per phase
    against n, and the total on ``against`` when given."""
    from service.bench.table import Plot, Table

    what = {"or": "an OR of n classes", "seq": "a sequence of n components"}
    sizes = QUICK_SIZES if quick else SIZES
    tables = []
    for kind, ns in sizes.items():
        columns = ["n", *(f"{p}_ms" for p in PHASES), "total_ms"]
        if against is not None:
            columns.append("other_total_ms")
        table = Table(
            f"compile_{kind}",
            f"Registering {what[kind]}: milliseconds per phase",
            columns,
            plot=Plot(
                x="n",
                series=tuple(c for c in columns if c.endswith("_ms")),
                y_label="milliseconds",
                x_label=f"n ({text_of(kind, 2).replace('C1', '..., Cn-1')})",
                x_log=True,
                y_log=True,
            ),
            notes=[
                "parse: text to AST; compile: Engine.compile; install: Engine.register of the "
                "compiled query; text: its canonical text (format_query); best of 3 under 1 s",
            ],
        )
        if against is not None:
            table.notes.append(f"other_total_ms: the same on the checkout in {against} (blank: over 600 s)")
        for n in ns:
            times = measure(kind, n)
            row: dict[str, int | float | str] = {
                "n": n,
                **{f"{p}_ms": round(1000 * times[p], 1) for p in PHASES},
                "total_ms": round(1000 * sum(times.values()), 1),
            }
            if against is not None:
                other = measure_in(against, kind, n)
                row["other_total_ms"] = round(1000 * sum(other.values()), 1) if other is not None else ""
            table.add(**row)
        tables.append(table)
    return tables
