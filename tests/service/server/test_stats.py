"""``GET /v1/stats``: what the engine holds, and which kernel it runs (a server on the
pure kernel also says so in its log when it starts)."""

from __future__ import annotations

import httpx

from ecq.kernel.select import status
from tests.service.conftest import StartServer

WARNING = "warning: running the pure-Python kernel of the engine"


def test_stats_say_what_the_engine_holds_and_its_kernel(start_server: StartServer) -> None:
    server = start_server()
    client = server.client()
    client.register("ab", "SEQ(A, B) WITHIN 10 s")
    client.register("abc", "SEQ(A, B, C) WITHIN 10 s")
    client.post_events("p", 1, [{"src": 1, "type": "A", "start": 1}, {"src": 1, "type": "B", "start": 2}])
    stats = client.stats()
    assert stats.kernel == status().kind
    assert (stats.queries, stats.derived_classes, stats.ecqs) == (2, 0, 3)
    assert (stats.events, stats.clock, stats.next_seq, stats.pending_matches) == (2, 2.0, 1, 0)
    assert stats.stored_instances == 2 and stats.pmb_entries >= 2
    assert (WARNING in server.log.read_text()) == (not status().compiled)


def test_a_server_on_the_pure_kernel_says_so(start_server: StartServer) -> None:
    server = start_server(SCEMON_PURE="1")
    stats = server.client().stats()
    assert stats.kernel == "pure" and stats.clock is None and stats.events == 0
    assert f"{WARNING}, several times slower (SCEMON_PURE is set)" in server.log.read_text()


def test_stats_need_a_token_when_tokens_are_set(start_server: StartServer) -> None:
    server = start_server(tokens="r:reader")
    assert httpx.get(f"{server.url}/v1/stats").status_code == 401
    assert server.client("r").stats().queries == 0
