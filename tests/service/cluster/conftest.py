"""Set-up shared by the tests of a live cluster: shards told their place, and a job
posting a stream through the Spark sink batch after batch from a thread of its own, so
that a call to the cluster lands between and during batches."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from api.spark_sink import ServiceSink
from tests.service.cluster.test_keyed_shards import table
from tests.service.conftest import Server

StartShards = Callable[[int], list[Server]]


@pytest.fixture
def start_shards(tmp_path: Path) -> Iterator[StartShards]:
    """``start_shards(n)``: n shards (``SCEMON_SHARD=k/n``, no auth) started under
    ``tmp_path/s<k>``; every one is stopped at the end (stopping one twice is harmless)."""
    started: list[Server] = []

    def start(count: int) -> list[Server]:
        shards = [
            Server(tmp_path / f"s{k}", {"SCEMON_TOKENS": "", "SCEMON_SHARD": f"{k}/{count}"})
            for k in range(count)
        ]
        started.extend(shards)
        for server in shards:
            server.start()
        return shards

    yield start
    for server in started:
        server.stop()


class Job:
    """Posts ``events`` to ``urls`` in batches of ``batch`` through the sink, pausing
    ``pace`` seconds between batches (a job's pace), on a thread of its own."""

    def __init__(self, urls: list[str], events: list[dict[str, Any]], batch: int, pace: float = 0.05) -> None:
        self.urls, self.events, self.batch, self.pace = urls, events, batch, pace
        self.batches = len(events) // batch
        self.done: list[int] = []
        self.failed: list[BaseException] = []
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        sink = ServiceSink(self.urls, "job")
        try:
            for b in range(self.batches):
                sink.post_table(table(self.events[b * self.batch : (b + 1) * self.batch]), b)
                self.done.append(b)
                time.sleep(self.pace)
        except BaseException as err:  # the test thread raises it
            self.failed.append(err)
        finally:
            sink.close()

    def start(self) -> Job:
        self._thread.start()
        return self

    def wait_for(self, batches: int) -> None:
        """Until ``batches`` batches are posted (or the job failed)."""
        while not self.failed and len(self.done) < batches:
            time.sleep(0.01)

    def join(self) -> None:
        self._thread.join(timeout=300)
        assert not self.failed, self.failed
