"""Prometheus metrics of one server (``GET /metrics``).

A registry per app, not the global one, so that several apps in one process (tests)
do not collide. Counters are bumped by the EngineHost's thread (prometheus_client is
thread-safe); the engine gauges are read at scrape time from the host's last stats
snapshot, because walking the network from the event loop would race the writer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from service.server.hub import Hub

__all__ = ["Metrics", "CONTENT_TYPE"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Ingest latency buckets (seconds): from a small batch on an idle server to a large one.
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class _EngineCollector(Collector):
    """Gauges (and the hub's overflow count) read at scrape time."""

    def __init__(self, stats: Callable[[], dict[str, Any]], hub: Hub) -> None:
        self._stats = stats
        self._hub = hub

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        stats = self._stats()
        gauges = (
            ("scemon_queries", "Registered queries.", "queries"),
            ("scemon_ecqs", "Event-centric composable queues (one per event class in use).", "ecqs"),
            ("scemon_stored_instances", "Event instances stored in the shared queues.", "stored_instances"),
            ("scemon_pmb_entries", "Partial-matching-block entries.", "pmb_entries"),
            ("scemon_pending_matches", "Matches waiting for a window to close.", "pending_matches"),
        )
        for name, doc, key in gauges:
            yield GaugeMetricFamily(name, doc, value=float(stats.get(key, 0)))
        clocks = (
            (
                "scemon_clock_seconds",
                "The largest event time taken, or time advanced to (NaN before any).",
                "clock",
            ),
            (
                "scemon_released_clock_seconds",
                "The engine's clock: what the buffer released.",
                "released_clock",
            ),
        )
        event_time = stats.get("time", {})
        for name, doc, key in clocks:
            value = event_time.get(key)
            yield GaugeMetricFamily(
                name, doc, value=value if value is not None and math.isfinite(value) else math.nan
            )
        yield GaugeMetricFamily(
            "scemon_held_events", "Events held in the reorder buffer.", value=event_time.get("held", 0)
        )
        yield GaugeMetricFamily(
            "scemon_subscribers", "Connected WebSocket subscribers.", value=len(self._hub)
        )
        backlog, longest = self._hub.backlog()
        yield GaugeMetricFamily(
            "scemon_subscriber_backlog", "Matches queued for subscribers, not yet sent.", value=backlog
        )
        yield GaugeMetricFamily(
            "scemon_subscriber_backlog_max", "The longest one subscriber's queue of matches.", value=longest
        )
        yield GaugeMetricFamily(
            "scemon_subscribers_blocked",
            "Connected subscribers not reading: cut off for falling behind, or a send waiting over 1 s.",
            value=self._hub.blocked(),
        )
        # Counted when the hub cuts a subscriber off, not when its connection closes: a
        # client that stopped reading may hold its connection for a minute more.
        yield CounterMetricFamily(
            "scemon_subscriber_overflows",
            "Subscribers cut off for falling behind.",
            value=self._hub.overflows,
        )


class Metrics:
    """The counters and histogram the service updates, and the text exposition."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.events = Counter("scemon_events", "Events applied to the engine.", registry=r)
        self.batches = Counter("scemon_batches", "Event batches applied.", registry=r)
        self.duplicates = Counter(
            "scemon_duplicate_batches", "Batches recognised as already applied.", registry=r
        )
        self.matches = Counter("scemon_matches", "Matches emitted, per query.", ["query"], registry=r)
        self.matches_capped = Counter(
            "scemon_matches_capped",
            "Matches dropped over the cap of matches one event may complete for a query, per query.",
            ["query"],
            registry=r,
        )
        # The writer thread's CPU time inside the engine (thread time, so a wait for the
        # interpreter lock is not counted): beside the process's CPU, what the service
        # costs around its engine (scemon bench pipeline reads it).
        self.engine_seconds = Counter(
            "scemon_engine_cpu_seconds",
            "CPU seconds the engine spent applying batches and time advances (the writer thread's time).",
            registry=r,
        )
        self.ingest_seconds = Histogram(
            "scemon_ingest_seconds", "Time to answer POST /v1/events.", buckets=_BUCKETS, registry=r
        )
        self.up = Gauge("scemon_ready", "1 once the engine is rebuilt and serving.", registry=r)
        self.rebuilds = Counter(
            "scemon_rebuilds",
            "Engine rebuilds from the store, by reason (start, store: it writes again, error).",
            ["reason"],
            registry=r,
        )
        self.store_faults = Counter(
            "scemon_store_faults",
            "Operations the store refused, by kind (full, read-only, I/O error, corrupt, busy, error).",
            ["kind"],
            registry=r,
        )
        self._hub: Hub | None = None
        self.late = Counter(
            "scemon_late_events", "Events applied with an end below the released clock.", registry=r
        )
        self.refused_ahead = Counter(
            "scemon_refused_ahead",
            "Events and time advances refused as too far ahead of the clock.",
            registry=r,
        )
        self.buffer_full = Counter(
            "scemon_buffer_full",
            "Batches answered 503 because the reorder buffer was at its cap.",
            registry=r,
        )

    def watch(self, stats: Callable[[], dict[str, Any]], hub: Hub) -> None:
        """Expose the engine's and the hub's gauges, read at scrape time (the hub's on
        the event loop, where ``/metrics`` runs)."""
        self._hub = hub
        self.registry.register(_EngineCollector(stats, hub))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def totals(self) -> dict[str, float]:
        """The unlabelled counters' values by name without the ``_total`` suffix
        (``events``, ``batches``, ``duplicate_batches``, ``subscriber_overflows``); read from the
        counters themselves, not the whole registry, which holds a series per query."""
        out: dict[str, float] = {}
        for counter in (self.events, self.batches, self.duplicates):
            for family in counter.collect():
                for sample in family.samples:
                    if sample.name.endswith("_total"):
                        out[sample.name.removeprefix("scemon_").removesuffix("_total")] = sample.value
        out["subscriber_overflows"] = float(self._hub.overflows if self._hub is not None else 0)
        return out

    def ingest(self) -> tuple[int, float, list[tuple[float, int]]]:
        """The ingest histogram: batches answered, their seconds added up, and the
        cumulative count within each finite bucket bound."""
        count, total, buckets = 0, 0.0, []
        for family in self.ingest_seconds.collect():
            for sample in family.samples:
                if sample.name.endswith("_bucket") and sample.labels["le"] != "+Inf":
                    buckets.append((float(sample.labels["le"]), int(sample.value)))
                elif sample.name.endswith("_count"):
                    count = int(sample.value)
                elif sample.name.endswith("_sum"):
                    total = sample.value
        return count, total, buckets
