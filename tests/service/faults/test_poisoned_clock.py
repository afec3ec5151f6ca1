"""The clock cannot be poisoned from inside ``--max-ahead``: a second producer's
staircase of far-ahead events leaves the first producer's matching as it would be
alone (the clock is the slowest live producer's, and a batch is held to the clock it
found); an event at today's epoch time in a stream of small times is refused; ``scemon
admin repair-clock --to T`` rolls a poisoned clock back; absurd times are refused."""

from __future__ import annotations

import time
from typing import Any

import pytest

from api.client import ApiError, Client
from tests.service.conftest import StartServer, scemon
from tests.service.server.feeds import QUERIES, arrow_table, make_batches

pytestmark = pytest.mark.faults


def _register(client: Client) -> None:
    client.register_bulk([{"name": name, "text": text} for name, text in QUERIES])


def _without_seq(matches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k != "seq"} for m in matches]


def _refused(call: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call()
    assert caught.value.status == 422, caught.value
    return caught.value


def test_a_second_producers_staircase_does_not_poison_the_first(start_server: StartServer) -> None:
    server, control = start_server(), start_server()
    client, alone = server.client(), control.client()
    _register(client)
    _register(alone)
    batches = make_batches(seed=31, n_batches=10, size=40)
    for batch_id, events in batches[:3]:
        client.post_events("a", batch_id, events)
        alone.post_events("a", batch_id, events)
    clock = client.stats().clock
    assert clock is not None

    # The tester's staircase: batches of 100 events, each 86,000 s after the previous.
    for k in range(20):
        stairs = [{"src": "z", "type": "Z", "start": clock + 86_000.0 * (i + 1)} for i in range(100)]
        err = _refused(lambda: client.post_events("b", f"stairs-{k}", stairs))  # noqa: B023
        assert err.detail["field"] == "end" and err.detail["indexes"] == list(range(1, 100))
    # Within the bound, "b" runs ahead of "a": its events wait for "a" to reach them.
    ahead = [{"src": "z", "type": "Z", "start": clock + 1000.0 * (i + 1)} for i in range(80)]
    assert client.post_events("b", "ahead", ahead).accepted == 80
    # The bound is measured from the clock, the slowest producer's, not from "b"'s own.
    further = [{"src": "z", "type": "Z", "start": clock + 80_000.0 + 80_000.0}]
    _refused(lambda: client.post_events("b", "further", further))
    stats = client.stats()
    assert stats.clock == clock and stats.held == 80
    assert set(stats.producers) == {"a", "b"} and stats.producers["b"] == clock + 80_000.0

    # Held events and the producers' watermarks survive a restart.
    server.restart()
    client = server.client()
    assert client.stats().held == 80
    for batch_id, events in batches[3:]:
        # Late only as the stream alone is (its own disorder across batches).
        assert client.post_events("a", batch_id, events) == alone.post_events("a", batch_id, events)
    got, want = _without_seq(client.all_matches()), _without_seq(alone.all_matches())
    assert got == want and len(want) > 50
    assert client.stats().held == 80


def test_an_epoch_time_event_in_a_stream_of_small_times_is_refused(start_server: StartServer) -> None:
    server = start_server()
    client = server.client()
    _register(client)
    batches = make_batches(seed=32, n_batches=6, size=40, t0=36_000.0)
    for batch_id, events in batches[:3]:
        client.post_events("p", batch_id, events)
    clock = client.stats().clock
    today = {"id": "today", "src": "s1", "type": "A", "start": time.time()}
    err = _refused(lambda: client.post_events("p", "bad", [*batches[3][1][:5], today]))
    assert (err.detail["index"], err.detail["field"], err.detail["indexes"]) == (5, "end", [5])
    assert "not read as seconds since 1970" in err.message
    err = _refused(lambda: client.advance_time(time.time()))
    assert err.detail["field"] == "time"
    assert client.stats().clock == clock
    found = 0
    for batch_id, events in batches[3:]:
        result = client.post_events("p", batch_id, events)
        assert result.late < 5 and all(e.by < 5.0 for e in result.late_events), result  # its own jitter only
        found += result.matches
    assert found > 10


def test_repair_clock_to_rolls_a_poisoned_clock_back(start_server: StartServer) -> None:
    # Poisoned the way a bound of inf lets it be: an epoch time in a small-time stream.
    server = start_server(SCEMON_MAX_AHEAD="inf")
    client = server.client()
    _register(client)
    batches = make_batches(seed=33, n_batches=8, size=40, t0=36_000.0)
    for batch_id, events in batches[:3]:
        client.post_events("p", batch_id, events)
    poison = time.time()
    client.post_events("p", "poison", [{"id": "today", "src": "s1", "type": "A", "start": poison}])
    assert client.post_events("p", batches[3][0], batches[3][1]).late == 40  # every later event is late
    last_good = max(float(e.get("end", e["start"])) for _, events in batches[:4] for e in events)
    server.stop()

    dry = scemon("admin", "repair-clock", "--data", server.data, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would take out event 'today'" in dry.stdout and "nothing changed" in dry.stderr
    assert "nothing to repair" not in dry.stderr
    bad = scemon("admin", "repair-clock", "--data", server.data, "--to", "1e300")
    assert bad.returncode == 1 and "--to must be a time within" in bad.stderr
    done = scemon("admin", "repair-clock", "--data", server.data, "--to", repr(last_good))
    assert done.returncode == 0, done.stderr
    assert "took out event 'today'" in done.stdout
    assert f"clock {poison:g} -> {last_good:g}" in done.stderr

    assert server.env is not None
    del server.env["SCEMON_MAX_AHEAD"]
    server.start()
    client = server.client()
    assert client.stats().clock == last_good
    found = 0
    for batch_id, events in batches[4:]:
        result = client.post_events("p", batch_id, events)
        assert result.late < 5 and all(e.by < 5.0 for e in result.late_events), result  # its own jitter only
        found += result.matches
    assert found > 10


@pytest.mark.parametrize(
    ("field", "value"),
    [("start", -1e308), ("start", -1.1e12), ("end", 1e13), ("start", 1.7e12)],
)
def test_absurd_times_are_refused(start_server: StartServer, field: str, value: float) -> None:
    server = start_server(SCEMON_MAX_AHEAD="inf")
    client = server.client()
    client.post_events("p", 1, [{"src": "s1", "type": "A", "start": 5.0}])
    event: dict[str, Any] = {"src": "s1", "type": "A", "start": 6.0, field: value}
    ok = {"src": "s1", "type": "A", "start": 7.0}
    err = _refused(lambda: client.post_events("p", 2, [ok, event]))
    assert (err.detail["index"], err.detail["field"]) == (1, field)
    assert "outside the accepted times" in err.message
    table = arrow_table([ok, event])
    err = _refused(lambda: client.post_arrow("p", 3, table))
    assert (err.detail["index"], err.detail["field"]) == (1, field)
    err = _refused(lambda: client.advance_time(value))
    assert err.detail["field"] == "time"
    assert client.stats().clock == 5.0
