"""``scemon bench cluster``: 1, 2 and 4 shards on this machine behind the Spark job's sink.

For each shard count: that many ``scemon serve`` processes on 127.0.0.1 (temporary
stores); the registration of the queries through :class:`api.cluster.Cluster`
(all or none, every shard checked first: what a user waits for); one merged
subscription (:class:`api.cluster.SyncClusterSubscription`) reading every match; then
``--events`` events over 200 sources posted in micro-batches through the Spark job's
sink (:class:`api.spark_sink.ServiceSink`: sort, route by ``crc32(src) mod N``, Arrow,
one post per shard at once), one batch after another as the job does, without Spark's
own cost, after one untimed batch of warm-up. The reference is the one-shard row, measured in the same run.

Measured per row: the registration's seconds (``--queries``, 1,000 by default); events/s from the first post to the last
match delivered to the merged subscriber (end to end); that per core (events/s divided
by the cores the shards can use: min(shards, cores)); the merged subscription's latency
per match, from the start of its batch's post to the match's arrival (p50, p99).
"""

from __future__ import annotations

import os
import random
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pyarrow as pa

from api.cluster import Cluster, SyncClusterSubscription
from api.spark_sink import ServiceSink
from service.bench.table import Plot, Table
from service.server.process import ServerProcess

__all__ = ["run"]

CLASSES = [f"C{i:02d}" for i in range(50)]
SOURCES = 200
_DRAIN_TIMEOUT = 300.0


def cluster_queries(count: int, seed: int = 7) -> list[dict[str, str]]:
    """``count`` sequences of two or three of the 50 classes, windows of 30 to 300 s."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        classes = rng.sample(CLASSES, rng.choice((2, 2, 3)))
        out.append({"name": f"q{i}", "text": f"SEQ({', '.join(classes)}) WITHIN {rng.randrange(30, 301)}"})
    return out


def event_batch(first: int, count: int, seed: int = 11) -> pa.Table:
    """Events ``first`` .. ``first + count - 1``: one a second of event time, over 1,000
    sources and the 50 classes, ids ``e<n>``."""
    rng = random.Random(seed + first)
    return pa.table(
        {
            "src": pa.array([str(rng.randrange(SOURCES)) for _ in range(count)]),
            "type": pa.array([rng.choice(CLASSES) for _ in range(count)]),
            "start": pa.array([float(n) for n in range(first, first + count)]),
            "end": pa.array([float(n) for n in range(first, first + count)]),
            "prob": pa.array([None] * count, pa.float64()),
            "id": pa.array([f"e{n}" for n in range(first, first + count)]),
            "attrs": pa.array([None] * count, pa.string()),
        }
    )


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def measure(
    shards: int,
    events: int,
    batch: int,
    n_queries: int,
    folder: Path,
) -> dict[str, Any]:
    """One row: ``shards`` servers, ``n_queries`` queries registered through the
    cluster, ``events`` posted through the sink and delivered to a merged subscriber."""
    with ExitStack() as stack:
        servers = [
            stack.enter_context(
                ServerProcess(folder / f"{shards}-{k}" / "data", env={"SCEMON_LATENESS": "0"})
            )
            for k in range(shards)
        ]
        urls = [s.url for s in servers]
        cluster = stack.enter_context(Cluster(urls))
        began = time.perf_counter()
        cluster.register_bulk(cluster_queries(n_queries))
        register_seconds = time.perf_counter() - began

        arrivals: dict[int, list[float]] = {}  # batch number → arrival time of each of its matches
        received = [0]
        lock = threading.Lock()
        sub = SyncClusterSubscription(urls, idle_timeout=_DRAIN_TIMEOUT)
        stop = threading.Event()

        def consume() -> None:
            for matches in sub.batches():
                now = time.monotonic()
                with lock:
                    for match in matches:
                        last = match["events"][-1]
                        arrivals.setdefault(int(last[1:]) // batch, []).append(now)
                    received[0] += len(matches)
                if stop.is_set():
                    return

        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        time.sleep(0.3)  # the subscriptions connect before the first batch
        sink = ServiceSink(urls, "bench-cluster")
        stack.callback(sink.close)
        posted_at: dict[int, float] = {}
        # One batch first, untimed: the servers' first batch pays their warm-up.
        made = sink.post_table(event_batch(0, batch), 0).matches
        first = time.monotonic()
        for number, at in enumerate(range(batch, batch + events, batch), 1):
            table = event_batch(at, min(batch, batch + events - at))
            posted_at[number] = time.monotonic()
            made += sink.post_table(table, number).matches
        posted = time.monotonic()
        deadline = posted + _DRAIN_TIMEOUT
        while received[0] < made and time.monotonic() < deadline:
            time.sleep(0.005)
        drained = time.monotonic()
        stop.set()
        sub.close()
        reader.join(timeout=30)
        with lock:
            latencies = [t - posted_at[n] for n, times in arrivals.items() if n in posted_at for t in times]
            delivered = received[0]
        if delivered < made:
            raise RuntimeError(
                f"{shards} shards: {delivered} of {made} matches delivered in {_DRAIN_TIMEOUT:.0f}s"
            )
        seconds = drained - first
        cores = min(shards, os.cpu_count() or 1)
        return {
            "shards": shards,
            "events": events,
            "matches": sum(len(times) for n, times in arrivals.items() if n in posted_at),
            "register_s": round(register_seconds, 3),
            "post_s": round(posted - first, 3),
            "events_per_s": round(events / seconds),
            "per_core": round(events / seconds / cores),
            "latency_p50_ms": round(1000 * _quantile(latencies, 0.5), 1),
            "latency_p99_ms": round(1000 * _quantile(latencies, 0.99), 1),
        }


def run(
    shard_counts: Sequence[int] = (1, 2, 4),
    events: int = 40_000,
    batch: int = 5_000,
    n_queries: int = 1000,
    progress: Callable[[str], None] | None = None,
) -> Table:
    """The table: one row per shard count (the one-shard row is the reference)."""
    table = Table(
        name="cluster",
        title="A cluster on this machine behind the Spark job's sink: 1, 2 and 4 shards",
        columns=[
            "shards",
            "events",
            "matches",
            "register_s",
            "post_s",
            "events_per_s",
            "per_core",
            "latency_p50_ms",
            "latency_p99_ms",
        ],
        plot=Plot(x="shards", series=("events_per_s", "per_core"), y_label="events/s", x_label="shards"),
        notes=[
            f"{events:,} events over {SOURCES:,} sources in batches of {batch:,} through ServiceSink; "
            f"{n_queries:,} sequence queries of 2-3 of 50 classes, registered through Cluster (all or none); "
            f"{os.cpu_count()} cores; per core = events/s / min(shards, cores)",
        ],
    )
    with tempfile.TemporaryDirectory(prefix="scemon-bench-cluster-") as tmp:
        for shards in shard_counts:
            if progress is not None:
                progress(f"{shards} shard(s)")
            table.add(**measure(shards, events, batch, n_queries, Path(tmp)))
    return table
