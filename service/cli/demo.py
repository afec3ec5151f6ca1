"""``scemon demo``: the whole system on one machine, from generated files to live matches.

    credit-card workload ─► payment files ─► Spark job (local[2]) ─► service ─► WebSocket
                                              micro-batches, Arrow      REST    subscriber

Everything it starts — the service child process, the Spark session, the subscriber
thread — it stops in a ``finally``, by handle or pid, Ctrl-C included; the temporary
folder goes too unless ``--workdir`` was given. With ``--keep`` the service stays up
after the run, its web console open to look at, until Ctrl-C.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ecq.evaluation.workload import PAPER_CARD_QUERIES, credit_card_workload
from service.cli.collector import freeze_so_far, tuned_collector
from service.cli.errors import SPARK_MISSING, user_errors

__all__ = ["Demo", "MatchListener", "demo"]

_PAPER = {name for name, _ in PAPER_CARD_QUERIES}
# Seconds between the kept service's checks for Ctrl-C (Demo._serve).
_SERVE_TICK = 0.25


class MatchListener:
    """Counts the matches arriving over the WebSocket, per query, and keeps a few of each
    paper query (and of the rest) to show. Runs in a daemon thread until :meth:`stop`."""

    def __init__(self, url: str, keep: int = 3) -> None:
        self.url = url
        self.keep = keep
        self.total = 0
        self.per_query: Counter[str] = Counter()
        self.samples: list[dict[str, Any]] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scemon-demo-ws", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        # idle_timeout ends the iteration now and then so the stop flag is seen; the
        # subscription resumes from its last seq, so nothing is counted twice.
        from api.client import SyncSubscription  # here: the client (httpx, pydantic) is slow to import

        subscription = SyncSubscription(self.url, from_seq=0, idle_timeout=0.5)
        try:
            while not self._stop.is_set():
                # A message's matches at a time: this thread shares the job's
                # interpreter, and a step per match took its time from the job's.
                for matches in subscription.batches():
                    self.per_query.update(match["query"] for match in matches)
                    self.total += len(matches)
                    for match in matches:
                        if match["query"] in _PAPER or len(self.samples) < self.keep:
                            self._sample(match)
                    if self._stop.is_set():
                        return
        except Exception as err:  # shown in the summary; the demo then exits 1
            self.error = err

    def _sample(self, match: dict[str, Any]) -> None:
        """Keep the first ``keep`` matches of each paper query (and of the rest)."""
        kept = sum(1 for m in self.samples if m["query"] == match["query"])
        if kept < self.keep:
            self.samples.append(match)


class Demo:
    """One run of the demo; :meth:`run` returns the exit status."""

    def __init__(
        self,
        n_events: int = 120_000,
        n_files: int = 12,
        files_per_batch: int | None = None,
        batch_events: int = 100_000,
        n_queries: int = 1000,
        n_cards: int = 1000,
        n_classes: int = 50,
        workdir: Path | None = None,
        console: Console | None = None,
        keep_serving: bool = False,
        port: int | None = None,
    ) -> None:
        self.n_events = n_events
        self.n_files = n_files
        self.files_per_batch = files_per_batch
        self.batch_events = batch_events
        self.n_queries = n_queries
        self.n_cards = n_cards
        self.n_classes = n_classes
        self.keep_files = workdir is not None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="scemon-demo-"))
        self.console = console or Console()
        self.keep_serving = keep_serving
        self.port = port

    def run(self) -> int:
        # Imported here, not with the module: every `scemon` command imports this module
        # (service/cli/app.py), and the client's and the server process's imports (httpx,
        # pydantic models) took 0.15-0.25 s of each command's start-up.
        from api.client import Client
        from service.server.process import ServerProcess

        started = time.monotonic()
        say = self.console.print
        server: ServerProcess | None = None
        listener: MatchListener | None = None
        spark = None
        try:
            say(f"[bold]scemon demo[/] in {self.workdir}")
            queries = self._generate()
            server = ServerProcess(self.workdir / "data", port=self.port, log=self.workdir / "server.log")
            server.start()
            say(f"service on {server.url} (log: {server.log}); its console: [bold]{server.url}/[/]")
            with Client(server.url) as client:
                t = time.monotonic()
                client.register_bulk([{"name": name, "text": text} for name, text in queries])
                say(f"registered {len(queries):,} queries in one bulk call ({time.monotonic() - t:.1f}s)")
            listener = MatchListener(server.url)
            listener.start()
            say(f"starting Spark (local[2]; its log: {self.workdir / 'spark.log'}) ...")
            from service.pipeline.session import spark_session
            from service.pipeline.warmup import warm_up

            t = time.monotonic()
            with _stderr_to(self.workdir / "spark.log"):  # the JVM keeps the stderr it starts with
                spark = spark_session()
            session_seconds = time.monotonic() - t
            warm_seconds = warm_up(spark)
            spark_start = session_seconds + warm_seconds
            say(
                f"Spark started in {spark_start:.1f}s (session {session_seconds:.1f}s, its Python workers and "
                f"the job's plan warmed on a sample {warm_seconds:.1f}s); now the stream"
            )
            # Timed from here: the job's rate, Spark's one-time start-up shown apart
            # (service.pipeline.warmup says why).
            with tuned_collector():
                freeze_so_far()  # the driver's modules, the session, the client
                stream_started = time.monotonic()
                totals = self._stream(spark, server.url, listener)
                streamed = time.monotonic() - stream_started
            self._drain(listener, totals.matches)
            self._summary(queries, totals, listener, streamed, spark_start, time.monotonic() - started)
            code = 0 if listener.error is None and listener.total == totals.matches else 1
            if self.keep_serving:
                spark.stop()
                spark = None
                self._serve(server.url)
            return code
        except KeyboardInterrupt:
            say("\n[yellow]interrupted: stopping what the demo started[/]")
            return 130
        finally:
            if listener is not None:
                listener.stop()
            if spark is not None:
                spark.stop()
            if server is not None:
                server.stop()
            if not self.keep_files:
                shutil.rmtree(self.workdir, ignore_errors=True)

    # ------------------------------------------------------------------------- steps

    def _generate(self) -> list[tuple[str, str]]:
        """The workload's queries; its payments written as JSON Lines files."""
        t = time.monotonic()
        queries, events = credit_card_workload(
            n_cards=self.n_cards, n_classes=self.n_classes, n_queries=self.n_queries, n_events=self.n_events
        )
        source = self.workdir / "in"
        source.mkdir(parents=True, exist_ok=True)
        per_file = -(-self.n_events // self.n_files)
        for k in range(self.n_files):
            chunk = [orjson.dumps(e.to_dict()) for _, e in zip(range(per_file), events, strict=False)]
            if not chunk:
                break
            temp = source / f".payments-{k:04d}.jsonl"  # Spark skips dot files: rename when whole
            temp.write_bytes(b"\n".join(chunk) + b"\n")
            temp.rename(source / f"payments-{k:04d}.jsonl")
        self.console.print(
            f"generated {self.n_events:,} payments of {self.n_cards:,} card holders at {self.n_classes} merchant "
            f"classes in {self.n_files} files, and {len(queries):,} queries ({time.monotonic() - t:.1f}s)"
        )
        return queries

    def _stream(self, spark: Any, url: str, listener: MatchListener) -> Any:
        from service.pipeline.job import JobProgress, Pipeline
        from service.pipeline.options import JobOptions

        options = JobOptions(
            source=str(self.workdir / "in"),
            services=[url],
            checkpoint=str(self.workdir / "checkpoint"),
            dead_letter=str(self.workdir / "dead-letter"),
            once=True,
            max_files_per_trigger=self.files_per_batch,
            batch_events=self.batch_events,
        )
        columns = (
            BarColumn(bar_width=16),
            TextColumn("{task.completed:,}/{task.total:,} events · {task.fields[batches]} batches"),
            TextColumn("· {task.fields[matches]:,} matches · {task.fields[rate]:,.0f} events/s"),
            TimeElapsedColumn(),
        )
        t0 = time.monotonic()
        with Progress(*columns, console=self.console, refresh_per_second=4) as bar:
            task = bar.add_task("stream", total=self.n_events, batches=0, matches=0, rate=0.0)

            def on_batch(p: JobProgress) -> None:
                rate = p.events / max(time.monotonic() - t0, 1e-9)
                bar.update(task, completed=p.events + p.bad_rows, batches=p.batches, rate=rate)

            ticker = _Ticker(lambda: bar.update(task, matches=listener.total))
            ticker.start()
            try:
                return Pipeline(spark, options, on_batch=on_batch).run()
            finally:
                ticker.stop()
                bar.update(task, matches=listener.total)

    def _serve(self, url: str) -> None:
        """Keep the service up for a person to look at, until Ctrl-C."""
        self.console.print(
            f"\n[bold]the service stays up:[/] open [bold]{url}/[/] for its console "
            f"(API at {url}/docs); Ctrl-C stops it"
        )
        try:
            # Short sleeps, not one long one: Ctrl-C's SIGINT may be delivered to any of
            # the process's threads (the WebSocket listener's, py4j's, pyarrow's), and
            # Python runs the handler in the main thread only when it next wakes, so a
            # sleep of an hour slept on (the likely cause of the one time the demo's
            # Ctrl-C test waited a minute for the demo to stop).
            while True:
                time.sleep(_SERVE_TICK)
        except KeyboardInterrupt:
            self.console.print("stopping the service")

    def _drain(self, listener: MatchListener, expected: int, timeout: float = 30.0) -> None:
        """Wait for the WebSocket to deliver every match the posts reported."""
        deadline = time.monotonic() + timeout
        while listener.total < expected and listener.error is None and time.monotonic() < deadline:
            time.sleep(0.1)

    def _summary(
        self,
        queries: list[tuple[str, str]],
        totals: Any,
        listener: MatchListener,
        streamed: float,
        spark_start: float,
        wall: float,
    ) -> None:
        table = Table(title="scemon demo", show_header=False, title_justify="left")
        table.add_column(style="bold")
        table.add_column(justify="right")
        rows = [
            ("card holders · merchant classes", f"{self.n_cards:,} · {self.n_classes}"),
            ("queries registered", f"{len(queries):,}"),
            ("events streamed", f"{totals.events:,}"),
            ("bad rows (dead letters)", f"{totals.bad_rows:,}"),
            ("Spark micro-batches · posts", f"{totals.batches} · {totals.posts}"),
            ("matches (posts said · WebSocket got)", f"{totals.matches:,} · {listener.total:,}"),
            ("queries with a match", f"{len(listener.per_query):,}"),
        ]
        rows += [(f"  {name}", f"{listener.per_query[name]:,}") for name, _ in PAPER_CARD_QUERIES]
        rows += [
            ("Spark start-up (once: session, workers, plan)", f"{spark_start:.1f}s"),
            ("streaming time", f"{streamed:.1f}s"),
            ("events/s (Spark job → service, end to end)", f"{totals.events / max(streamed, 1e-9):,.0f}"),
            ("whole demo", f"{wall:.1f}s"),
        ]
        for name, value in rows:
            table.add_row(name, value)
        self.console.print(table)
        shown = [m for m in listener.samples if m["query"] in _PAPER] or listener.samples
        for match in shown[:4]:
            self.console.print(_match_line(match), highlight=False)
        if listener.error is not None:
            self.console.print(f"[red]the WebSocket subscription failed: {listener.error}[/]")


def _match_line(match: dict[str, Any]) -> str:
    events = ", ".join(str(e) for e in match["events"])
    return (
        f"  match #{match['seq']} {match['query']}: {match['src']} "
        f"[{match['start']:,.0f}s .. {match['end']:,.0f}s] events {events}"
    )


@contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """Point file descriptor 2 at ``path`` for the block (children started in it keep it)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with path.open("ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


class _Ticker:
    """Calls ``tick`` four times a second in a daemon thread: the match count moves on
    the bar between Spark batches."""

    def __init__(self, tick: Any, every: float = 0.25) -> None:
        self._tick = tick
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scemon-demo-tick", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self._tick()


def demo(
    events: Annotated[int, typer.Option(min=1000, help="Card payments to generate and stream.")] = 120_000,
    files: Annotated[int, typer.Option(min=1, help="Files the payments are written to.")] = 12,
    files_per_batch: Annotated[
        int | None,
        typer.Option(
            min=1, help="Files per Spark micro-batch (default: --batch-events decides).", show_default=False
        ),
    ] = None,
    batch_events: Annotated[
        int, typer.Option(min=1, help="About this many events per Spark micro-batch.")
    ] = 100_000,
    queries: Annotated[int, typer.Option(min=0, help="Generated purchasing-pattern queries.")] = 1000,
    workdir: Annotated[
        Path | None,
        typer.Option(help="Keep the files, store and checkpoint here (default: a temporary folder)."),
    ] = None,
    keep: Annotated[
        bool,
        typer.Option("--keep", help="After the run, keep the service and its web console up until Ctrl-C."),
    ] = False,
    port: Annotated[
        int | None, typer.Option(min=1, max=65535, help="The service's port (default: a free one).")
    ] = None,
) -> None:
    """Run the whole system end to end on this machine, in about half a minute.

    Generates the SCEMon paper's credit-card workload (1,000 card holders, 50 merchant
    classes, payments), starts a scemon service on a free loopback port, registers the
    paper's two example queries and 1,000 generated ones over REST, subscribes to the
    matches over WebSocket, streams the payment files through the Spark job, and shows
    progress, a summary and a few matches. The service's web console is at the address it
    prints; with --keep the service stays up after the run until Ctrl-C, so you can look.
    Ctrl-C stops everything it started.
    """
    with user_errors(SPARK_MISSING):
        code = Demo(
            n_events=events,
            n_files=files,
            files_per_batch=files_per_batch,
            batch_events=batch_events,
            n_queries=queries,
            workdir=workdir,
            keep_serving=keep,
            port=port,
        ).run()
    raise typer.Exit(code)
