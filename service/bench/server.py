"""``scemon bench service``: ingest throughput of a real server, JSON vs Arrow, with 0,
1 and 10 WebSocket subscribers.

The server runs in a subprocess on 127.0.0.1 (a free port, a temporary store), as in
production; this process posts batches one after another (as one Spark task does) and
runs the subscribers on an asyncio loop in a thread. Each configuration posts the same
number of fresh events (the stream continues in time) and waits until every subscriber
has received every match, so a configuration's time includes delivering its matches.
Everything is bounded: a fixed number of events, timeouts on every wait, and the server
is stopped at the end.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from api.client import Client, Subscription, arrow_bytes
from ecq.evaluation import workload
from service.server.process import ServerProcess

__all__ = ["run"]

_DRAIN_TIMEOUT = 120.0


@dataclass
class Row:
    fmt: str
    subscribers: int
    events: int
    matches: int
    seconds: float
    post_seconds: float

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0

    @property
    def post_events_per_s(self) -> float:
        return self.events / self.post_seconds if self.post_seconds else 0.0


class _Subscribers:
    """``n`` subscriptions on an asyncio loop in a background thread, counting matches."""

    def __init__(self, url: str, n: int, from_seq: int) -> None:
        self.received = [0] * n
        self.loop = asyncio.new_event_loop()
        self.tasks: list[asyncio.Task[None]] = []
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        for i in range(n):
            future = asyncio.run_coroutine_threadsafe(self._start(url, i, from_seq), self.loop)
            self.tasks.append(future.result(timeout=10))
        time.sleep(0.2 if n else 0)  # let them connect before the first batch

    async def _start(self, url: str, i: int, from_seq: int) -> asyncio.Task[None]:
        return asyncio.ensure_future(self._consume(url, i, from_seq))

    async def _consume(self, url: str, i: int, from_seq: int) -> None:
        async for _ in Subscription(url, from_seq=from_seq, max_retries=3):
            self.received[i] += 1

    def wait(self, count: int) -> None:
        deadline = time.monotonic() + _DRAIN_TIMEOUT
        while any(r < count for r in self.received) and time.monotonic() < deadline:
            time.sleep(0.01)

    def close(self) -> None:
        for task in self.tasks:
            self.loop.call_soon_threadsafe(task.cancel)
        time.sleep(0.1)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


def _batches(w: workload.Workload, n_events: int, batch: int, t0: float) -> list[list[dict[str, Any]]]:
    events = [e.to_dict() for e in workload.events(w, n_events, start=t0)]
    return [events[i : i + batch] for i in range(0, len(events), batch)]


def _arrow(events: list[dict[str, Any]]) -> bytes:
    import pyarrow as pa

    table = pa.table(
        {
            "src": pa.array([e["src"] for e in events], pa.int64()),
            "type": pa.array([e["type"] for e in events], pa.string()),
            "start": pa.array([e["start"] for e in events], pa.float64()),
            "end": pa.array([e["end"] for e in events], pa.float64()),
            "attrs": pa.array(
                [orjson.dumps(e["attrs"]).decode() if e.get("attrs") else None for e in events], pa.string()
            ),
        }
    )
    return arrow_bytes(table)


def _one(
    client: Client, url: str, fmt: str, subscribers: int, batches: list[list[dict[str, Any]]], tag: str
) -> Row:
    bodies = [_arrow(b) for b in batches] if fmt == "arrow" else None
    from_seq = _next_seq(client)
    subs = _Subscribers(url, subscribers, from_seq)
    try:
        started = time.perf_counter()
        matches = 0
        for k, events in enumerate(batches):
            if bodies is not None:
                result = client.post_arrow("bench", f"{tag}-{k}", bodies[k])
            else:
                result = client.post_events("bench", f"{tag}-{k}", events)
            matches += result.matches
        posted = time.perf_counter() - started
        subs.wait(matches)
        elapsed = time.perf_counter() - started
    finally:
        subs.close()
    return Row(fmt, subscribers, sum(len(b) for b in batches), matches, elapsed, posted)


def _next_seq(client: Client) -> int:
    seq = 0
    while True:
        page = client.matches(from_seq=seq, limit=10_000)
        if not page.matches:
            return page.next_seq
        seq = page.next_seq


def run(events: int, batch: int, n_queries: int, subscriber_counts: list[int]) -> list[Row]:
    """Run every configuration and print the table; returns the rows."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(100, Console().width))
    # Windows of 20-24 minutes: after a warm-up of that much stream every row runs in the
    # same steady state (as many partial matches expiring as starting).
    w = workload.Workload(
        n_queries=n_queries,
        n_sources=100,
        n_classes=50,
        window_min=20 * 60.0,
        window_max=24 * 60.0,
        source_gap=60.0,
        seed=5,
    )
    warmup = int(24 * 60 / w.source_gap * w.n_sources * 1.2)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="scemon-bench-") as tmp:
        # A large subscriber queue: the bench measures throughput, not cut-offs.
        server = ServerProcess(
            Path(tmp) / "data", env={"SCEMON_SUBSCRIBER_QUEUE": "1000000", "SCEMON_TOKENS": ""}
        )
        server.start()
        try:
            with Client(server.url) as client:
                client.register_bulk(
                    [{"name": name, "text": text} for name, text in workload.sequence_queries(w)]
                )
                t0 = 0.0
                for k, chunk in enumerate(_batches(w, warmup, batch, t0)):
                    # The stream's one producer: a second name would hold the clock at the
                    # warm-up's end until it went idle (--producer-idle).
                    client.post_events("bench", f"warmup-{k}", chunk)
                    t0 = chunk[-1]["end"] + 1.0
                for fmt in ("json", "arrow"):
                    for n in subscriber_counts:
                        batches = _batches(w, events, batch, t0)
                        t0 = batches[-1][-1]["end"] + 1.0
                        row = _one(client, server.url, fmt, n, batches, f"{fmt}-{n}")
                        rows.append(row)
                        console.print(
                            f"{fmt:5} {n:3} subscribers: {row.events_per_s:9,.0f} events/s "
                            f"({row.matches:,} matches)",
                            highlight=False,
                        )
        finally:
            server.stop()
    table = Table(
        title=f"scemon bench service — {n_queries} queries, {events:,} events per row, batches of {batch:,}"
    )
    for column in (
        "format",
        "subs",
        "events",
        "matches",
        "post s",
        "total s",
        "ev/s posted",
        "ev/s delivered",
    ):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            row.fmt,
            str(row.subscribers),
            f"{row.events:,}",
            f"{row.matches:,}",
            f"{row.post_seconds:.2f}",
            f"{row.seconds:.2f}",
            f"{row.post_events_per_s:,.0f}",
            f"{row.events_per_s:,.0f}",
        )
    console.print(table)
    return rows
