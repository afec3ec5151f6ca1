"""``scemon demo``: the whole system on one machine, from generated files to live matches.

    credit-card workload ─► payment files ─► Spark job (local[2]) ─► service ─► WebSocket
                                              micro-batches, Arrow      REST    subscriber

Everything it starts — the service child process, the Spark session, the subscriber
thread, the live feed — it stops in a ``finally``, by handle or pid, Ctrl-C included;
the temporary folder goes too unless ``--workdir`` was given, all but its ``logs/``
(the service's and Spark's logs, which the demo names). With ``--keep`` the service
stays up after the run, its web console open to look at, and payments go on streaming
through the job at ``--keep-rate`` events a second until Ctrl-C, so the console moves.
"""

from __future__ import annotations

import itertools
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
# With --keep: seconds between two files of the live feed, and the job's trigger.
_LIVE_EVERY = 2.0
# The payments the workload may yield: the run's, then the live feed's, for ever.
_ENDLESS = sys.maxsize


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
        keep_rate: int = 1000,
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
        self.keep_rate = keep_rate
        self.logs = self.workdir / "logs"

    def run(self) -> int:
        # Imported here, not with the module: `scemon --help` builds every command
        # (service/cli/app.py), and the client's and the server process's imports (httpx,
        # pydantic models) take 0.15-0.25 s.
        from api.client import Client
        from service.server.process import ServerProcess

        started = time.monotonic()
        say = self.console.print
        server: ServerProcess | None = None
        listener: MatchListener | None = None
        spark = None
        try:
            say(f"[bold]scemon demo[/] in {self.workdir}")
            queries, payments = self._generate()
            self.logs.mkdir(parents=True, exist_ok=True)
            server = ServerProcess(self.workdir / "data", port=self.port, log=self.logs / "server.log")
            server.start()
            say(f"service on {server.url} (log: {server.log}); its console: [bold]{server.url}/[/]")
            with Client(server.url) as client:
                t = time.monotonic()
                client.register_bulk([{"name": name, "text": text} for name, text in queries])
                say(f"registered {len(queries):,} queries in one bulk call ({time.monotonic() - t:.1f}s)")
            listener = MatchListener(server.url)
            listener.start()
            say(f"starting Spark (local[2]; its log: {self.logs / 'spark.log'}) ...")
            from service.pipeline.session import spark_session
            from service.pipeline.warmup import warm_up

            t = time.monotonic()
            with _stderr_to(self.logs / "spark.log"):  # the JVM keeps the stderr it starts with
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
            if self.keep_serving and self.keep_rate > 0:
                self._live(spark, server.url, listener, payments)
            elif self.keep_serving:
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
            self._clean_up()

    # ------------------------------------------------------------------------- steps

    def _generate(self) -> tuple[list[tuple[str, str]], Iterator[Any]]:
        """The workload's queries, its first ``n_events`` payments written as JSON Lines
        files, and the payments after them (in time order, for the live feed)."""
        t = time.monotonic()
        queries, events = credit_card_workload(
            n_cards=self.n_cards, n_classes=self.n_classes, n_queries=self.n_queries, n_events=_ENDLESS
        )
        source = self.workdir / "in"
        source.mkdir(parents=True, exist_ok=True)
        run = itertools.islice(events, self.n_events)
        per_file = -(-self.n_events // self.n_files)
        for k in range(self.n_files):
            if not _write_payments(source, k, itertools.islice(run, per_file)):
                break
        self.console.print(
            f"generated {self.n_events:,} payments of {self.n_cards:,} card holders at {self.n_classes} merchant "
            f"classes in {self.n_files} files, and {len(queries):,} queries ({time.monotonic() - t:.1f}s)"
        )
        return queries, events

    def _live(self, spark: Any, url: str, listener: MatchListener, payments: Iterator[Any]) -> None:
        """``--keep``: the service stays up and the stream goes on until Ctrl-C. A feeder
        thread writes a file of the workload's next payments every few seconds
        (``keep_rate`` a second), and the job, started again on the same checkpoint
        without ``--once``, takes each new file as it comes."""
        from service.pipeline.job import JobProgress, Pipeline
        from service.pipeline.options import JobOptions

        options = JobOptions(
            source=str(self.workdir / "in"),
            services=[url],
            checkpoint=str(self.workdir / "checkpoint"),
            dead_letter=str(self.workdir / "dead-letter"),
            trigger_seconds=_LIVE_EVERY,
            batch_events=self.batch_events,
        )
        self.console.print(
            f"\n[bold]the service stays up:[/] open [bold]{url}/[/] for its console "
            f"(API at {url}/docs); payments go on streaming, {self.keep_rate:,} a second; Ctrl-C stops it"
        )
        feeder = _Feeder(payments, self.workdir / "in", self.n_files, self.keep_rate, _LIVE_EVERY)
        columns = (
            TextColumn("live: {task.fields[events]:,} events · {task.fields[matches]:,} matches"),
            TimeElapsedColumn(),
        )
        try:
            with Progress(*columns, console=self.console, refresh_per_second=2) as bar:
                task = bar.add_task("live", events=0, matches=listener.total)

                def on_batch(p: JobProgress) -> None:
                    bar.update(task, events=p.events)

                ticker = _Ticker(lambda: bar.update(task, matches=listener.total))
                ticker.start()
                feeder.start()
                try:
                    Pipeline(spark, options, on_batch=on_batch).run()
                finally:
                    feeder.stop()
                    ticker.stop()
        except KeyboardInterrupt:
            self.console.print("stopping the service")

    def _clean_up(self) -> None:
        """A temporary folder goes, all but the logs the demo named."""
        if self.keep_files:
            return
        for child in self.workdir.iterdir() if self.workdir.exists() else ():
            if child != self.logs:
                if child.is_dir():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        if self.logs.exists():
            self.console.print(f"the logs are kept in {self.logs}")

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


def _write_payments(folder: Path, k: int, events: Iterator[Any]) -> int:
    """Write ``events`` as the file ``payments-<k>.jsonl``, whole at once (Spark skips dot
    files: written under a dot name, then renamed); how many it wrote."""
    lines = [orjson.dumps(e.to_dict()) for e in events]
    if lines:
        temp = folder / f".payments-{k:04d}.jsonl"
        temp.write_bytes(b"\n".join(lines) + b"\n")
        temp.rename(folder / f"payments-{k:04d}.jsonl")
    return len(lines)


class _Feeder:
    """``--keep``'s live feed: writes the next ``rate × every`` payments as a new file at
    once, then every ``every`` seconds from a :class:`_Ticker`, until :meth:`stop`."""

    def __init__(self, payments: Iterator[Any], folder: Path, first: int, rate: int, every: float) -> None:
        self._payments = payments
        self._folder = folder
        self._next = first
        self._per_file = max(1, round(rate * every))
        self._ticker = _Ticker(self._write_next, every)

    def start(self) -> None:
        self._write_next()
        self._ticker.start()

    def stop(self) -> None:
        self._ticker.stop()

    def _write_next(self) -> None:
        _write_payments(self._folder, self._next, itertools.islice(self._payments, self._per_file))
        self._next += 1


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
    """Calls ``tick`` every ``every`` seconds in a daemon thread (four times a second by
    default: the match count moves on the bar between Spark batches)."""

    def __init__(self, tick: Any, every: float = 0.25) -> None:
        self._tick = tick
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scemon-demo-tick", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        # On a schedule, not a wait after each tick: the rate stays steady however long a
        # tick takes (the live feed's ticks write a file).
        due = time.monotonic()
        while True:
            due += self._every
            if self._stop.wait(max(0.0, due - time.monotonic())):
                return
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
        typer.Option(
            "--keep",
            help="After the run, keep the service and its web console up until Ctrl-C, with payments "
            "streaming on through the job at --keep-rate.",
        ),
    ] = False,
    keep_rate: Annotated[
        int,
        typer.Option(
            min=0,
            help="With --keep: payments a second that go on streaming after the run, a file every "
            f"{_LIVE_EVERY:g} s (0: none, the service only stays up).",
        ),
    ] = 1000,
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
    prints; with --keep the service stays up after the run and payments go on streaming
    through the job at a steady rate (--keep-rate) until Ctrl-C, so its charts move.
    Ctrl-C stops everything it started. The service's and Spark's logs are kept in the
    logs folder of the work folder (which is otherwise removed unless --workdir is given).
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
            keep_rate=keep_rate,
        ).run()
    raise typer.Exit(code)
