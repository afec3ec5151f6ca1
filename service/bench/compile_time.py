"""``scemon bench compile``: what registering a query costs against its size, and what
registering many costs against their number.

Each point is one query — an ``OR`` of n classes, or a sequence of n components — taken
through what the service does with it: parse the text, compile it, install it in an
engine, print its canonical text. Every phase is timed separately, after a full garbage
collection, best of a few runs for the small sizes.

``against``: the folder of another checkout (``git worktree add /tmp/old <commit>``);
each point is measured there too, in a subprocess that imports that checkout's ``ecq``,
so an old and a new build are compared in one run. The measuring code below uses only
the engine's public calls (``parse_query``, ``Engine.compile``, ``Engine.register``,
``format_query``), which both sides have.

``compile_scale``: registering 1,000, 10,000 and 100,000 queries of three workloads —
the paper's sequences, the same with a condition on each component, and the demo's
credit-card queries — as the engine registers texts: compile every text
(``Engine.compile``: a query of a shape compiled before is made from its tokens, its
syntax tree not built), install them in one ``Engine.register_many``. Queries per
second of CPU time for each phase and for the whole, and the process's resident memory
grown per query; then the time to read each query's tree (parsed then), what the
service adds for the canonical text it prints. Each point runs in a fresh process (its
memory and the caches of query shapes start empty), its engine made before the clock.
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

__all__ = ["PHASES", "SCALE_SIZES", "SCALE_WORKLOADS", "SIZES", "measure", "measure_scale", "run", "text_of"]

PHASES = ("parse", "compile", "install", "text")
SIZES = {"or": (1000, 2000, 4000, 10_000), "seq": (250, 500, 1000, 2000)}
QUICK_SIZES = {"or": (250, 500, 1000), "seq": (100, 250, 500)}
SCALE_WORKLOADS = ("sequences", "conditions", "card")
SCALE_SIZES = (1000, 10_000, 100_000)
QUICK_SCALE_SIZES = (200, 1000)
# Fresh processes measured per point, the one of median total time kept: a point of
# 1,000 queries lasts about 50 ms, which one slow moment of the machine moves by a tenth.
_RUNS_BELOW_100K = 5
SCALE_PHASES = ("compile", "install")
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
    try:
        return _in_fresh_process("measure", (kind, n), str(checkout), checkout, f"measuring in {checkout}")
    except subprocess.TimeoutExpired:
        return None


def _in_fresh_process(
    function: str, args: tuple[str, int], pythonpath: str, cwd: Path | None, what: str
) -> dict[str, float]:
    """``function`` of this file called with ``args`` in a fresh interpreter whose path is
    ``pythonpath``: its JSON result, the last line it prints. Raises RuntimeError saying
    ``what`` failed, or subprocess.TimeoutExpired."""
    code = (
        "import json, runpy; "
        f"m = runpy.run_path({str(Path(__file__))!r}); "
        f"print(json.dumps(m[{function!r}](*{args!r})))"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": pythonpath},
            capture_output=True,
            text=True,
            timeout=AGAINST_TIMEOUT,
            check=True,
        )
    except subprocess.CalledProcessError as err:
        raise RuntimeError(f"{what} failed: {err.stderr.strip()[-500:]}") from None
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
    tables.append(run_scale(quick))
    return tables


def scale_queries(workload: str, n: int) -> list[tuple[str, str]]:
    """``n`` queries ``(name, text)`` of a workload of ``compile_scale``."""
    from ecq.evaluation.workload import Workload, condition_queries, credit_card_workload, sequence_queries

    w = Workload(n_queries=n)
    if workload == "sequences":
        return sequence_queries(w)
    if workload == "conditions":
        return condition_queries(w, 1)
    if workload == "card":
        return credit_card_workload(n_queries=n)[0][:n]
    raise ValueError(f"unknown workload {workload!r} (one of {', '.join(SCALE_WORKLOADS)})")


def _rss() -> int:
    """This process's resident memory in bytes (Linux; 0 where unknown)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def measure_scale(workload: str, n: int) -> dict[str, float]:
    """CPU seconds of each phase (compile, install) for ``n`` queries of ``workload``,
    the resident bytes the process grew by (``rss``), and then the CPU seconds to read
    every query's syntax tree (``tree``), in this process."""
    from ecq.collector import collector_paused
    from ecq.engine import Engine
    from ecq.language.lexer import compiled_lexer

    queries = scale_queries(workload, n)
    # Made before the clock, as a service makes its engine at start: the first engine
    # of a process loads the compiled kernel's modules, and the first query the
    # compiled lexer (about 4 ms between them, 4 µs a query of 1,000).
    engine = Engine()
    compiled_lexer()
    gc.collect()
    before = _rss()
    # As the service compiles a batch (service.server.host.prepare): the collector
    # paused, as Engine.register_many pauses it for installing.
    with collector_paused():
        t0 = time.process_time()
        compiled = [(name, Engine.compile(name, text, "#0")) for name, text in queries]
        t1 = time.process_time()
    engine.register_many(compiled)
    t2 = time.process_time()
    gc.collect()
    grown = _rss() - before
    assert len(engine.key_of) == n
    with collector_paused():
        t3 = time.process_time()
        for _, cq in compiled:
            cq.ast  # noqa: B018 - parsed when first read
        t4 = time.process_time()
    return {"compile": t1 - t0, "install": t2 - t1, "rss": float(max(grown, 0)), "tree": t4 - t3}


def measure_scale_fresh(workload: str, n: int) -> dict[str, float]:
    """:func:`measure_scale` in a fresh process running this checkout's ``ecq``."""
    here = Path(__file__).resolve().parents[2]
    path = os.pathsep.join(filter(None, [str(here), os.environ.get("PYTHONPATH")]))
    return _in_fresh_process(
        "measure_scale", (workload, n), path, None, f"measuring {workload} at {n} queries"
    )


def _median_run(workload: str, n: int, runs: int) -> dict[str, float]:
    """:func:`measure_scale_fresh` ``runs`` times; the run whose total time (compile and
    install) is the median."""
    got = sorted(
        (measure_scale_fresh(workload, n) for _ in range(runs)),
        key=lambda r: sum(r[p] for p in SCALE_PHASES),
    )
    return got[len(got) // 2]


def run_scale(quick: bool = False) -> Table:
    """The ``compile_scale`` table: per workload and number of queries, queries per CPU
    second of each phase and in all, and resident memory per query."""
    from service.bench.table import Plot, Table

    columns = [
        "workload",
        "queries",
        *(f"{p}_qps" for p in SCALE_PHASES),
        "total_qps",
        *(f"{p}_us" for p in SCALE_PHASES),
        "tree_us",
        "kb_per_query",
    ]
    table = Table(
        "compile_scale",
        "Registering many queries at once: queries per second by phase",
        columns,
        plot=Plot(
            x="queries",
            series=("total_qps",),
            group="workload",
            y_label="queries per CPU second (parse + compile + install)",
            x_label="queries registered",
            x_log=True,
            y_log=True,
        ),
        notes=[
            "sequences: the paper's 3-step sequences; conditions: the same with a bound on each "
            "component (every query its own constants); card: the demo's credit-card queries",
            "compile: Engine.compile of each text, parsing included (a query of a shape compiled "
            "before is made from its tokens and that compiled form, its syntax tree not built), with the "
            "cyclic collector paused, as the service compiles a batch; install: one Engine.register_many "
            "of the compiled queries",
            "qps: queries per CPU second of the phase; us: CPU microseconds per query; tree_us: then "
            "reading each query's syntax tree (parsed when first read: what the service adds to print "
            "each query's canonical text); kb_per_query: the process's resident memory grown from before "
            "compiling to after registering, per query; each point in a fresh process, its engine made "
            "before the clock (as a service makes its engine at start: the first loads the compiled kernel); "
            f"below 100,000 queries, the run of median total time of {_RUNS_BELOW_100K} such processes",
        ],
    )
    for workload in SCALE_WORKLOADS:
        for n in QUICK_SCALE_SIZES if quick else SCALE_SIZES:
            got = _median_run(workload, n, 1 if quick or n >= 100_000 else _RUNS_BELOW_100K)
            total = sum(got[p] for p in SCALE_PHASES)
            table.add(
                workload=workload,
                queries=n,
                **{f"{p}_qps": round(n / got[p]) if got[p] > 0 else "" for p in SCALE_PHASES},
                total_qps=round(n / total) if total > 0 else "",
                **{f"{p}_us": round(1e6 * got[p] / n, 1) for p in SCALE_PHASES},
                tree_us=round(1e6 * got["tree"] / n, 1),
                kb_per_query=round(got["rss"] / n / 1024, 2),
            )
    return table
