"""``scemon bench ...``: benchmark commands that print tables (not timed tests).

``bench_app`` is a typer sub-app: one subcommand per benchmark, each turning its options
into a call to :mod:`service.bench`, where the work is, with a progress bar on the
terminal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ecq.evaluation.workload import FAMILIES
from service.bench import figures
from service.bench.report import publish
from service.bench.runner import Progress
from service.bench.table import Table
from service.cli.errors import fail
from service.cli.progress import LazyProgress

__all__ = ["bench_app"]

QuickOption = Annotated[
    bool, typer.Option("--quick", help="Small sizes (seconds), to check that everything works.")
]
OutOption = Annotated[
    Path | None,
    typer.Option(
        "--out", help="Folder for the CSV and PNG files [default: docs/bench, or build/bench-quick]."
    ),
]
EventsOption = Annotated[
    int | None,
    typer.Option("--events", min=100, help="Events measured per point, after a window of warm-up."),
]
CleanOption = Annotated[
    int | None, typer.Option("--clean-every", min=10, help="Cleaning period in events (not for `cleaning`).")
]
AgainstOption = Annotated[
    Path | None,
    typer.Option(
        "--against",
        exists=True,
        file_okay=False,
        help="Another checkout (git worktree add DIR <commit>) to measure beside this one.",
    ),
]

bench_app = typer.Typer(name="bench", help="Benchmarks: each prints a table.", no_args_is_help=True)


@bench_app.command("service")
def service(
    events: Annotated[int, typer.Option(help="Events posted per configuration.", min=100)] = 20_000,
    batch: Annotated[int, typer.Option(help="Events per batch.", min=1)] = 1_000,
    queries: Annotated[int, typer.Option(help="Sequence queries registered.", min=1)] = 100,
    subscribers: Annotated[str, typer.Option(help="Comma-separated subscriber counts.")] = "0,1,10",
) -> None:
    """Ingest events/s of a real server on 127.0.0.1, for JSON and Arrow batches, with 0,
    1 and 10 WebSocket subscribers. Starts the server in a subprocess on a temporary
    store and stops it at the end."""
    from service.bench.server import run

    counts = [int(part) for part in subscribers.split(",") if part.strip()]
    run(events=events, batch=batch, n_queries=queries, subscriber_counts=counts)


@bench_app.command("compile")
def compile_time(
    quick: QuickOption = False,
    out: OutOption = None,
    against: AgainstOption = None,
) -> None:
    """Registering one query: seconds to parse, compile, install and print it, against
    its size (an OR of up to 10,000 classes, a sequence of up to 2,000 components); and
    registering 1,000 to 100,000 queries of three workloads at once: queries/s of each
    phase and memory per query."""
    from service.bench import compile_time as bench

    Console(stderr=True).print("timing query registration ...", style="dim")
    publish(bench.run(quick, against), quick, out)


@bench_app.command("lateness")
def lateness(
    quick: QuickOption = False,
    out: OutOption = None,
    events: Annotated[
        int | None, typer.Option(min=100, help="Events per run [100,000; quick 5,000].")
    ] = None,
    queries: Annotated[
        int | None, typer.Option(min=1, help="Sequence queries registered [1,000; quick 100].")
    ] = None,
    disorder: Annotated[
        float, typer.Option(min=0.0, help="Seconds of event time by which the late stream is out of order.")
    ] = 60.0,
) -> None:
    """What event time costs: the bare engine (before) against the time keeper with and
    without an allowed lateness, on the stream in order and made late, side by side."""
    from service.bench.lateness import lateness_table

    n = events if events is not None else (5000 if quick else 100_000)
    n_queries = queries if queries is not None else (100 if quick else 1000)
    with LazyProgress(min_items=0, min_seconds=1.0) as bar:
        bar.phase("bench lateness", total=1000)
        table = lateness_table(
            n, n_queries, disorder, rounds=1 if quick else 5, progress=lambda f: bar.update(int(f * 1000))
        )
    publish([table], quick, out)


Figure = Callable[[figures.Scale, Progress | None], list[Table]]


def _measured(name: str, figure: Figure, scale: figures.Scale) -> list[Table]:
    """Run ``figure`` with a progress bar (on a terminal), closed before the tables print."""
    with LazyProgress(min_items=0, min_seconds=1.0) as bar:
        bar.phase(f"bench {name}", total=1000)
        return figure(scale, lambda fraction, _label: bar.update(int(fraction * 1000)))


def _run(figure: Figure, quick: bool, out: Path | None, events: int | None, clean_every: int | None) -> None:
    publish(_measured(figure.__name__, figure, figures.sized(quick, events, clean_every)), quick, out)


@bench_app.command("cleaning")
def cleaning(quick: QuickOption = False, out: OutOption = None, events: EventsOption = None) -> None:
    """Fig. 7: cleaning time and stored instances vs the cleaning period."""
    _run(figures.cleaning, quick, out, events, None)


@bench_app.command("queries")
def queries(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
    max_queries: Annotated[
        int,
        typer.Option(
            "--max-queries",
            min=0,
            help="Largest query count of the credit-card table (card_scale: 1,000, 10,000 and 100,000 "
            "queries); 0 leaves that table out.",
        ),
    ] = 100_002,
) -> None:
    """Fig. 8a: unit time vs number of queries (100-5K), every size in one interleaved run;
    then the credit-card workload of `make demo` at 1,000, 10,000 and 100,000 queries
    (card_scale): events/s, matches/s, registration time and peak memory of the shared
    engine, beside SP up to 10,000 queries, each engine and size in a process of its own."""
    scale = figures.sized(quick, events, clean_every)
    tables = _measured("queries", figures.queries, scale)
    if max_queries > 0:
        from service.bench.scale import card_scale

        def figure(scale: figures.Scale, progress: Progress | None) -> list[Table]:
            table = card_scale(scale, progress, max_queries)
            return [table] if table.rows else []  # no size within --max-queries

        tables += _measured("queries: card_scale", figure, scale)
    publish(tables, quick, out)


@bench_app.command("sources")
def sources(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
) -> None:
    """Fig. 8b: unit time vs number of sources (up to 5K)."""
    _run(figures.sources, quick, out, events, clean_every)


@bench_app.command("breakdown")
def breakdown(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
) -> None:
    """Fig. 9: time per phase (search, probe, evaluate, insert, clean) for the SP
    baseline and each ablation level of the shared engine."""
    _run(figures.breakdown, quick, out, events, clean_every)


@bench_app.command("storage")
def storage(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
) -> None:
    """Fig. 10: stored instances vs queries and vs sources."""
    _run(figures.storage, quick, out, events, clean_every)


@bench_app.command("classes")
def classes(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
) -> None:
    """Fig. 11: unit time vs number of classes (Npc 10-200) and sequence steps (Nstep)."""
    _run(figures.classes, quick, out, events, clean_every)


@bench_app.command("conjunction")
def conjunction(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
) -> None:
    """Figs. 12-13: CNJ3 queries, unit time and stored instances vs queries and sources."""
    _run(figures.conjunction, quick, out, events, clean_every)


@bench_app.command("disjunction")
def disjunction(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
) -> None:
    """Fig. 14: DSJ3 and DSJ5 queries, unit time vs queries and sources."""
    _run(figures.disjunction, quick, out, events, clean_every)


@bench_app.command("rate")
def rate(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
) -> None:
    """The workload's event rate: matches per event, unit times and storage vs the mean
    gap between two events of one source (why the default gap is 20 minutes)."""
    _run(figures.rate, quick, out, events, clean_every)


@bench_app.command("card")
def card(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
) -> None:
    """The credit-card workload of `make demo` (sequences with payment bounds and
    conjunctions): unit time vs queries and by kind of query, shared vs SP."""
    from service.bench.card import card as figure

    _run(figure, quick, out, events, clean_every)


@bench_app.command("conditions")
def conditions(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
) -> None:
    """Conditioned sequences: 0, 1 and 3 conditions per component from 100 to 10,000
    queries, on both kernels, with the filters' evaluation timed on its own."""
    from service.bench.operators import conditions as figure

    _run(figure, quick, out, events, clean_every)


@bench_app.command("operators")
def operators(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
    family: Annotated[
        list[str] | None,
        typer.Option(help=f"Only these families (repeat the option): {', '.join(FAMILIES)} [all]."),
    ] = None,
    queries: Annotated[
        list[int] | None,
        typer.Option(
            min=1,
            help="Only these numbers of queries (repeat the option) [100, 1,000 and 5,000; quick 20, 50, 100].",
        ),
    ] = None,
    sp_sample: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="SP above this many queries runs on that many of them, drawn at random, and is "
            "scaled up (SP shares nothing between queries) [1,000; quick 50].",
        ),
    ] = None,
    policy: Annotated[
        list[str] | None,
        typer.Option(
            help="Also the policy axis: these selection or consumption policies (repeat the option; "
            "'all' for every one) on the families that accept one, at 1,000 queries (else the middle "
            "number), vs MODE RECENT [none].",
        ),
    ] = None,
) -> None:
    """Each operator family (bare, conditions, CNJ3, a conjunction with a negated
    component, conjunctions sharing a condition across events, negation in the middle,
    leading and trailing, Kleene closure, nested) at 100, 1,000 and 5,000 queries,
    shared vs SP: events/s and matches/s, one table and one plot, and the families'
    targets (at 1,000 queries, else the middle number measured). SP at 5,000 queries is
    estimated from a sample of them (--sp-sample)."""
    from service.bench.operators import operators as figure

    scale = figures.sized(quick, events, clean_every)
    if family:
        unknown = [f for f in family if f not in FAMILIES]
        if unknown:
            fail(f"unknown family {unknown[0]!r} (expected one of {', '.join(FAMILIES)})")
        scale = replace(scale, families=tuple(dict.fromkeys(family)))
    if queries:
        scale = replace(scale, op_queries=tuple(sorted(set(queries))))
    if sp_sample is not None:
        scale = replace(scale, sp_sample=sp_sample)
    if policy:
        from service.bench.operators import POLICY_CLAUSES

        chosen = list(POLICY_CLAUSES) if "all" in policy else policy
        unknown = [p for p in chosen if p not in POLICY_CLAUSES]
        if unknown:
            fail(f"unknown policy {unknown[0]!r} (expected 'all' or one of {', '.join(POLICY_CLAUSES)})")
        scale = replace(scale, policies=tuple(dict.fromkeys(chosen)))
    publish(_measured("operators", figure, scale), quick, out)


@bench_app.command("ratio")
def ratio(
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
    replay_events: Annotated[
        int | None, typer.Option(min=100, help="Events for the timed `scemon replay` [200,000; quick 5,000].")
    ] = None,
    source_gap: Annotated[
        float | None,
        typer.Option(min=1.0, help="Mean seconds between two events of one source [the workload's default]."),
    ] = None,
) -> None:
    """The performance targets: SP/shared ratio at 5K queries, shared events/s at 1K and 5K
    queries, unit-time growth 100 -> 5K queries, storage 1K vs 5K queries, and `scemon
    replay` end to end (a generated file, a separate process) at 1K queries. Measures
    100,000 events after warm-up unless --events says otherwise."""
    from service.bench.replay import add_replay_row

    scale = figures.sized(quick, events, clean_every, source_gap)
    tables = _measured("ratio", figures.targets, scale)
    n_queries = scale.target_queries[1]
    n_events = replay_events if replay_events is not None else (5000 if quick else 200_000)
    Console(stderr=True).print(
        f"timing scemon replay: {n_queries} queries, {n_events} events ...", style="dim"
    )
    tables += _measured("ratio: the credit-card workload", _card_targets(tables[0]), scale)
    add_replay_row(tables[0], replace(scale.base, n_queries=n_queries), n_events)
    publish(tables, quick, out)


def _card_targets(table: Table) -> Figure:
    """The credit-card workload's rows of the targets' ``table``, as a figure that adds
    them (and returns no table of its own)."""
    from service.bench.card import card_rows

    def figure(scale: figures.Scale, progress: Progress | None) -> list[Table]:
        card_rows(table, scale, figures.Steps(progress, 2))
        return []

    return figure


@bench_app.command("all")
def all_figures(quick: QuickOption = False, out: OutOption = None) -> None:
    """Every figure, then the targets (long without --quick)."""
    for command in (
        cleaning,
        queries,
        sources,
        breakdown,
        storage,
        classes,
        conjunction,
        disjunction,
        rate,
        card,
        conditions,
        operators,
    ):
        command(quick=quick, out=out)
    ratio(quick=quick, out=out)


@bench_app.command("builds")
def builds(
    build: Annotated[
        list[str],
        typer.Option(
            "--build",
            help="NAME=PYTHON or NAME=PYTHON@CHECKOUT (default: this checkout), its compiled kernel built "
            "for PYTHON; twice or more. The first is the one the others are compared with.",
            show_default=False,
        ),
    ],
    quick: QuickOption = False,
    out: OutOption = None,
    events: EventsOption = None,
    clean_every: CleanOption = None,
    seed: Annotated[int, typer.Option(help="Seed of the order in which builds take each chunk.")] = 0,
    replay_events: Annotated[
        int | None, typer.Option(min=100, help="Events for the timed `scemon replay` [200,000; quick 5,000].")
    ] = None,
    replay_rounds: Annotated[
        int, typer.Option(min=0, help="Times each build runs `scemon replay` (0: not timed).")
    ] = 3,
) -> None:
    """Builds side by side: the targets' shared engines (100, 1K and 5K queries) of each
    build in a process of its own, over the same workload, every chunk of events to every
    build in a shuffled order; then `scemon replay` of one generated file (1K queries)
    end to end in each build, the builds in a shuffled order each round. For this build
    against an older checkout, or against itself on other interpreters."""
    from service.bench.builds import compare, parse_build, replay_compare

    try:
        parsed = [parse_build(text, Path.cwd()) for text in build]
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--build") from None
    if len(parsed) < 2:
        raise typer.BadParameter("give two builds or more", param_hint="--build")
    scale = figures.sized(quick, events, clean_every)
    workload = replace(scale.base, n_queries=max(scale.target_queries))
    warmup = scale.warmup if scale.warmup is not None else workload.window_events

    n_replay = replay_events if replay_events is not None else (5000 if quick else 200_000)
    # The engines' part is most of the run's time; the replays the rest.
    share = 0.7 if replay_rounds else 1.0

    def figure(_scale: figures.Scale, progress: Progress | None) -> list[Table]:
        def part(begin: float, width: float) -> Progress | None:
            if progress is None:
                return None
            return lambda done, label: progress(begin + width * done, label)

        tables = [
            compare(
                parsed,
                workload,
                scale.target_queries,
                scale.target_events,
                warmup,
                scale.clean_every,
                seed=seed,
                progress=part(0.0, share),
            )
        ]
        if replay_rounds:
            replayed = replace(scale.base, n_queries=scale.target_queries[1])
            tables.append(
                replay_compare(
                    parsed, replayed, n_replay, replay_rounds, seed=seed, progress=part(share, 1 - share)
                )
            )
        return tables

    publish(_measured("builds", figure, scale), quick, out)


@bench_app.command("pipeline")
def pipeline(
    quick: QuickOption = False,
    out: OutOption = None,
    events: Annotated[
        int | None,
        typer.Option(min=100, help="Events measured per row, after the warm-up [200,000; quick 3,000]."),
    ] = None,
    queries: Annotated[
        int | None, typer.Option(min=1, help="Queries per workload [1,000; quick 100].")
    ] = None,
    batch: Annotated[
        int | None, typer.Option(min=100, help="Events per post, file and micro-batch [10,000; quick 1,000].")
    ] = None,
    spark_batch_events: Annotated[
        int | None,
        typer.Option(
            min=100,
            help="Events per micro-batch of this build's Spark job (its --batch-events) [100,000; quick "
            "2,000]; a --baseline's job takes the same, or one file of --batch events per micro-batch where "
            "it predates --batch-events.",
        ),
    ] = None,
    workload: Annotated[
        list[str] | None,
        typer.Option(help="demo or seq; twice for both [both; quick: demo].", show_default=False),
    ] = None,
    subscribers: Annotated[
        str, typer.Option(help="Comma-separated subscriber counts of the service rows.")
    ] = "0,1,10",
    spark: Annotated[bool, typer.Option(help="Run the Spark job's row (scemon stream on local[2]).")] = True,
    profile: Annotated[
        bool,
        typer.Option(
            "--profile",
            help="Sample each server with py-spy (pip install py-spy) and add a table of its CPU per "
            "event by layer: decoding, engine, match rows, store, WebSocket, HTTP.",
        ),
    ] = False,
    baseline: Annotated[
        Path | None,
        typer.Option(
            help="Another checkout (its kernel built in place) whose server runs every server row "
            "again, right before this build's: before and after in one run.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """The whole path at the engine's speed: replay (the engine alone), the service over
    Arrow with 0, 1 and 10 WebSocket subscribers reading every match, and the Spark job
    end to end (files → scemon stream → service → 1 subscriber), each in events/s and as
    a ratio to replay, on the demo's workload and the paper's bare sequences; with the
    server's peak RSS, CPU seconds and post-to-frame latency (p50, p99)."""
    from service.bench.pipeline import FULL, QUICK, WORKLOADS, pipeline_tables

    base = QUICK if quick else FULL
    names = tuple(workload) if workload else base.workloads
    for name in names:
        if name not in WORKLOADS:
            raise typer.BadParameter(
                f"{name!r} is not one of {', '.join(WORKLOADS)}", param_hint="--workload"
            )
    try:
        counts = tuple(int(part) for part in subscribers.split(",") if part.strip())
    except ValueError:
        raise typer.BadParameter(
            f"{subscribers!r} is not a list of integers", param_hint="--subscribers"
        ) from None
    if any(n < 0 for n in counts):
        raise typer.BadParameter("subscriber counts cannot be negative", param_hint="--subscribers")
    if profile:
        from service.bench.profile import py_spy

        if py_spy() is None:
            raise typer.BadParameter("py-spy is not on PATH: pip install py-spy", param_hint="--profile")
    if baseline is not None and not (baseline / "service" / "cli" / "__main__.py").exists():
        raise typer.BadParameter(f"{baseline} is not a scemon checkout", param_hint="--baseline")
    scale = replace(
        base,
        profile=profile,
        baseline=baseline.resolve() if baseline is not None else None,
        events=events if events is not None else base.events,
        queries=queries if queries is not None else base.queries,
        batch=batch if batch is not None else base.batch,
        spark_batch=spark_batch_events if spark_batch_events is not None else base.spark_batch,
        subscribers=counts,
        workloads=names,
        spark=spark,
    )

    def figure(_scale: figures.Scale, progress: Progress | None) -> list[Table]:
        return pipeline_tables(scale, progress)

    publish(_measured("pipeline", figure, figures.sized(quick, None, None)), quick, out)


@bench_app.command("cluster")
def cluster(
    quick: QuickOption = False,
    out: OutOption = None,
    shards: Annotated[str, typer.Option(help="Comma-separated shard counts.")] = "1,2,4",
    events: Annotated[
        int | None, typer.Option(min=100, help="Events posted per row [40,000; quick 4,000].")
    ] = None,
    batch: Annotated[
        int | None, typer.Option(min=10, help="Events per micro-batch [5,000; quick 1,000].")
    ] = None,
    queries: Annotated[
        int | None, typer.Option(min=1, help="Queries registered through the cluster [1,000; quick 100].")
    ] = None,
) -> None:
    """A cluster on this machine: 1, 2 and 4 shards behind the Spark job's sink, with
    the time to register the queries once on every shard, events/s end to end (post to
    the merged subscriber) and per core, and the merged subscription's latency (p50,
    p99). The one-shard row is the reference."""
    from service.bench.cluster import run

    try:
        counts = tuple(int(part) for part in shards.split(",") if part.strip())
    except ValueError:
        raise typer.BadParameter(f"{shards!r} is not a list of integers", param_hint="--shards") from None
    if not counts or any(n < 1 for n in counts):
        raise typer.BadParameter("shard counts must be at least 1", param_hint="--shards")
    console = Console(stderr=True)
    table = run(
        shard_counts=counts,
        events=events if events is not None else (4_000 if quick else 40_000),
        batch=batch if batch is not None else (1_000 if quick else 5_000),
        n_queries=queries if queries is not None else (100 if quick else 1_000),
        progress=lambda what: console.print(f"cluster: {what}", style="dim"),
    )
    publish([table], quick, out)


@bench_app.command("partitions")
def partitions(quick: QuickOption = False, out: OutOption = None, events: EventsOption = None) -> None:
    """1,000 queries over 1, 2, 4, 8 partition keys: events/s and stored instances, shared vs SP."""
    from service.bench.partitions import partitions as figure

    with LazyProgress(min_items=0, min_seconds=1.0) as bar:
        bar.phase("bench partitions", total=1000)
        tables = figure(quick, events, lambda fraction, _label: bar.update(int(fraction * 1000)))
    publish(tables, quick, out)


@bench_app.command("restart")
def restart(
    quick: QuickOption = False,
    out: OutOption = None,
    sizes: Annotated[
        str | None,
        typer.Option(help="Comma-separated numbers of stored queries [1000,10000,100000; quick 200,1000]."),
    ] = None,
    events: Annotated[
        int | None,
        typer.Option(min=0, help="Events posted before the kill: the retained window [5,000; quick 1,000]."),
    ] = None,
    against: AgainstOption = None,
) -> None:
    """Seconds from starting the server to /readyz ok on a store of n queries with a
    window of events retained, after a SIGKILL: real servers on 127.0.0.1."""
    from service.bench import restart as bench

    counts = tuple(int(part) for part in sizes.split(",") if part.strip()) if sizes else None
    Console(stderr=True).print("timing restarts ...", style="dim")
    publish(bench.run(quick, counts, events, against), quick, out)


@bench_app.command("startup")
def startup(
    quick: QuickOption = False,
    out: OutOption = None,
    rounds: Annotated[
        int | None, typer.Option(min=1, help="Runs of each kind, the median kept [5; quick 1].")
    ] = None,
) -> None:
    """`scemon replay` of 1,000 queries over 20,000 events (`scemon generate`'s files),
    end to end in fresh processes: its wall and CPU time, and the same split into
    start-up, imports, parsing, compiling, reading, matching and exit."""
    from service.bench import startup as bench

    workload, n_events = bench.GENERATE, bench.N_EVENTS
    if quick:
        workload, n_events = replace(workload, n_queries=100), 2_000
    with LazyProgress(min_items=0, min_seconds=1.0) as bar:
        bar.phase("bench startup", total=1000)
        table = bench.startup_table(
            rounds or (1 if quick else 5), workload, n_events, lambda f: bar.update(int(f * 1000))
        )
    publish([table], quick, out)
