"""Matches over polling and over WebSocket equal the reference evaluator's, for batches
posted as JSON and as Arrow; a replayed batch changes nothing."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from api.client import AsyncClient, Subscription, SyncSubscription
from tests.service.conftest import StartServer
from tests.service.server.feeds import FLUSH, QUERIES, Feed, arrow_table, expected, make_batches, query_json


def collect(sub: SyncSubscription, out: list[dict[str, Any]]) -> threading.Thread:
    def run() -> None:
        try:
            for match in sub:
                out.append(match)
        except Exception:  # the server went away at the end of the test
            pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def wait_for(out: list[dict[str, Any]], count: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def test_matches_over_polling_and_websocket_equal_the_reference(start_server: StartServer) -> None:
    server = start_server()
    client = server.client()
    # Half as text, half as AST JSON, in one all-or-nothing call.
    entries = [
        {"name": name, "text": text} if i % 2 else {"name": name, "pattern": query_json(text)}
        for i, (name, text) in enumerate(QUERIES)
    ]
    assert [q.name for q in client.register_bulk(entries)] == [name for name, _ in QUERIES]
    live: list[dict[str, Any]] = []
    filtered: list[dict[str, Any]] = []
    collect(SyncSubscription(server.url, idle_timeout=20, max_retries=1), live)
    collect(
        SyncSubscription(server.url, queries=["trail", "reads"], idle_timeout=20, max_retries=1), filtered
    )
    time.sleep(0.3)  # both subscribed before the first batch

    feed = Feed()
    released = 0
    for k, (batch_id, events) in enumerate(make_batches(seed=7, n_batches=8, size=40)):
        released += feed.post(client, "producer-1", batch_id, events, arrow=k % 2 == 1)
    released += client.advance_time(FLUSH).matches

    want = expected(QUERIES, feed.arrivals)
    polled = client.all_matches(page=100)
    assert released == len(polled) == len(want)
    assert [m["seq"] for m in polled] == list(range(len(polled)))
    assert feed.as_arrivals(polled) == want

    wait_for(live, len(want))
    assert live == polled
    wanted = [m for m in polled if m["query"] in ("trail", "reads")]
    wait_for(filtered, len(wanted))
    assert filtered == wanted

    # A late subscriber gets the backlog from any seq; per-query polling agrees.
    middle = len(polled) // 2
    assert list(SyncSubscription(server.url, from_seq=middle, idle_timeout=1)) == polled[middle:]
    assert client.all_matches(query="trail", page=7) == [m for m in polled if m["query"] == "trail"]
    counts = {q.name: q.matches for q in client.queries()}
    assert counts == {name: sum(m["query"] == name for m in polled) for name, _ in QUERIES}
    last_end = max(m["end"] for m in polled if m["query"] == "disj")
    assert client.query("disj").last_match == last_end


def test_a_replayed_batch_is_acknowledged_and_changes_nothing(start_server: StartServer) -> None:
    server = start_server()
    client = server.client()
    client.register("ab", "SEQ(A, B) WITHIN 10 s")
    events = [{"src": 1, "type": "A", "start": 1}, {"src": 1, "type": "B", "start": 2}]
    first = client.post_events("spark", 7, events)
    assert (first.accepted, first.duplicate, first.matches) == (2, False, 1)
    before = client.all_matches()
    # The same key again, as JSON with the id as text, and as Arrow (headers are text).
    again = client.post_events("spark", "7", events)
    assert (again.accepted, again.duplicate, again.matches) == (0, True, 0)
    arrow = client.post_arrow("spark", 7, arrow_table([{**e, "src": "1"} for e in events]))
    assert arrow.duplicate
    assert client.all_matches() == before
    assert "scemon_duplicate_batches_total 2.0" in client.metrics()
    # Another producer may use the same batch id.
    assert not client.post_events("other", 7, events).duplicate


def test_a_batch_is_sorted_by_end_then_start_before_matching(start_server: StartServer) -> None:
    server = start_server()
    client = server.client()
    client.register("ab", "SEQ(A, B) WITHIN 10 s MODE ALL")
    # Posted B first: sorted, the A (end 1) comes before the B (end 3).
    result = client.post_events(
        "p", "b1", [{"src": "s", "type": "B", "start": 2, "end": 3}, {"src": "s", "type": "A", "start": 1}]
    )
    assert result.matches == 1
    [match] = client.all_matches()
    assert match["events"] == ["b1:1", "b1:0"]  # ids name the posted positions


def test_the_async_client_and_subscription(start_server: StartServer) -> None:
    server = start_server()

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        async with AsyncClient(server.url) as client:
            await client.register_bulk([{"name": "ab", "text": "SEQ(A, B) WITHIN 10 s"}])
            assert [q.name for q in await client.queries()] == ["ab"]
            await client.post_events(
                "p", 1, [{"src": 1, "type": "A", "start": 1}, {"src": 1, "type": "B", "start": 2}]
            )
            await client.post_arrow(
                "p",
                2,
                arrow_table([{"src": "2", "type": "A", "start": 3}, {"src": "2", "type": "B", "start": 4}]),
            )
            assert (await client.advance_time(100)).clock == 100
            page = await client.matches()
            streamed = [m async for m in Subscription(server.url, idle_timeout=1)]
            return [m.model_dump() for m in page.matches], streamed

    polled, streamed = asyncio.run(scenario())
    assert [m["events"] for m in polled] == [["1:0", "1:1"], ["2:0", "2:1"]]
    assert streamed == polled


def test_websocket_compression_is_negotiated_only_when_configured(start_server: StartServer) -> None:
    """A client offering permessage-deflate (the websockets library does by default)
    gets plain frames unless the server is started with SCEMON_WS_COMPRESSION: the
    server would compress every frame once per subscriber."""
    from websockets.asyncio.client import connect

    async def extensions(url: str) -> str | None:
        ws_url = url.replace("http://", "ws://") + "/v1/matches/ws?from_seq=0"
        async with connect(ws_url, compression="deflate", proxy=None) as ws:
            assert ws.response is not None
            return ws.response.headers.get("Sec-WebSocket-Extensions")

    plain = start_server()
    assert asyncio.run(extensions(plain.url)) is None
    compressed = start_server(SCEMON_WS_COMPRESSION="1")
    assert "permessage-deflate" in (asyncio.run(extensions(compressed.url)) or "")
