"""The running parts of one server, built from its settings and torn down in order.

Kept apart from ``main.py`` (which only assembles the app) so that tests and tools can
run the same parts without HTTP.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from service.server.config import Settings
from service.server.host import EngineHost
from service.server.hub import Hub
from service.server.metrics import Metrics
from service.server.store import Store

__all__ = ["Runtime"]

T = TypeVar("T")

# Request bodies parsed at the same time (each in a worker thread): what parsing holds in
# memory is bounded by this many bodies' worth, whatever the number of clients.
PARSE_SLOTS = 2


@dataclass
class Runtime:
    settings: Settings
    store: Store
    hub: Hub
    metrics: Metrics
    host: EngineHost
    parse_slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(PARSE_SLOTS))
    # When the process started serving: wall time for people, monotonic for uptime.
    started: float = field(default_factory=time.time)
    started_monotonic: float = field(default_factory=time.monotonic)

    @property
    def uptime(self) -> float:
        return time.monotonic() - self.started_monotonic

    @classmethod
    def open(cls, settings: Settings) -> Runtime:
        store = Store(settings.data, init=settings.init, max_bytes=settings.store_max_bytes)
        hub = Hub(settings.subscriber_queue)
        metrics = Metrics()
        host = EngineHost(
            store,
            metrics,
            hub.publish,
            trim_every=settings.trim_every,
            match_log_max=settings.match_log_max,
            lateness=settings.lateness,
            max_ahead=settings.max_ahead,
            buffer_max=settings.buffer_max,
            idle=settings.producer_idle,
            scrub_every=settings.scrub_every,
            match_cap=settings.max_matches_per_event,
            shard=settings.shard,
            cluster=settings.cluster,
        )
        metrics.watch(host.stats_snapshot, hub)
        return cls(settings, store, hub, metrics, host)

    async def parse(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` (reading a request body) in a worker thread, at most
        PARSE_SLOTS at a time, so no body is parsed on the event loop."""
        async with self.parse_slots:
            return await asyncio.to_thread(fn, *args)

    def start(self) -> None:
        """Start the writer thread; the engine rebuilds in the background (``/readyz``)."""
        self.host.start()

    async def stop(self) -> None:
        """Close subscriptions, let queued operations finish, close the store."""
        self.hub.close()
        await asyncio.sleep(0)
        await asyncio.to_thread(self.host.stop)
        self.store.close()
