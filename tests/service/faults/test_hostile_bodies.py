"""Hostile and huge bodies: 60 MB of empty objects is refused while it streams in, and
the server's memory stays flat; a valid batch of 200,000 events is parsed off the event
loop, so other clients keep being answered; a 10 MB ``src`` is a 422 naming it.

Memory is read from ``/proc/<pid>/status``: ``VmHWM`` is the peak resident size, so a
spike that is freed again still counts."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from tests.service.conftest import Server, StartServer

pytestmark = pytest.mark.faults

# The bound on how far the server's peak memory may rise for a 60 MB body it refuses:
# about the body itself (the build that parsed it first peaked at 1.9 GB).
RSS_BOUND_MB = 150


def peak_mb(server: Server) -> int:
    assert server.process is not None
    with open(f"/proc/{server.process.pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmHWM")


def empty_objects(megabytes: int) -> bytes:
    return (
        b'{"producer": "p", "batch_id": "junk", "events": [' + b"{}," * (megabytes * 1_000_000 // 3) + b"{}]}"
    )


def test_a_60_mb_body_of_empty_objects_is_refused_and_memory_stays_flat(start_server: StartServer) -> None:
    server = start_server()
    before = peak_mb(server)
    body = empty_objects(60)
    answer = httpx.post(
        f"{server.url}/v1/events", content=body, headers={"content-type": "application/json"}, timeout=120
    )
    assert answer.status_code == 413 and "JSON values" in answer.json()["detail"]["message"]

    def chunks() -> Any:  # the same without Content-Length (chunked)
        for at in range(0, len(body), 1 << 20):
            yield body[at : at + (1 << 20)]

    answer = httpx.post(
        f"{server.url}/v1/events", content=chunks(), headers={"content-type": "application/json"}, timeout=120
    )
    assert answer.status_code == 413
    grown = peak_mb(server) - before
    print(f"peak RSS rose {grown} MB for two 60 MB bodies")
    assert grown < RSS_BOUND_MB
    assert httpx.get(f"{server.url}/readyz").status_code == 200


def probe_while(url: str, work: Callable[[], httpx.Response]) -> tuple[httpx.Response, float, float]:
    """Run ``work`` in a thread and ask ``/healthz`` meanwhile; returns its answer, the
    time it took and the longest a probe waited."""
    out: dict[str, Any] = {}

    def run() -> None:
        started = time.monotonic()
        out["answer"] = work()
        out["took"] = time.monotonic() - started

    thread = threading.Thread(target=run)
    thread.start()
    longest = 0.0
    with httpx.Client(base_url=url, timeout=120) as http:
        while thread.is_alive():
            started = time.monotonic()
            assert http.get("/healthz").status_code == 200
            longest = max(longest, time.monotonic() - started)
            time.sleep(0.01)
    thread.join()
    return out["answer"], out["took"], longest


def test_a_large_valid_batch_does_not_freeze_other_clients(start_server: StartServer) -> None:
    server = start_server()
    httpx.post(f"{server.url}/v1/queries", json={"name": "ab", "text": "SEQ(A, B) WITHIN 10 s"})
    # The build that parsed on the event loop froze probes for most of the batch's time
    # (2.8 s of 4.4 s), in every batch; here the parse runs in a worker thread, in pieces.
    # Up to three batches, each later than the one before: on a fast machine a batch
    # takes under a second, and one stall of the machine (another process on the cores)
    # could hold one probe for a third of it once.
    waits: list[tuple[float, float]] = []

    def post(body: bytes) -> httpx.Response:
        return httpx.post(
            f"{server.url}/v1/events", content=body, headers={"content-type": "application/json"}, timeout=300
        )

    for attempt in range(3):
        events = [
            {"src": i % 100, "type": "AB"[i % 3 % 2], "start": float(attempt * 200_000 + i), "attrs": {"x": i}}
            for i in range(200_000)
        ]
        body = orjson.dumps({"producer": "p", "batch_id": attempt + 1, "events": events})
        answer, took, longest = probe_while(server.url, functools.partial(post, body))
        assert answer.status_code == 200 and answer.json()["accepted"] == 200_000
        print(f"200,000 events: {took:.2f} s; the longest a probe waited: {1000 * longest:.0f} ms")
        waits.append((longest, took))
        if longest < took / 3:
            break
    assert any(longest < took / 3 for longest, took in waits), waits


def test_a_10_mb_src_is_refused_naming_the_event_and_the_field(start_server: StartServer) -> None:
    server = start_server()
    events = [{"src": 1, "type": "A", "start": 1.0}, {"src": "s" * 10_000_000, "type": "A", "start": 2.0}]
    answer = httpx.post(
        f"{server.url}/v1/events", json={"producer": "p", "batch_id": 1, "events": events}, timeout=60
    )
    assert answer.status_code == 422
    assert answer.json()["detail"] == {
        "message": "event 1, field 'src': the source is longer than 256 characters",
        "index": 1,
        "field": "src",
    }
