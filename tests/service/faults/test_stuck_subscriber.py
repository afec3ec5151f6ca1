"""A subscriber that never reads: it is cut off and counted while it still holds its
connection (the metrics say so at once), and neither ingestion nor the other
subscribers wait for it."""

from __future__ import annotations

import time

import httpx
import pytest
from websockets.sync.client import connect

from api.client import SyncSubscription
from tests.service.conftest import StartServer
from tests.service.server.test_matches import collect

pytestmark = pytest.mark.faults

PAD = "x" * 3000


def metric(url: str, name: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no {name}")


def test_a_subscriber_that_never_reads_is_counted_while_it_is_stuck(start_server: StartServer) -> None:
    server = start_server(SCEMON_SUBSCRIBER_QUEUE="50")
    client = server.client()
    client.register("all", "OR(A a) RETURN a.pad AS pad")
    ws_url = server.url.replace("http", "ws") + "/v1/matches/ws"
    reader: list[dict[str, object]] = []
    collect(SyncSubscription(server.url, idle_timeout=30, max_retries=1), reader)
    # max_queue=1: once one message waits, the client stops reading its socket, which
    # then fills, and so does the server's side.
    with connect(ws_url, max_queue=1, max_size=None, proxy=None, compression=None):
        time.sleep(0.3)
        posted = 0
        for batch in range(40):
            events = [
                {"src": i, "type": "A", "start": float(batch * 100 + i), "attrs": {"pad": PAD}}
                for i in range(100)
            ]
            client.post_events("p", batch, events)  # acknowledged: the hub never waits
            posted += len(events)
        deadline = time.monotonic() + 10
        while metric(server.url, "scemon_subscribers_blocked") < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        # Still connected, not reading, and already counted.
        assert metric(server.url, "scemon_subscriber_overflows_total") == 1
        assert metric(server.url, "scemon_subscribers_blocked") == 1
        assert metric(server.url, "scemon_subscribers") == 2
        # The other subscriber got everything meanwhile.
        deadline = time.monotonic() + 30
        while len(reader) < posted and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [m["seq"] for m in reader] == list(range(posted))
    # Gone: no longer blocked, still counted once.
    deadline = time.monotonic() + 30
    while metric(server.url, "scemon_subscribers_blocked") > 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert metric(server.url, "scemon_subscribers_blocked") == 0
    assert metric(server.url, "scemon_subscriber_overflows_total") == 1
