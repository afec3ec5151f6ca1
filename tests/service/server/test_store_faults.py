"""The store's faults said as what they are, without a mount: an I/O error made by a
file-size limit (``RLIMIT_FSIZE``: SQLite's writes fail with EFBIG), and a full store
made by a size cap (``PRAGMA max_page_count``). The host refuses writes at once while
the store cannot write, rebuilds its engine once when it writes again, and the batches
refused meanwhile are applied when resent. (``tests/service/faults`` fills a real
disk where a tmpfs can be mounted.)"""

from __future__ import annotations

import asyncio
import resource
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ecq.engine import Engine
from ecq.event import Event
from service.server.errors import UnavailableError
from service.server.faults import FULL, IO, READ_ONLY, StoreFault
from service.server.host import OK, UNWRITABLE, EngineHost
from service.server.metrics import Metrics
from service.server.store import STORE_FILE, Clocks, Store
from tests.service.server.test_host import ev


@contextmanager
def no_file_can_grow() -> Iterator[None]:
    """Every write of this process to a regular file fails (EFBIG, an I/O error to
    SQLite) until the block ends; SIGXFSZ is ignored by Python."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def rebuilds(metrics: Metrics, reason: str) -> float:
    return metrics.registry.get_sample_value("scemon_rebuilds_total", {"reason": reason}) or 0.0


def test_a_commit_that_fails_is_reported_as_its_fault_not_as_the_rollback(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.commit_register([("a", {"text": "A"})])
    with no_file_can_grow(), pytest.raises(StoreFault) as caught:
        store.commit_batch("p", "1", b"[]" * 100_000, 0, 0.0, None, {}, 0, Clocks(0.0, 0.0))
    fault = caught.value
    assert fault.kind == IO and fault.code is not None and fault.code.startswith("SQLITE_IOERR")
    assert "cannot rollback" not in str(fault)
    assert str(tmp_path) in str(fault) and "I/O error" in str(fault)
    store.commit_batch("p", "1", b"[]", 0, 0.0, None, {}, 0, Clocks(0.0, 0.0))  # writes again
    assert store.is_applied("p", "1")
    store.close()


def test_a_store_at_its_size_cap_is_full(tmp_path: Path) -> None:
    Store(tmp_path).close()
    store = Store(tmp_path, max_bytes=64 * 1024)
    with pytest.raises(StoreFault) as caught:
        store.commit_batch("p", "1", bytes(256 * 1024), 0, 0.0, None, {}, 0, Clocks(0.0, 0.0))
    assert caught.value.kind == FULL and "disk is full" in str(caught.value)
    assert not store.is_applied("p", "1")
    store.close()


def test_an_unwritable_store_refuses_at_once_rebuilds_once_and_resumes(tmp_path: Path) -> None:
    metrics = Metrics()
    query = "SEQ(A, B) WITHIN 100 s"
    batches = [(str(k), [ev(1, "A", 10.0 * k), ev(1, "B", 10.0 * k + 1)]) for k in range(12)]

    async def script(host: EngineHost) -> list[int]:
        await host.register([("ab", {"text": query})])
        matches = [(await host.ingest("p", *batches[0])).matches]
        refused = []
        with no_file_can_grow():
            for batch_id, events in batches[1:8]:
                with pytest.raises(UnavailableError) as caught:
                    await host.ingest("p", batch_id, list(events))
                refused.append(caught.value)
            assert host.state == UNWRITABLE
        # Every refusal says what happened and when to ask again; only the first one
        # reached the store, the others were refused without touching the engine.
        assert all("I/O error" in str(err) and err.retry_after for err in refused)
        assert metrics.registry.get_sample_value("scemon_store_faults_total", {"kind": IO}) == 1
        assert host.fault is not None and host.fault.kind == IO and "I/O error" in host.status()
        assert rebuilds(metrics, "store") == 0
        assert host.queries()[0].name == "ab"  # reads go on
        deadline = time.monotonic() + 30
        while host.state != OK and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert host.state == OK, host.status()
        assert rebuilds(metrics, "store") == 1  # once, for seven refused batches
        for batch_id, events in batches[1:]:  # the producer resends what was refused
            matches.append((await host.ingest("p", batch_id, list(events))).matches)
        return matches

    async def main() -> list[int]:
        store = Store(tmp_path)
        host = EngineHost(store, metrics, lambda items: None)
        host.start()
        await host.wait_ready()
        try:
            return await script(host)
        finally:
            await asyncio.to_thread(host.stop)
            store.close()

    matches = asyncio.run(main())
    engine = Engine()
    engine.register("ab", query)
    expected = [
        len(engine.process([Event(e.src, e.type, e.start, id=e.id) for e in events])) for _, events in batches
    ]
    assert matches == expected  # the refused first attempt left no trace in the engine


def test_a_read_only_store_is_said_to_be_read_only(tmp_path: Path) -> None:
    Store(tmp_path).close()
    db = sqlite3.connect(f"file:{tmp_path / STORE_FILE}?mode=ro", uri=True)
    with pytest.raises(sqlite3.Error) as caught:
        db.execute("INSERT INTO meta (key, value) VALUES ('k', 'v')")
    db.close()
    fault = StoreFault.of(caught.value, tmp_path / STORE_FILE)
    assert fault.kind == READ_ONLY and "read-only" in str(fault) and fault.passes
