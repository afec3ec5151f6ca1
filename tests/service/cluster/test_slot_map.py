"""The slot map (api.routing.SlotMap) and the splice of a move (service.server.sharding):
pure functions, no server."""

from __future__ import annotations

import zlib

import pytest

from api.routing import SLOTS, SlotMap, owner_of, parse_slots, slot_of
from ecq.event import Event
from service.server.sharding import splice
from service.server.store import BATCH, REGISTER, TIME, Op, events_body, events_of


def test_the_default_map_deals_slots_out_and_is_the_old_rule_for_powers_of_two() -> None:
    for n in (1, 2, 3, 4, 8):
        m = SlotMap.default(n)
        assert sorted(len(m.slots_of(k)) for k in range(n)) == sorted(
            SLOTS // n + (k < SLOTS % n) for k in range(n)
        )
        for name in ("card-7", "feed-3", "S1", ""):
            assert owner_of(("src",), name, m) == owner_of(("src",), name, n)
            if n in (1, 2, 4, 8):
                assert owner_of(("src",), name, n) == zlib.crc32(name.encode()) % n
    assert slot_of((), None) == 0  # NONE's single value
    with pytest.raises(ValueError, match="at least one shard"):
        SlotMap.default(0)


def test_rebalancing_moves_few_slots_and_keeps_shares_even() -> None:
    one = SlotMap.default(["a"])
    two = one.rebalanced(["a", "b"])
    assert two.owners == SlotMap.default(["a", "b"]).owners and two.epoch == 1
    three = two.rebalanced(["a", "b", "c"])
    assert [len(three.slots_of(k)) for k in range(3)] == [1366, 1365, 1365]
    # Only slots going to the new shard move, and they are spread, not one block.
    moved = [s for s in range(SLOTS) if two.owners[s] != three.owners[s]]
    assert len(moved) == 1365 and all(three.owners[s] == 2 for s in moved)
    assert min(moved) < 100 and max(moved) > SLOTS - 100
    # The same list again: the same map (not a new epoch); a shard left out gives all up.
    assert three.rebalanced(["a", "b", "c"]) is three
    back = three.rebalanced(["a", "c"])
    assert back.shards == ("a", "c") and [len(back.slots_of(k)) for k in range(2)] == [2048, 2048]


def test_the_wire_form_and_ranges() -> None:
    m = SlotMap.default(["a", "b", "c"]).moved(range(10), 2)
    assert SlotMap.from_json(m.to_json()) == m and m.epoch == 1
    assert SlotMap.from_ranges(3, [[0, 99, 1], [100, SLOTS - 1, 0]], ["a", "b"]).slots_of(1) == list(
        range(100)
    )
    for data, message in [
        ({"epoch": 1, "ranges": [[0, 10, 0]]}, "slot 11 has no owner"),
        ({"epoch": 1, "ranges": [[0, SLOTS - 1, 0], [5, 5, 0]]}, "slot 5 is given twice"),
        ({"epoch": 1, "ranges": [[0, SLOTS, 0]]}, "not a range within 0-4095"),
        ({"epoch": -1, "ranges": [[0, SLOTS - 1, 0]]}, "non-negative"),
        ({"epoch": 1, "owners": "AAAA"}, "all 4096 slots, not 1"),
        ({"epoch": 1, "shards": ["a"], "ranges": [[0, SLOTS - 1, 1]]}, "must be a shard of the map"),
        ({"epoch": 1, "owners": m.to_json()["owners"], "ranges": [[0, SLOTS - 1, 0]]}, "not both"),
    ]:
        with pytest.raises(ValueError, match=message):
            SlotMap.from_json(data)
    assert parse_slots("1,5,10-12, 3") == [1, 3, 5, 10, 11, 12]
    for bad in ("4096", "3-1", "a", ""):
        with pytest.raises(ValueError):
            parse_slots(bad)


def ev(eid: str, t: float, src: str = "s") -> Event:
    return Event(src, "A", t, t, None, 1.0, eid)


def batch(pos: int, *events: Event) -> Op:
    return Op(pos, BATCH, None, events_body(list(events)), events[-1].end, events[-1].end)


def ids(body: bytes | None) -> list[str]:
    assert body is not None
    return [str(e.id) for e in events_of(body)]


def test_splice_puts_imported_events_where_they_belong_in_time() -> None:
    ops = [
        Op(0, REGISTER, "q", b"{}", None),
        batch(1, ev("a1", 1), ev("a3", 3)),
        Op(2, TIME, None, None, 10.0),
        batch(3, ev("a12", 12)),
    ]
    imported = [ev("b0", 0, "x"), ev("b2", 2, "x"), ev("b3", 3, "x"), ev("b5", 5, "x"), ev("b11", 11, "x")]
    imported += [ev("b20", 20, "x"), ev("a3", 3), ev("b2", 2, "x")]  # one the log holds, one twice
    out = splice(ops, imported)
    assert [(o[0], o[1]) for o in out] == [
        (0, REGISTER),
        (1, BATCH),
        (None, BATCH),
        (2, TIME),
        (3, BATCH),
        (None, BATCH),
    ]
    assert ids(out[1][3]) == ["b0", "a1", "b2", "a3", "b3"]  # (end, start) order, its own first on ties
    assert ids(out[2][3]) == ["b5"] and out[2][4] == 5.0  # before the advance to 10
    assert ids(out[4][3]) == ["b11", "a12"]
    assert ids(out[5][3]) == ["b20"]
    # Splicing what is there already changes nothing.
    again = [Op(k, kind, name, body, time, clock) for k, (_, kind, name, body, time, clock) in enumerate(out)]
    assert [o[3] for o in splice(again, imported)] == [o.body for o in again]
