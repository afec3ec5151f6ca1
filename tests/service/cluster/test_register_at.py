"""Registering at an event time on one service (service.server.pending): the query is
held, listed as pending, and installed exactly where the stream reaches the time —
inside a batch if the time falls there —, before the first event at or after it; a
time the stream has passed is refused; a held registration survives a restart, can be
deleted, and a restart replays an installed one at the same point."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest

from api.client import ApiError, Client
from tests.service.conftest import Server, StartServer

BASE: dict[str, Any] = {"name": "ab", "text": "SEQ(A, B) WITHIN 10"}
LATE: dict[str, Any] = {"name": "late_ab", "text": "SEQ(A, B) WITHIN 10"}
LATE_FILTER: dict[str, Any] = {"name": "late_b", "text": "OR(B b) WHERE b.x > 2"}


def stream(first: int, count: int) -> list[dict[str, Any]]:
    """Events ``first`` ..: 4 sources, A and B in turn, one a second."""
    return [
        {"id": f"e{n}", "src": n % 4, "type": "AB"[(n // 4) % 2], "start": float(n), "attrs": {"x": n % 5}}
        for n in range(first, first + count)
    ]


def seen(client: Client, query: str | None = None) -> Counter[tuple[Any, ...]]:
    return Counter(
        (m["query"], str(m["src"]), repr(m["events"]))
        for m in client.all_matches()
        if query is None or m["query"] == query
    )


def test_a_query_registered_at_a_time_is_installed_where_the_stream_reaches_it(
    start_server: StartServer,
) -> None:
    held, reference = start_server().client(), start_server().client()
    for client in (held, reference):
        client.register(**BASE)
        client.post_events("job", "b0", stream(0, 40))
    at = 57.5  # inside the next batch: 40 .. 79
    info = held.register(**LATE, at=at)
    assert (info.pending, info.at) == (True, at)
    assert [(q.name, q.pending) for q in held.queries()] == [("ab", False), ("late_ab", True)]
    # A name waiting is taken.
    with pytest.raises(ApiError) as taken:
        held.register(LATE["name"], "OR(A)")
    assert taken.value.status == 409

    held.post_events("job", "b1", stream(40, 40))
    # The reference: the same stream with the query registered between the events
    # before 57.5 and those after.
    reference.post_events("job", "b1", stream(40, 18))
    reference.register(**LATE)
    reference.post_events("job", "b2", stream(58, 22))
    assert held.query("late_ab").pending is False
    got, want = seen(held, "late_ab"), seen(reference, "late_ab")
    assert got == want and sum(want.values()) > 5
    # Not vacuous: the query registered at once (before the batch) would have seen
    # events before 57.5 and made more matches.
    assert min(int(e) for m in got for e in re.findall(r"e(\d+)", m[2])) >= 58
    assert seen(held, "ab") == seen(reference, "ab")


def test_a_time_the_stream_passed_is_refused(start_server: StartServer) -> None:
    client = start_server().client()
    client.post_events("job", "b0", stream(0, 10))
    for at in (5.0, 9.0):
        with pytest.raises(ApiError) as passed:
            client.register(**LATE, at=at)
        assert passed.value.status == 409 and passed.value.detail["field"] == "at"
        assert "past event time" in passed.value.message
    assert client.queries() == []
    with pytest.raises(ApiError) as bulk:
        client._send("POST", "/v1/queries/bulk", json={"queries": [{**LATE, "at": 20}]})
    assert bulk.value.status == 422 and "once, for the whole bulk" in bulk.value.message
    infos = client.register_bulk([LATE, LATE_FILTER], at=9.5)
    assert [(i.name, i.at, i.pending) for i in infos] == [("late_ab", 9.5, True), ("late_b", 9.5, True)]


def test_held_registrations_survive_a_restart_and_can_be_deleted(start_server: StartServer) -> None:
    server: Server = start_server()
    reference = start_server().client()
    client = server.client()
    for c in (client, reference):
        c.register(**BASE)
        c.post_events("job", "b0", stream(0, 20))
    client.register(**LATE, at=30.0)
    client.register(**LATE_FILTER, at=45.0)
    client.register("dropped", "OR(A)", at=25.0)
    client.delete_query("dropped")
    server.restart()
    client = server.client()
    assert [(q.name, q.at, q.pending) for q in client.queries()] == [
        ("ab", None, False),
        ("late_ab", 30.0, True),
        ("late_b", 45.0, True),
    ]
    client.post_events("job", "b1", stream(20, 20))  # up to 39: late_ab installed, late_b not
    assert [q.pending for q in client.queries()] == [False, False, True]
    # A restart replays the installation at the same point: nothing changes.
    before = seen(client)
    server.restart()
    client = server.client()
    assert seen(client) == before
    assert [q.pending for q in client.queries()] == [False, False, True]
    client.post_events("job", "b2", stream(40, 20))
    # A time advance reaches a held time too.
    reference.post_events("job", "b1", stream(20, 10))
    reference.register(**LATE)
    reference.post_events("job", "b2", stream(30, 15))
    reference.register(**LATE_FILTER)
    reference.post_events("job", "b3", stream(45, 15))
    assert seen(client) == seen(reference)
    assert seen(client, "late_b") and seen(client, "late_ab")
    assert "dropped" not in {q.name for q in client.queries()}


def test_a_time_advance_installs_a_held_query(start_server: StartServer) -> None:
    client = start_server().client()
    client.post_events("job", "b0", stream(0, 10))
    client.register(**LATE_FILTER, at=20.0)
    client.advance_time(19.0)
    assert client.query("late_b").pending
    client.advance_time(20.0)
    assert not client.query("late_b").pending
    client.post_events("job", "b1", stream(20, 8))
    assert sum(seen(client, "late_b").values()) == sum(
        1 for e in stream(20, 8) if e["type"] == "B" and e["attrs"]["x"] > 2
    )


def test_a_held_registration_before_any_event_survives_restarts(start_server: StartServer) -> None:
    """Held in the log's head, which a snapshot of the registered queries may stand
    for: the snapshot stands for the queries before it only."""
    server: Server = start_server()
    reference = start_server().client()
    client = server.client()
    client.register(**BASE)
    client.register(**LATE, at=12.0)
    server.restart()
    client = server.client()
    assert [(q.name, q.pending) for q in client.queries()] == [("ab", False), ("late_ab", True)]
    client.post_events("job", "b0", stream(0, 30))
    server.restart()
    client = server.client()
    assert [(q.name, q.pending) for q in client.queries()] == [("ab", False), ("late_ab", False)]
    reference.register(**BASE)
    reference.post_events("job", "b0", stream(0, 12))
    reference.register(**LATE)
    reference.post_events("job", "b1", stream(12, 18))
    assert seen(client) == seen(reference) and seen(client, "late_ab")


def test_a_waiting_query_is_read_as_at_name_once_installed(start_server: StartServer) -> None:
    client = start_server().client()
    client.post_events("job", "b0", stream(0, 10))
    client.register("bs", "OR(B b)", at=20.0)
    for at in (None, 21.0):
        with pytest.raises(ApiError) as refused:
            client.register("reads", "SEQ(@bs x, A) WITHIN 10", at=at)
        assert refused.value.status == 409 and "waits for event time 20" in refused.value.message
    # Registered together with it, a reader is held and installed with it.
    client.register_bulk(
        [{"name": "b2", "text": "OR(B b)"}, {"name": "reads2", "text": "SEQ(@b2 x, A) WITHIN 10"}], at=20.0
    )
    client.post_events("job", "b1", stream(10, 30))
    assert not any(q.pending for q in client.queries())
    assert seen(client, "reads2")
