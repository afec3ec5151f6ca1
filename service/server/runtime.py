"""The running parts of one server, built from its settings and torn down in order.

Kept apart from ``main.py`` (which only assembles the app) so that tests and tools can
run the same parts without HTTP.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from service.server.config import Settings
from service.server.host import EngineHost
from service.server.hub import Hub
from service.server.metrics import Metrics
from service.server.store import Store

__all__ = ["Runtime"]


@dataclass
class Runtime:
    settings: Settings
    store: Store
    hub: Hub
    metrics: Metrics
    host: EngineHost

    @classmethod
    def open(cls, settings: Settings) -> Runtime:
        store = Store(settings.data, init=settings.init, max_bytes=settings.store_max_bytes)
        hub = Hub(settings.subscriber_queue)
        metrics = Metrics()
        host = EngineHost(
            store, metrics, hub.publish, trim_every=settings.trim_every, match_log_max=settings.match_log_max
        )
        metrics.watch(host.stats_snapshot, lambda: len(hub))
        return cls(settings, store, hub, metrics, host)

    def start(self) -> None:
        """Start the writer thread; the engine rebuilds in the background (``/readyz``)."""
        self.host.start()

    async def stop(self) -> None:
        """Close subscriptions, let queued operations finish, close the store."""
        self.hub.close()
        await asyncio.sleep(0)
        await asyncio.to_thread(self.host.stop)
        self.store.close()
