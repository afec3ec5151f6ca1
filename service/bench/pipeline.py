"""``scemon bench pipeline``: the whole path, measured against the engine alone.

For each workload (the demo's card payments and the paper's bare sequences, the same
events for every row) one table, each row a path the events take:

- **replay**: the engine behind a time keeper, fed in chunks as ``scemon replay`` feeds
  it — processing only (no file reading, matches built and dropped). Every other row's
  rate is divided by replay's: what the path around the engine costs. Replay runs
  before the first row and again after every row, and a row's ratio is to the mean of
  the two replays around it (its ``replay_per_s``): the rows run one after another for
  minutes, and on this shared VM replay alone measured 45,896 and 69,651 events/s on
  demo in two runs a few minutes apart, so one replay at the start made the later
  rows' ratios say as much about the machine's moment as about the path. The replay
  row shows the mean of all its runs, their range in the notes.
- **service, N subscribers**: a real server (a child process on 127.0.0.1, a fresh
  store) fed Arrow posts of ``batch`` events one after another (as one Spark task
  posts), with N WebSocket subscribers in processes of their own (one per core at
  most), each reading every match
  (:mod:`service.bench.subscribers`). Timed from the first post to the last match
  received by the last subscriber.
- **Spark job**: the events as JSON Lines files of ``batch`` events, ``scemon stream
  --once`` (``local[2]``, one file per micro-batch) into a fresh server, one subscriber.
  Timed from the end of the warm-up micro-batches to the last match received.

Every row first takes the same warm-up (about one longest window of the stream, whole
batches), so it is measured in the steady state. For each server row: its peak RSS
(``VmHWM``), the CPU seconds it spent over the measured part (on a shared machine the
wall rate wanders, the CPU does not as much), and the latency from a batch's post to
each of its matches arriving at the first subscriber (p50, p99). A match belongs to the
batch whose post returned it: posts are sequential and ``seq`` is given in order, so
batch k holds the seqs after those of batches before it.
"""

from __future__ import annotations

import gc
import itertools
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson
import pyarrow as pa

from api.client import Client
from api.spark_sink import encode_events
from ecq.engine import Engine
from ecq.evaluation import workload as wl
from ecq.event import Event
from ecq.time.timekeeper import TimeKeeper
from service.bench.profile import LAYERS, Sampler, py_spy
from service.bench.runner import fresh
from service.bench.table import Plot, Table
from service.server.process import ServerProcess

__all__ = [
    "FULL",
    "QUICK",
    "TARGETS",
    "WORKLOADS",
    "Load",
    "PipelineScale",
    "make_load",
    "pipeline_tables",
]

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ("demo", "seq")
# The ratios to replay the issue asks of each path (service rows by subscriber count).
# The cores the rows' processes share (the cpu_bound column).
_CORES = os.cpu_count() or 1
TARGETS: dict[str, float] = {"service, 1 sub": 0.7, "service, 10 subs": 0.5, "Spark job, 1 sub": 0.5}
# As ``scemon replay`` feeds its engine (service.cli.replay.CHUNK_SIZE).
REPLAY_CHUNK = 4096
# Bounds on every wait, so a broken server ends the run instead of hanging it.
_JOB_TIMEOUT = 1800.0
_CONNECT_TIMEOUT = 30.0

# (fraction done, what runs now)
Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class PipelineScale:
    """Sizes of one run: ``events`` measured per row after the warm-up (whole batches of
    ``batch``, which is also the events per Spark file and micro-batch), ``queries``
    per workload, the subscriber counts of the service rows; ``warmup`` None is one
    longest window of the stream and a fifth more."""

    events: int = 200_000
    queries: int = 1000
    batch: int = 10_000
    # Events per micro-batch of the Spark job (scemon stream --batch-events); a baseline's
    # job that predates that option takes one file of ``batch`` events per micro-batch.
    spark_batch: int = 100_000
    subscribers: tuple[int, ...] = (0, 1, 10)
    workloads: tuple[str, ...] = WORKLOADS
    spark: bool = True
    warmup: int | None = None
    # Sample each server with py-spy over its measured part (service.bench.profile).
    profile: bool = False
    # Another checkout whose server runs every server row again, beside this build's
    # (its kernel built in place): before and after in one run.
    baseline: Path | None = None


FULL = PipelineScale()
# One workload: Spark's first micro-batch alone takes 10-30 s on a busy 2-core machine.
QUICK = PipelineScale(
    events=3000, queries=100, batch=1000, spark_batch=2000, warmup=2000, workloads=("demo",)
)


@dataclass
class Load:
    """One workload: its queries and the whole stream (warm-up first)."""

    name: str
    queries: list[tuple[str, str]]
    events: list[Event]
    warmup: int

    @property
    def measured(self) -> int:
        return len(self.events) - self.warmup


def _round_up(n: float, step: int) -> int:
    return max(step, math.ceil(n / step) * step)


def make_load(name: str, scale: PipelineScale) -> Load:
    """``demo``: the card payments of ``scemon demo`` (its two paper queries and
    ``queries`` generated ones); ``seq``: the paper's sequence template over its default
    stream. The warm-up is whole batches."""
    if name == "demo":
        # Windows up to 5 hours; 1,000 card holders each paying every 30 minutes.
        window = 5 * 3600.0 * 1000 / 1800.0
        warm = _round_up(1.2 * window if scale.warmup is None else scale.warmup, scale.batch)
        queries, stream = wl.credit_card_workload(n_queries=scale.queries, n_events=warm + scale.events)
        return Load(name, queries, list(stream), warm)
    if name == "seq":
        w = wl.Workload(n_queries=scale.queries)
        warm = _round_up(1.2 * w.window_events if scale.warmup is None else scale.warmup, scale.batch)
        return Load(name, wl.sequence_queries(w), list(wl.events(w, warm + scale.events)), warm)
    raise ValueError(f"unknown workload {name!r} (expected one of {', '.join(WORKLOADS)})")


@dataclass
class Row:
    path: str
    subscribers: int
    events: int
    matches: int
    seconds: float
    cpu_seconds: float
    rss_mb: float | None = None
    latencies: list[float] = field(default_factory=list)
    # py-spy samples of the server per layer (profiled runs only).
    layers: Counter[str] | None = None
    # Spark's mean milliseconds per timed micro-batch, by phase of its progress report.
    spark_ms: dict[str, float] = field(default_factory=dict)
    # The subscriber processes' CPU seconds over the measured part (service rows): on a
    # machine of 2 cores they share the cores with the server.
    subs_cpu_seconds: float | None = None
    # The server's engine thread's CPU seconds over the measured part (its
    # scemon_engine_cpu_seconds_total): the rest of cpu_seconds is the service around it.
    engine_cpu_seconds: float | None = None
    # The Spark job's CPU seconds over the measured part (Spark row): its whole process
    # tree, the driver, the JVM and Spark's Python workers, on the server's cores.
    job_cpu_seconds: float | None = None

    @property
    def all_cpu_seconds(self) -> float:
        """The CPU of every process of the row: the server, the subscribers, the job."""
        return self.cpu_seconds + (self.subs_cpu_seconds or 0.0) + (self.job_cpu_seconds or 0.0)

    def cpu_bound(self, cores: int) -> float:
        """Events/s this row's CPU allows if nothing ever waited: the server is one core
        for its Python (one interpreter lock), and the server, the subscribers and the
        job together have ``cores``."""
        if not self.events or not self.cpu_seconds:
            return math.inf
        return min(self.events / self.cpu_seconds, cores * self.events / self.all_cpu_seconds)

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


# ------------------------------------------------------------------------- replay


def replay_row(load: Load) -> Row:
    """The engine alone, as ``scemon replay`` runs it: a time keeper, chunks of
    :data:`REPLAY_CHUNK`, the collector tuned as replay tunes it (see
    ``service.cli.collector``). Only the measured events are timed."""
    keeper = TimeKeeper(Engine(), max_ahead=math.inf)
    for name, text in load.queries:
        keeper.engine.register(name, text)
    events = fresh(load.events)
    warm, measured = events[: load.warmup], events[load.warmup :]
    # Tuned as service.cli.collector tunes it for replay (this room may not import the CLI's).
    old = gc.get_threshold()
    gc.set_threshold(100_000, 50, 100)
    gc.freeze()
    try:
        for k in range(0, len(warm), REPLAY_CHUNK):
            keeper.process(warm[k : k + REPLAY_CHUNK])
        matches = 0
        began, began_cpu = time.perf_counter(), time.process_time()
        for k in range(0, len(measured), REPLAY_CHUNK):
            matches += len(keeper.process(measured[k : k + REPLAY_CHUNK])[0])
        seconds, cpu = time.perf_counter() - began, time.process_time() - began_cpu
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()
    return Row("replay (engine only)", 0, len(measured), matches, seconds, cpu)


# ------------------------------------------------------------------------ servers


def arrow_body(events: Sequence[Event]) -> bytes:
    """A post as the Spark job sends it (:func:`api.spark_sink.encode_events`): sources
    and ids as text, integer literals sent as integers, attributes as JSON text."""
    table = pa.table(
        {
            "src": pa.array([str(e.src) for e in events], pa.string()),
            "type": pa.array([e.type for e in events], pa.string()),
            "start": pa.array([e.start for e in events], pa.float64()),
            "end": pa.array([e.end for e in events], pa.float64()),
            "id": pa.array([None if e.id is None else str(e.id) for e in events], pa.string()),
            "attrs": pa.array(
                [orjson.dumps(e.attrs).decode() if e.attrs else None for e in events], pa.string()
            ),
        }
    )
    return encode_events(table)


def _proc_status(pid: int, key: str) -> float:
    """A ``kB`` field of ``/proc/<pid>/status``, in MB (0 off Linux)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def _tree_cpu_seconds(pid: int) -> float:
    """:func:`_cpu_seconds` of a process and all its descendants alive now."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    total, todo = 0.0, [pid]
    while todo:
        one = todo.pop()
        total += _cpu_seconds(one)
        todo.extend(children.get(one, ()))
    return total


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (``/proc/<pid>/stat``; 0 off Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Subscribers:
    """The subscriber processes (:mod:`service.bench.subscribers`): ``n`` subscribers
    shared among at most one process per core, the first subscriber (in the first
    process) noting when each match arrived."""

    def __init__(self, url: str, n: int, from_seq: int, folder: Path) -> None:
        self.n = n
        self.processes: list[tuple[subprocess.Popen[str], Path]] = []
        shares = [len(range(k, n, _processes(n))) for k in range(_processes(n))]
        for k, share in enumerate(shares):
            record = folder / f"subscribers-{n}-{from_seq}-{k}.json"
            command = [sys.executable, "-m", "service.bench.subscribers", url, str(share), str(from_seq)]
            process = subprocess.Popen(
                [*command, str(record), "1" if k == 0 else "0"],
                cwd=ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            self.processes.append((process, record))

    def cpu_seconds(self) -> float:
        """The CPU seconds of the subscriber processes so far."""
        return sum(_cpu_seconds(process.pid) for process, _ in self.processes)

    def finish(self, expected: int) -> dict[str, Any]:
        """Tell them how many matches to wait for; their records, joined, once every
        subscriber has them (``cpu``: the processes' CPU seconds once each said ``done``,
        read as :meth:`cpu_seconds` reads them at a row's start)."""
        if not self.processes:
            return {"received": [], "last": [], "seqs": [], "times": [], "cpu": 0.0}
        for process, _ in self.processes:
            assert process.stdin is not None
            process.stdin.write(f"{expected}\n")
            process.stdin.flush()
        try:
            for process, _ in self.processes:
                assert process.stdout is not None
                process.stdout.readline()  # "done" (or nothing: it ended): not yet reaped
            cpu = self.cpu_seconds()
            for process, _ in self.processes:
                process.wait(timeout=_JOB_TIMEOUT)
        finally:
            self.stop()
        records = [orjson.loads(record.read_bytes()) for _, record in self.processes]
        data: dict[str, Any] = {
            "received": [r for record in records for r in record["received"]],
            "last": [t for record in records for t in record["last"]],
            "seqs": records[0]["seqs"],
            "times": records[0]["times"],
            "cpu": cpu,
        }
        short = [r for r in data["received"] if r < expected]
        if short:
            raise RuntimeError(f"a subscriber received {min(short)} of {expected} matches")
        return data

    def stop(self) -> None:
        for process, _ in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    pipe.close()


def _processes(n: int) -> int:
    """Subscriber processes for ``n`` subscribers: one per core at most."""
    return min(n, os.cpu_count() or 1)


def _wait_subscribed(client: Client, n: int) -> None:
    deadline = time.monotonic() + _CONNECT_TIMEOUT
    while client.stats().subscribers < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{n} subscribers did not connect within {_CONNECT_TIMEOUT:.0f} s")
        time.sleep(0.05)


def _server(folder: Path, name: str, checkout: Path | None) -> ServerProcess:
    # A queue no subscriber can overflow: the bench measures throughput, not cut-offs.
    # No bound on how far ahead an event may be, as in the replay row: the demo's stream
    # is not in epoch time, and a Spark micro-batch of 100,000 of its events spans about
    # two days of it, more than the default --max-ahead of one (docs/service.md).
    env = {"SCEMON_SUBSCRIBER_QUEUE": "100000000", "SCEMON_TOKENS": "", "SCEMON_MAX_AHEAD": "inf"}
    return ServerProcess(folder / name, env=env, inherit_settings=False, checkout=checkout)


_BASELINE = " (baseline)"


def _register(client: Client, load: Load) -> None:
    client.register_bulk([{"name": name, "text": text} for name, text in load.queries])


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _sampler(profile: bool, pid: int, out: Path) -> Sampler | None:
    if not profile:
        return None
    exe = py_spy()
    if exe is None:
        raise RuntimeError("--profile needs py-spy on PATH (pip install py-spy)")
    sampler = Sampler(exe, pid, out)
    time.sleep(0.5)  # attached before the timed part starts
    return sampler


def service_row(
    load: Load,
    bodies: list[bytes],
    sizes: list[int],
    n_subs: int,
    warm: int,
    folder: Path,
    profile: bool = False,
    checkout: Path | None = None,
) -> Row:
    """A fresh server: queries, the ``warm`` warm-up posts, then the measured posts
    with ``n_subs`` subscribers reading every match."""
    tag = "-baseline" if checkout is not None else ""
    server = _server(folder, f"service-{load.name}-{n_subs}{tag}", checkout)
    server.start()
    assert server.process is not None
    pid = server.process.pid
    subs: _Subscribers | None = None
    try:
        with Client(server.url, timeout=600.0) as client:
            _register(client, load)
            for k in range(warm):
                # The measured stream's own producer: a second name would hold the clock at
                # the warm-up's end until it went idle (--producer-idle).
                client.post_arrow("bench", k, bodies[k])
            from_seq = client.stats().matches
            subs = _Subscribers(server.url, n_subs, from_seq, folder)
            _wait_subscribed(client, n_subs)
            now = time.monotonic
            starts: list[float] = []
            firsts: list[int] = []
            seq = from_seq
            sampler = _sampler(profile, pid, folder / f"profile-{load.name}-{n_subs}{tag}.txt")
            engine0 = _engine_seconds(client)  # before cpu0: the request is not the row's CPU
            cpu0, subs_cpu0 = _cpu_seconds(pid), subs.cpu_seconds()
            began = now()
            for k in range(warm, len(bodies)):
                starts.append(now())
                firsts.append(seq)
                seq += client.post_arrow("bench", k, bodies[k]).matches
            posted = now()
            record = subs.finish(seq - from_seq)
            ended = max([posted, *record["last"]])
            cpu = _cpu_seconds(pid) - cpu0
            engine1 = _engine_seconds(client)
            layers = sampler.stop() if sampler is not None else None
            rss = _proc_status(pid, "VmHWM")
    finally:
        if subs is not None:
            subs.stop()
        server.stop()
    latencies = [
        t - starts[bisect_right(firsts, s) - 1] for s, t in zip(record["seqs"], record["times"], strict=True)
    ]
    label = "service, 0 subs" if n_subs == 0 else f"service, {n_subs} sub{'s' if n_subs > 1 else ''}"
    label += _BASELINE if checkout is not None else ""
    return Row(
        label,
        n_subs,
        sum(sizes[warm:]),
        seq - from_seq,
        ended - began,
        cpu,
        rss,
        latencies,
        layers,
        subs_cpu_seconds=record["cpu"] - subs_cpu0,
        engine_cpu_seconds=None if engine0 is None or engine1 is None else engine1 - engine0,
    )


def _engine_seconds(client: Client) -> float | None:
    """The server's ``scemon_engine_cpu_seconds_total`` (None from a build without it)."""
    for line in client.metrics().splitlines():
        if line.startswith("scemon_engine_cpu_seconds_total "):
            return float(line.split()[1])
    return None


# -------------------------------------------------------------------------- Spark

_BATCH_LINE = re.compile(r"^batch \d+: (\d+) events in \d+ posts.*?, (\d+) matches")
# The job's own split of a batch (builds before it print the total only).
_BATCH_SPLIT = re.compile(r"\(([\d.]+)s collecting, ([\d.]+)s posting")
# The job's running count of dead-lettered rows, on each batch's line.
_BAD_ROWS = re.compile(r"total \d+ events, (\d+) bad rows")


class _Lines:
    """A child's stderr read line by line in a thread, each line with its arrival time
    and CPU seconds then: the server's (``pid``), the job's process tree's (``job``)
    and the subscribers' (``subs``)."""

    def __init__(self, stream: IO[str], pid: int, job: int, subs: _Subscribers) -> None:
        self.lines: list[tuple[float, str, float]] = []
        self.cpus: list[tuple[float, float]] = []  # (job, subscribers), line by line
        self._pid, self._job, self._subs = pid, job, subs
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append((time.monotonic(), line.rstrip("\n"), _cpu_seconds(self._pid)))
            self.cpus.append((_tree_cpu_seconds(self._job), self._subs.cpu_seconds()))

    def join(self) -> None:
        self._thread.join(timeout=10)


def spark_row(
    load: Load,
    batch: int,
    spark_batch: int,
    folder: Path,
    profile: bool = False,
    checkout: Path | None = None,
) -> Row:
    """``scemon stream --once`` over the stream as files of ``batch`` events into a fresh
    server with one subscriber: this build's job with micro-batches of about
    ``spark_batch`` events, and so a ``checkout``'s (the baseline's) that has the option;
    one from before it with one file per micro-batch, as that build did. The
    micro-batches up to the one that completes the warm-up (and at least the first,
    with Spark's start) are not timed."""
    tag = "-baseline" if checkout is not None else ""
    source = folder / f"in-{load.name}{tag}"
    source.mkdir()
    for k, begin in enumerate(range(0, len(load.events), batch)):
        lines = [orjson.dumps(e.to_dict()) for e in load.events[begin : begin + batch]]
        part = source / f".events-{k:05d}.jsonl"  # Spark skips dot files: renamed when whole
        part.write_bytes(b"\n".join(lines) + b"\n")
        part.rename(source / f"events-{k:05d}.jsonl")
        time.sleep(0.01)  # distinct modification times: Spark takes the oldest file first
    server = _server(folder, f"spark-{load.name}{tag}", checkout)
    server.start()
    assert server.process is not None
    pid = server.process.pid
    subs: _Subscribers | None = None
    job: subprocess.Popen[str] | None = None
    try:
        with Client(server.url, timeout=600.0) as client:
            _register(client, load)
            subs = _Subscribers(server.url, 1, 0, folder)
            _wait_subscribed(client, 1)
            command = [sys.executable, "-m", "service.cli", "stream", "--source", str(source)]
            command += ["--service", server.url, "--checkpoint", str(folder / f"checkpoint-{load.name}{tag}")]
            command += ["--dead-letter", str(folder / f"dead-{load.name}{tag}"), "--once"]
            if checkout is None or _sizes_by_events(checkout):
                command += ["--batch-events", str(spark_batch)]
            else:
                command += ["--max-files-per-trigger", "1", "--max-batch-events", str(batch)]
            progress_log = folder / f"spark-progress-{load.name}{tag}.jsonl"
            command += ["--progress-log", str(progress_log)]
            # The whole job, warm-up included: the server's layers, not its rate.
            sampler = _sampler(profile, pid, folder / f"profile-{load.name}-spark{tag}.txt")
            job = subprocess.Popen(
                command,
                cwd=checkout or ROOT,  # the baseline's job is the baseline's code
                env={**os.environ, "PYTHONPATH": str(checkout)} if checkout is not None else None,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert job.stderr is not None
            output = _Lines(job.stderr, pid, job.pid, subs)
            code = job.wait(timeout=_JOB_TIMEOUT)
            output.join()
            if code != 0:
                tail = " | ".join(text for _, text, _ in output.lines[-5:])
                raise RuntimeError(f"scemon stream exited with status {code}: {tail}")
            done = [
                (t, int(m.group(1)), int(m.group(2)), cpu, others)
                for (t, text, cpu), others in zip(output.lines, output.cpus, strict=True)
                if (m := _BATCH_LINE.match(text))
            ]
            bad = [int(m.group(1)) for _, text, _ in output.lines if (m := _BAD_ROWS.search(text))]
            if bad and bad[-1]:
                # Every row must reach the service: a dead-lettered one is not measured.
                raise RuntimeError(f"scemon stream dead-lettered {bad[-1]:,} rows (see {folder})")
            total = client.stats().matches
            record = subs.finish(total)
            layers = sampler.stop() if sampler is not None else None
            rss = _proc_status(pid, "VmHWM")
    finally:
        if job is not None:
            if job.poll() is None:
                job.kill()
                job.wait()
            if job.stderr is not None:
                job.stderr.close()
        if subs is not None:
            subs.stop()
        server.stop()
    # Timed from the end of the batch that completes the warm-up (at least the first:
    # Spark's own start-up), to the last match.
    totals = list(itertools.accumulate(n for _, n, _, _, _ in done))
    first = next((k for k, seen in enumerate(totals) if seen >= load.warmup), len(done))
    if first + 1 >= len(done):
        raise RuntimeError(f"scemon stream ran {len(done)} micro-batches; none after the warm-up to time")
    began = done[first][0]
    timed = done[first + 1 :]
    ended = max(done[-1][0], *record["last"])
    events = sum(n for _, n, _, _, _ in timed)
    matches = sum(m for _, _, m, _, _ in timed)
    cpu = done[-1][3] - done[first][3]
    (job_end, subs_end), (job_began, subs_began) = done[-1][4], done[first][4]
    label = "Spark job, 1 sub" + (_BASELINE if checkout is not None else "")
    row = Row(label, 1, events, matches, ended - began, cpu, rss, layers=layers)
    row.job_cpu_seconds = job_end - job_began
    row.subs_cpu_seconds = subs_end - subs_began
    row.spark_ms = _spark_phases(progress_log, first + 1)
    splits = [
        (float(m.group(1)), float(m.group(2)))
        for _, text, _ in output.lines
        if _BATCH_LINE.match(text) and (m := _BATCH_SPLIT.search(text))
    ][first + 1 :]
    if splits:
        row.spark_ms["job: toArrow (Spark tasks, collect)"] = 1000 * sum(c for c, _ in splits) / len(splits)
        row.spark_ms["job: sort, encode, POST"] = 1000 * sum(p for _, p in splits) / len(splits)
    return row


def _sizes_by_events(checkout: Path) -> bool:
    """Whether a checkout's job sizes micro-batches by events (``--batch-events``, from
    1926e9c on): then its baseline row runs with the same micro-batches as this build's,
    and the two rows differ only by their code."""
    sources = checkout / "service" / "pipeline" / "sources.py"
    return sources.exists() and "maxBytesPerTrigger" in sources.read_text()


def _spark_phases(progress_log: Path, warm: int) -> dict[str, float]:
    """Mean milliseconds per timed micro-batch (batch id ``>= warm``) of each phase in
    Spark's progress reports: ``triggerExecution`` is the whole batch, ``addBatch`` the
    foreachBatch delivery, the rest Spark's own bookkeeping. (The job's own lines split
    ``addBatch`` further; :func:`spark_row` adds those.)"""
    totals: Counter[str] = Counter()
    batches = 0
    if progress_log.exists():
        for line in progress_log.read_bytes().splitlines():
            report = orjson.loads(line)
            if report.get("batchId", -1) >= max(warm, 1) and report.get("numInputRows", 0) > 0:
                batches += 1
                totals.update({k: float(v) for k, v in report.get("durationMs", {}).items()})
    return {k: v / batches for k, v in totals.items()} if batches else {}


# --------------------------------------------------------------------------- table


class _Bracketed:
    """A workload's rows, each with replay run right before and right after it."""

    def __init__(self, load: Load) -> None:
        self.load = load
        self.replays = [replay_row(load)]
        self.rows: list[Row] = []

    def add(self, row: Row) -> None:
        self.rows.append(row)
        self.replays.append(replay_row(self.load))

    def around(self) -> list[float]:
        """Per row, the mean rate of the replays right before and right after it."""
        return [(before.rate + after.rate) / 2 for before, after in itertools.pairwise(self.replays)]

    def replay(self) -> Row:
        """The replay runs as one row: their mean time and CPU."""
        n = len(self.replays)
        first = self.replays[0]
        seconds = sum(r.seconds for r in self.replays) / n
        cpu = sum(r.cpu_seconds for r in self.replays) / n
        return Row(first.path, 0, first.events, first.matches, seconds, cpu)


def _table(load: Load, scale: PipelineScale, measured: _Bracketed) -> Table:
    replay = measured.replay()
    rates = [r.rate for r in measured.replays]
    # Replay's events per CPU second: what the engine alone does when nothing waits.
    replay_cpu_rate = replay.events / replay.cpu_seconds if replay.cpu_seconds else 0.0
    table = Table(
        name=f"pipeline_{load.name}",
        title=f"The whole path against the engine: {load.name} workload",
        columns=[
            "path",
            "events",
            "matches",
            "seconds",
            "events_per_s",
            "ratio",
            "target",
            "met",
            "replay_per_s",
            "cpu_s",
            "engine_cpu_s",
            "subs_cpu_s",
            "job_cpu_s",
            "cpu_us_per_event",
            "cpu_bound",
            "peak_rss_mb",
            "p50_ms",
            "p99_ms",
        ],
        plot=Plot(x="path", series=("ratio",), y_label="events/s as a ratio to replay", kind="stacked"),
        notes=[
            f"{load.name}: {len(load.queries):,} queries, {load.measured:,} events measured after a warm-up "
            f"of {load.warmup:,}; posts, files and micro-batches of {scale.batch:,} events (Arrow); "
            "subscribers read every match in processes of their own (one per core at most); cpu_s: the "
            "server's CPU seconds (replay: its own), engine_cpu_s the part its engine thread spent in the "
            "engine (scemon_engine_cpu_seconds_total); subs_cpu_s: the subscriber processes' CPU seconds "
            "over the same time (they share the machine's cores with the server); job_cpu_s: the Spark job's "
            "(its driver, JVM and Python workers); cpu_us_per_event: all of these per event; cpu_bound: the "
            "ratio to replay this CPU allows when no process waits (the row's events per second of the "
            "server's CPU, one core for its interpreter lock, and of all the processes' CPU on "
            f"{_CORES} cores, whichever is less, over replay's events per CPU second); latency: a batch's post "
            "to its matches' frames at the first subscriber; ratio: a row's events/s over replay_per_s, the "
            f"mean of the replay runs right before and after it (replay ran {len(rates)} times: "
            f"{min(rates):,.0f}-{max(rates):,.0f} events/s; its row shows their mean)",
        ],
    )
    # The replay row is its own reference (ratio 1).
    for row, reference in [(replay, replay.rate), *zip(measured.rows, measured.around(), strict=True)]:
        if row.spark_ms:
            phases = sorted(row.spark_ms.items(), key=lambda kv: -kv[1])
            table.notes.append(
                f"{row.path}, ms per timed micro-batch (Spark's progress reports; job: the job's "
                "own split of addBatch): " + ", ".join(f"{name} {ms:,.0f}" for name, ms in phases)
            )
        target = TARGETS.get(row.path)
        ratio = row.rate / reference if reference else 0.0
        table.add(
            path=row.path,
            events=row.events,
            matches=row.matches,
            seconds=round(row.seconds, 3),
            events_per_s=round(row.rate),
            ratio=round(ratio, 3),
            target=f">= {target}" if target is not None else "-",
            met="-" if target is None else ("yes" if ratio >= target else "NO"),
            replay_per_s=round(reference),
            cpu_s=round(row.cpu_seconds, 2),
            engine_cpu_s="-" if row.engine_cpu_seconds is None else round(row.engine_cpu_seconds, 2),
            subs_cpu_s="-" if row.subs_cpu_seconds is None else round(row.subs_cpu_seconds, 2),
            job_cpu_s="-" if row.job_cpu_seconds is None else round(row.job_cpu_seconds, 2),
            cpu_us_per_event=round(1e6 * row.all_cpu_seconds / row.events, 1) if row.events else "-",
            cpu_bound=round(min(1.0, row.cpu_bound(_CORES) / replay_cpu_rate), 2) if replay_cpu_rate else "-",
            peak_rss_mb="-" if row.rss_mb is None else round(row.rss_mb, 1),
            p50_ms=round(1000 * _percentile(row.latencies, 0.5), 1) if row.latencies else "-",
            p99_ms=round(1000 * _percentile(row.latencies, 0.99), 1) if row.latencies else "-",
        )
    return table


def pipeline_tables(scale: PipelineScale, progress: Progress | None = None) -> list[Table]:
    """One table per workload of ``scale``; see the module docstring."""
    builds: list[Path | None] = [None] if scale.baseline is None else [scale.baseline, None]
    per_load = 1 + (len(scale.subscribers) + int(scale.spark)) * len(builds)
    steps = per_load * len(scale.workloads)
    step = 0

    def tick(what: str) -> None:
        nonlocal step
        if progress is not None:
            progress(step / steps, what)
        step += 1

    tables = []
    with tempfile.TemporaryDirectory(prefix="scemon-bench-pipeline-") as tmp:
        folder = Path(tmp)
        for name in scale.workloads:
            load = make_load(name, scale)
            tick(f"{name}: replay")
            measured = _Bracketed(load)
            cuts = range(0, len(load.events), scale.batch)
            bodies = [arrow_body(load.events[k : k + scale.batch]) for k in cuts]
            sizes = [len(load.events[k : k + scale.batch]) for k in cuts]
            warm = load.warmup // scale.batch
            # The baseline's row right before this build's: the same machine moment, near enough.
            for n in scale.subscribers:
                for checkout in builds:
                    tick(f"{name}: service, {n} subscribers")
                    measured.add(service_row(load, bodies, sizes, n, warm, folder, scale.profile, checkout))
            if scale.spark:
                for checkout in builds:
                    tick(f"{name}: Spark job")
                    measured.add(
                        spark_row(load, scale.batch, scale.spark_batch, folder, scale.profile, checkout)
                    )
            tables.append(_table(load, scale, measured))
            if scale.profile:
                tables.append(_profile_table(load, [measured.replay(), *measured.rows]))
    if progress is not None:
        progress(1.0, "done")
    return tables


def _profile_table(load: Load, rows: list[Row]) -> Table:
    """Each server row's CPU time per event, split by layer in proportion to the py-spy
    samples of each (µs per event)."""
    table = Table(
        name=f"pipeline_profile_{load.name}",
        title=f"Where the server's time goes: {load.name} workload (µs of CPU per event)",
        columns=["path", "cpu_us_per_event", *LAYERS],
        plot=Plot(x="path", series=LAYERS, y_label="server CPU µs per event", kind="stacked"),
        notes=[
            f"py-spy samples of the server process (100/s, idle threads left out) over each row's "
            f"measured part, by the deepest frame naming a layer (service/bench/profile.py); the "
            f"server's CPU time per event split in proportion; replay: "
            f"{1e6 * rows[0].cpu_seconds / rows[0].events:,.1f} µs per event of CPU. The Spark row's "
            "samples cover the whole job, its CPU the server's over the timed batches.",
        ],
    )
    for row in rows[1:]:
        if row.layers is None:
            continue
        total = sum(row.layers.values()) or 1
        per_event = 1e6 * row.cpu_seconds / row.events if row.events else 0.0
        shares = {layer: round(per_event * row.layers.get(layer, 0) / total, 2) for layer in LAYERS}
        table.add(path=row.path, cpu_us_per_event=round(per_event, 2), **shares)
    return table
