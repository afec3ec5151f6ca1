"""Many matches per WebSocket message (``batch=N``): arrays in ``seq`` order, never
more than N, whatever is ready (backlog and live), resumable by seq; one match per
message stays the default. (A slow subscriber of batched messages: test_subscribe.py.)"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson
import pytest
from websockets.sync.client import ClientConnection, connect

from api.client import Subscription, SyncSubscription
from tests.service.conftest import Server, StartServer


def _events(batch: int, size: int) -> list[dict[str, object]]:
    return [{"src": i % 7, "type": "A", "start": float(batch * size + i)} for i in range(size)]


def _posted(start_server: StartServer, batches: int, size: int) -> Server:
    """A server whose one query matches every event, after ``batches`` posts of ``size``."""
    server = start_server()
    client = server.client()
    client.register("all", "OR(A)")
    for k in range(batches):
        client.post_events("p", k, _events(k, size))
    return server


def _ws(server: Server, query: str) -> ClientConnection:
    return connect(server.url.replace("http", "ws") + "/v1/matches/ws?" + query, proxy=None, max_size=None)


def _frames(ws: ClientConnection, total: int) -> list[Any]:
    frames: list[Any] = []
    seen = 0
    while seen < total:
        frame = orjson.loads(ws.recv(timeout=10))
        frames.append(frame)
        seen += len(frame) if isinstance(frame, list) else 1
    return frames


def test_the_backlog_and_live_matches_come_as_arrays_of_at_most_batch(start_server: StartServer) -> None:
    server = start_server()
    client = server.client()
    client.register("all", "OR(A)")
    client.post_events("p", 0, _events(0, 250))
    with _ws(server, "from_seq=0&batch=100") as ws:
        backlog = _frames(ws, 250)
        client.post_events("p", 1, _events(1, 30))
        live = _frames(ws, 30)
    assert all(isinstance(f, list) and 1 <= len(f) <= 100 for f in backlog + live)
    # The backlog page of 250 in full frames, the live batch of 30 in one.
    assert [len(f) for f in backlog] == [100, 100, 50] and [len(f) for f in live] == [30]
    seqs = [m["seq"] for f in backlog + live for m in f]
    assert seqs == list(range(280))


def test_one_match_per_message_is_still_the_default(start_server: StartServer) -> None:
    server = start_server()
    client = server.client()
    client.register("all", "OR(A)")
    client.post_events("p", 0, _events(0, 5))
    with _ws(server, "from_seq=0") as ws:
        frames = _frames(ws, 5)
    assert [f["seq"] for f in frames] == list(range(5))
    got = [m["seq"] for m in SyncSubscription(server.url, batch=1, idle_timeout=1)]
    assert got == list(range(5))


@pytest.mark.parametrize("value", ["0", "10001", "two"])
def test_a_bad_batch_is_refused_at_the_handshake(start_server: StartServer, value: str) -> None:
    server = start_server()
    ws_url = server.url.replace("http", "ws") + f"/v1/matches/ws?batch={value}"
    with pytest.raises(Exception) as caught:
        with connect(ws_url, proxy=None):
            pass
    response = caught.value.response  # type: ignore[attr-defined]
    assert response.status_code == 422
    detail = orjson.loads(response.body)["detail"]
    assert detail["field"] == "batch" and "query parameter batch" in detail["message"]
    assert httpx.get(server.url + "/readyz").status_code == 200


def test_a_subscriber_resumes_after_the_last_whole_frame(start_server: StartServer) -> None:
    server = _posted(start_server, 4, 50)
    with _ws(server, "from_seq=0&batch=64") as ws:
        first = orjson.loads(ws.recv(timeout=10))
    # Gone after one frame; the client resumes after its last seq and gets the rest once.
    last = first[-1]["seq"]
    rest = [m["seq"] for m in SyncSubscription(server.url, from_seq=last + 1, batch=64, idle_timeout=1)]
    assert [m["seq"] for m in first] + rest == list(range(200))


def test_the_client_takes_objects_and_arrays_and_drops_what_it_has_seen() -> None:
    sub = Subscription("http://127.0.0.1:1", from_seq=3)
    assert sub.url().endswith("from_seq=3&batch=1000")
    assert sub.accept(b'{"seq": 2}') == []
    assert [m["seq"] for m in sub.accept(b'[{"seq": 2}, {"seq": 3}, {"seq": 4}]')] == [3, 4]
    assert [m["seq"] for m in sub.accept(b'{"seq": 5}')] == [5]
    assert sub.next_seq == 6
    # A message wholly new is taken whole; one that starts below next_seq is filtered.
    assert [m["seq"] for m in sub.accept(b'[{"seq": 6}, {"seq": 9}]')] == [6, 9]
    assert [m["seq"] for m in sub.accept(b'[{"seq": 8}, {"seq": 9}, {"seq": 10}]')] == [10]
    assert sub.accept(b"[]") == [] and sub.next_seq == 11


def test_batches_give_each_messages_matches_once_in_seq_order(start_server: StartServer) -> None:
    server = _posted(start_server, 3, 40)
    batches = list(SyncSubscription(server.url, from_seq=10, batch=25, idle_timeout=1).batches())
    assert all(1 <= len(b) <= 25 for b in batches) and len(batches) >= 4  # as the server framed them
    assert [m["seq"] for b in batches for m in b] == list(range(10, 120))

    async def read() -> list[list[int]]:
        out = []
        async for matches in Subscription(server.url, from_seq=100, batch=8, idle_timeout=1).batches():
            out.append([m["seq"] for m in matches])
        return out

    got = asyncio.run(read())
    assert all(1 <= len(b) <= 8 for b in got) and sum(got, []) == list(range(100, 120))
