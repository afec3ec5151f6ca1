"""``GET /v1/stats`` (the service's figures in JSON), ``GET /v1/whoami`` (what a token
may do) and the subscriber backlog they and ``/metrics`` report."""

from __future__ import annotations

import time

import httpx
import pytest
from websockets.sync.client import connect

from api.client import ApiError
from ecq import __version__
from ecq.kernel.select import status
from tests.service.conftest import StartServer

TOKENS = "adm-secret:admin,prod-secret:producer,read-secret:reader"


def test_stats_count_what_the_service_did(start_server: StartServer) -> None:
    server = start_server()
    client = server.client()
    first = client.stats()
    assert first.state == "ok" and first.events == 0 and first.matches == 0 and first.ingest.count == 0
    assert first.store_bytes > 0 and first.subscriber_queue == 50_000
    assert first.kernel == status().kind
    assert first.version == __version__
    assert abs(first.started + first.uptime - time.time()) < 5
    client.register("ab", "SEQ(A, B) WITHIN 10 s")
    events = [{"src": 1, "type": "A", "start": 1}, {"src": 1, "type": "B", "start": 2}]
    client.post_events("p", 1, events)
    client.post_events("p", 1, events)  # a duplicate
    client.post_events("p", 2, [{"src": 2, "type": "A", "start": 3}])
    stats = client.stats()
    assert (stats.events, stats.batches, stats.duplicates, stats.matches) == (3, 2, 1, 1)
    assert stats.uptime > first.uptime
    assert stats.ingest.count == 3 and stats.ingest.seconds > 0
    bounds = [bound for bound, _ in stats.ingest.buckets]
    within = [n for _, n in stats.ingest.buckets]
    assert bounds == sorted(bounds) and within == sorted(within) and within[-1] <= 3
    assert stats.engine["queries"] == 1 and stats.engine["stored_instances"] == 2
    assert stats.engine["clock"] == 3.0
    assert stats.subscribers == 0 and stats.backlog == 0 and stats.overflows == 0


def test_the_backlog_is_the_matches_queued_for_subscribers(start_server: StartServer) -> None:
    """A subscriber that connects and stops reading: once the socket's buffers are full,
    the matches it was not sent wait in its queue on the server, and the stats and the
    metrics say how many."""
    server = start_server()
    client = server.client()
    client.register("a", "PATTERN A a\nRETURN a.pad AS pad")
    url = server.url.replace("http", "ws") + "/v1/matches/ws"
    # max_queue=1: the client's reader thread stops taking frames off the socket at once;
    # no compression, or the padding would shrink to nothing.
    with connect(url, proxy=None, max_queue=1, compression=None):
        deadline = time.monotonic() + 10
        while client.stats().subscribers != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        pad = "x" * 4000  # 4 kB a match: 40 MB in all, far more than socket buffers hold
        for batch in range(20):
            events = [
                {"src": 1, "type": "A", "start": batch * 500 + i, "attrs": {"pad": pad}} for i in range(500)
            ]
            client.post_events("p", batch, events)
        stats = client.stats()
        assert stats.subscribers == 1 and stats.matches == 10_000
        assert 0 < stats.backlog == stats.backlog_max < 10_000
        metrics = client.metrics()
        assert f"scemon_subscriber_backlog {float(stats.backlog)}" in metrics
        assert f"scemon_subscriber_backlog_max {float(stats.backlog)}" in metrics


@pytest.mark.parametrize(
    ("token", "role", "may"),
    [
        ("adm-secret", "admin", ["manage_queries", "post_events", "read_matches", "read_queries"]),
        ("prod-secret", "producer", ["post_events", "read_queries"]),
        ("read-secret", "reader", ["read_matches", "read_queries"]),
    ],
)
def test_whoami_says_what_a_token_may_do(
    start_server: StartServer, token: str, role: str, may: list[str]
) -> None:
    server = start_server(tokens=TOKENS)
    identity = server.client(token).whoami()
    assert (identity.auth, identity.role, identity.may) == (True, role, may)
    for bad in (None, "guess"):
        with pytest.raises(ApiError) as caught:
            server.client(bad).whoami()
        assert caught.value.status == 401
    # Stats need a token too, of any role.
    assert httpx.get(f"{server.url}/v1/stats").status_code == 401
    assert server.client(token).stats().state == "ok"


def test_whoami_with_auth_off_may_do_everything(start_server: StartServer) -> None:
    identity = start_server().client().whoami()
    assert identity.auth is False and identity.role is None
    assert identity.may == ["manage_queries", "post_events", "read_matches", "read_queries"]


def test_stats_name_the_kernel_the_engine_runs(start_server: StartServer) -> None:
    assert start_server(SCEMON_PURE="1").client().stats().kernel == "pure"


def test_a_server_on_the_pure_kernel_says_so(start_server: StartServer) -> None:
    """Never the slow kernel silently: the stats name it, and the server's log has the
    one warning line ``scemon serve`` prints with the reason."""
    warning = "warning: running the pure-Python kernel of the engine, several times slower"
    pure = start_server(SCEMON_PURE="1")
    assert pure.client().stats().kernel == "pure"
    assert f"{warning} (SCEMON_PURE is set)" in pure.log.read_text()
    if status().compiled:
        compiled = start_server()
        assert compiled.client().stats().kernel == "compiled"
        assert warning not in compiled.log.read_text()
