"""Deleting at an event time on one service (service.server.pending): the delete is
held, the query listed with ``deleting_at``, and removed exactly where the stream
reaches the time — inside a batch if the time falls there —: it matches every event
before it and none at or after; a time the stream has passed is refused; a held delete
survives a restart (in the log's head too), can be cancelled, and a restart replays an
applied one at the same point."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest

from api.client import ApiError, Client
from tests.service.cluster.test_register_at import BASE, LATE, LATE_FILTER, seen, stream
from tests.service.conftest import Server, StartServer


def ids(matches: Counter[tuple[Any, ...]]) -> list[int]:
    return [int(e) for m in matches for e in re.findall(r"e(\d+)", m[2])]


def test_a_query_deleted_at_a_time_matches_up_to_it_and_not_after(start_server: StartServer) -> None:
    held, reference = start_server().client(), start_server().client()
    for client in (held, reference):
        client.register(**BASE)
        client.register(**LATE)
        client.post_events("job", "b0", stream(0, 40))
    at = 57.5  # inside the next batch: 40 .. 79
    info = held.delete_query("late_ab", at=at)
    assert info is not None and info.deleting_at == at
    assert [(q.name, q.deleting_at) for q in held.queries()] == [("ab", None), ("late_ab", at)]
    assert held.query("late_ab").deleting_at == at
    # Still there: its name is taken, and a second held delete is refused.
    with pytest.raises(ApiError) as taken:
        held.register(LATE["name"], "OR(A)")
    assert taken.value.status == 409
    with pytest.raises(ApiError) as twice:
        held.delete_query("late_ab", at=70.0)
    assert twice.value.status == 409 and "already being deleted" in twice.value.message

    held.post_events("job", "b1", stream(40, 40))
    # The reference: the same stream with the query deleted between the events before
    # 57.5 and those after.
    reference.post_events("job", "b1", stream(40, 18))
    reference.delete_query("late_ab")
    reference.post_events("job", "b2", stream(58, 22))
    assert [q.name for q in held.queries()] == ["ab"]
    with pytest.raises(ApiError) as gone:
        held.query("late_ab")
    assert gone.value.status == 404
    got, want = seen(held, "late_ab"), seen(reference, "late_ab")
    assert got == want
    # Not vacuous: it matched inside the batch before the time, and the query kept
    # (ab, the same pattern) matched after it.
    assert max(ids(got)) in range(40, 58)
    assert max(ids(seen(held, "ab"))) >= 58
    assert seen(held, "ab") == seen(reference, "ab")
    # The name is free again.
    held.register(LATE["name"], "OR(A)")


def test_a_delete_at_a_time_the_stream_passed_is_refused(start_server: StartServer) -> None:
    client = start_server().client()
    client.register(**LATE)
    client.post_events("job", "b0", stream(0, 10))
    for at in (5.0, 9.0):
        with pytest.raises(ApiError) as passed:
            client.delete_query("late_ab", at=at)
        assert passed.value.status == 409 and passed.value.detail["field"] == "at"
        assert "past event time" in passed.value.message and "released clock is 9" in passed.value.message
    assert client.query("late_ab").deleting_at is None
    with pytest.raises(ApiError) as unknown:
        client.delete_query("nobody", at=20.0)
    assert unknown.value.status == 404
    with pytest.raises(ApiError) as infinite:
        client._send("DELETE", "/v1/queries/late_ab", params={"at": "inf"})
    assert infinite.value.status == 422


def test_a_held_delete_survives_restarts_and_can_be_cancelled(start_server: StartServer) -> None:
    server: Server = start_server()
    reference = start_server().client()
    client = server.client()
    for c in (client, reference):
        c.register(**BASE)
        c.register(**LATE)
        c.register(**LATE_FILTER)
        c.post_events("job", "b0", stream(0, 20))
    client.delete_query("late_ab", at=30.0)
    client.delete_query("ab", at=25.0)
    assert client.cancel_delete("ab").deleting_at is None
    with pytest.raises(ApiError) as none:
        client.cancel_delete("ab")
    assert none.value.status == 409
    server.restart()
    client = server.client()
    assert [(q.name, q.deleting_at) for q in client.queries()] == [
        ("ab", None),
        ("late_ab", 30.0),
        ("late_b", None),
    ]
    client.delete_query("late_b", at=45.0)
    client.post_events("job", "b1", stream(20, 20))  # up to 39: late_ab deleted, late_b not
    assert [(q.name, q.deleting_at) for q in client.queries()] == [("ab", None), ("late_b", 45.0)]
    # A restart replays the delete at the same point: nothing changes.
    before = seen(client)
    server.restart()
    client = server.client()
    assert seen(client) == before
    assert [(q.name, q.deleting_at) for q in client.queries()] == [("ab", None), ("late_b", 45.0)]
    client.post_events("job", "b2", stream(40, 20))
    reference.post_events("job", "b1", stream(20, 10))
    reference.delete_query("late_ab")
    reference.post_events("job", "b2", stream(30, 15))
    reference.delete_query("late_b")
    reference.post_events("job", "b3", stream(45, 15))
    assert seen(client) == seen(reference)
    assert [q.name for q in client.queries()] == ["ab"]
    assert seen(client, "late_b") and seen(client, "late_ab") and seen(client, "ab")
    server.restart()
    assert seen(server.client()) == seen(reference)


def test_a_time_advance_reaches_a_held_delete(start_server: StartServer) -> None:
    client = start_server().client()
    client.register(**LATE_FILTER)
    client.post_events("job", "b0", stream(0, 10))
    client.delete_query("late_b", at=20.0)
    client.advance_time(19.0)
    assert client.query("late_b").deleting_at == 20.0
    client.advance_time(20.0)
    assert [q.name for q in client.queries()] == []
    client.post_events("job", "b1", stream(20, 8))
    assert all(n < 20 for n in ids(seen(client, "late_b"))) and seen(client, "late_b")


def test_a_held_delete_in_the_logs_head_and_of_a_held_registration(start_server: StartServer) -> None:
    """Before any event (the part of the log a snapshot stands for), and of a query
    itself waiting: deleted at a time before its own, it never runs; after, it runs
    between the two."""
    server: Server = start_server()
    client = server.client()
    client.register(**BASE)
    client.register(**LATE, at=30.0)
    client.register(**LATE_FILTER, at=10.0)
    client.delete_query("late_ab", at=20.0)  # before its registration's time: never runs
    client.delete_query("late_b", at=25.0)  # runs from 10 to 25
    client.delete_query("ab", at=15.0)
    server.restart()
    client = server.client()
    assert [(q.name, q.pending, q.deleting_at) for q in client.queries()] == [
        ("ab", False, 15.0),
        ("late_ab", True, 20.0),
        ("late_b", True, 25.0),
    ]
    client.post_events("job", "b0", stream(0, 40))
    server.restart()
    client = server.client()
    assert client.queries() == []
    assert not seen(client, "late_ab")
    assert sorted(set(ids(seen(client, "late_b")))) == [
        e["start"]
        for e in stream(0, 40)
        if e["type"] == "B" and e["attrs"]["x"] > 2 and 10 <= e["start"] < 25
    ]
    assert max(ids(seen(client, "ab"))) < 15 and seen(client, "ab")


def test_readers_and_held_deletes(start_server: StartServer) -> None:
    """A query read as @name is deleted at a time only after (or with) its readers; a
    query being deleted cannot be read by a new one."""
    client: Client = start_server().client()
    client.register("base", "SEQ(A, B) WITHIN 10")
    client.register("reader", "SEQ(@base, A) WITHIN 20")
    with pytest.raises(ApiError) as read:
        client.delete_query("base", at=30.0)
    assert read.value.status == 409 and read.value.detail["dependents"] == ["reader"]
    client.delete_query("reader", at=30.0)
    with pytest.raises(ApiError) as later:
        client.delete_query("base", at=20.0)  # before its reader goes
    assert later.value.status == 409
    client.delete_query("base", at=30.0)
    with pytest.raises(ApiError) as cancel:
        client.cancel_delete("reader")
    assert cancel.value.status == 409 and "cancel that delete first" in cancel.value.message
    with pytest.raises(ApiError) as new:
        client.register("other", "SEQ(@base, B) WITHIN 20")
    assert new.value.status == 409 and "being deleted" in new.value.message
    with pytest.raises(ApiError) as checked:
        client.validate("SEQ(@base, B) WITHIN 20", name="other")
    assert checked.value.status == 409 and "being deleted" in checked.value.message
    client.post_events("job", "b0", stream(0, 40))
    assert client.queries() == []


def test_the_async_client_deletes_at_a_time_and_cancels(start_server: StartServer) -> None:
    import asyncio

    from api.client import AsyncClient

    server = start_server()
    server.client().register(**LATE)
    server.client().post_events("job", "b0", stream(0, 10))

    async def main() -> tuple[float | None, float | None, bool]:
        async with AsyncClient(server.url) as client:
            held = await client.delete_query("late_ab", at=20.0)
            kept = await client.cancel_delete("late_ab")
            gone = await client.delete_query("late_ab")
            return held.deleting_at if held else None, kept.deleting_at, gone is None

    assert asyncio.run(main()) == (20.0, None, True)
    assert server.client().queries() == []
