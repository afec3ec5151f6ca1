"""``scemon cluster ...`` as a real process against two real shards: one registration,
one subscription resumed by its cursor, the figures, and a shard down refused whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from api.cluster import decode_cursor
from api.spark_sink import shard_of
from tests.service.conftest import StartServer, scemon

QUERIES = "QUERY ab\nPATTERN SEQ(A, B)\nWITHIN 10 s\n\nQUERY just_b\nPATTERN B\n"


def events(count: int) -> list[dict[str, Any]]:
    return [
        {"id": f"e{n}", "src": n % 10, "type": "AB"[(n // 10) % 2], "start": float(n)} for n in range(count)
    ]


def test_register_subscribe_resume_and_figures(start_server: StartServer, tmp_path: Path) -> None:
    servers = [start_server(), start_server()]
    shards = [arg for s in servers for arg in ("-s", s.url)]
    queries = tmp_path / "queries.txt"
    queries.write_text(QUERIES)

    done = scemon("cluster", "register", *shards, "-q", queries)
    assert done.returncode == 0, done.stderr
    assert "2 queries registered on 2 shards" in done.stderr
    for server in servers:
        assert [q.name for q in server.client().queries()] == ["ab", "just_b"]

    batch = events(200)
    for k, server in enumerate(servers):
        server.client().post_events("job", 1, [e for e in batch if shard_of(e["src"], 2) == k])
    total = sum(s.client().stats().matches for s in servers)
    assert total > 20

    first = scemon("cluster", "subscribe", *shards, "--limit", "7", "--idle-timeout", "5")
    assert first.returncode == 0, first.stderr
    taken = [orjson.loads(line) for line in first.stdout.splitlines()]
    assert len(taken) == 7
    cursor = first.stderr.strip().splitlines()[-1].removeprefix("cursor: ")
    cursor_file = tmp_path / "cursor"
    cursor_file.write_text(cursor)
    rest = scemon("cluster", "subscribe", *shards, "--cursor-file", cursor_file, "--idle-timeout", "2")
    assert rest.returncode == 0, rest.stderr
    taken += [orjson.loads(line) for line in rest.stdout.splitlines()]
    assert sorted((m["shard"], m["seq"]) for m in taken) == sorted(
        (k, seq) for k, s in enumerate(servers) for seq in range(s.client().stats().matches)
    )
    assert decode_cursor(cursor_file.read_text().strip(), [s.url for s in servers]) == {
        s.url: s.client().stats().matches for s in servers
    }

    figures = scemon("cluster", "stats", *shards, "--json")
    assert figures.returncode == 0, figures.stderr
    data = orjson.loads(figures.stdout)
    assert data["total"]["events"] == 200 and data["total"]["matches"] == total
    listed = scemon("cluster", "queries", *shards)
    assert [orjson.loads(line)["name"] for line in listed.stdout.splitlines()] == ["ab", "just_b"]

    # By default at one event time after every shard's clock: held until the stream reaches it.
    deleted = scemon("cluster", "delete", "just_b", *shards)
    assert deleted.returncode == 0, deleted.stderr
    assert "just_b to be deleted on 2 shards at event time 199.00000000000003" in deleted.stderr
    for server in servers:
        assert [(q.name, q.deleting_at) for q in server.client().queries()] == [
            ("ab", None),
            ("just_b", 199.00000000000003),
        ]
    cancelled = scemon("cluster", "delete", "just_b", *shards, "--cancel")
    assert cancelled.returncode == 0, cancelled.stderr
    assert all(q.deleting_at is None for s in servers for q in s.client().queries())
    assert scemon("cluster", "delete", "just_b", *shards).returncode == 0
    for server in servers:
        server.client().advance_time(300.0)
        assert [q.name for q in server.client().queries()] == ["ab"]

    servers[1].stop()
    refused = scemon("cluster", "register", *shards, "-q", queries)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1].startswith("error: nothing was changed: shard")
    assert servers[1].url in refused.stderr
    assert [q.name for q in servers[0].client().queries()] == ["ab"]

    no_shards = scemon("cluster", "stats")
    assert no_shards.returncode == 1 and no_shards.stderr.startswith("error: no shards")


def test_slots_shown_and_moved(start_server: StartServer) -> None:
    a, b = start_server(), start_server()
    shown = scemon("cluster", "slots", "-s", a.url)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == "slot map epoch 0: 1 shards, 4096 slots"
    assert f"{a.url}" in shown.stdout and "4096 slots  0-4095" in shown.stdout

    moved = scemon("cluster", "move", "-s", a.url, "--slots", "0-9,20", "--to", b.url)
    assert moved.returncode == 0, moved.stderr
    assert "11 slots moved; slot map epoch 1 on 2 shards" in moved.stderr
    again = scemon("cluster", "move", "-s", a.url, "-s", b.url, "--slots", "0-9,20", "--to", b.url)
    assert again.returncode == 0 and "nothing to move: the map is already so (epoch 1)" in again.stderr
    found = orjson.loads(scemon("cluster", "slots", "-s", a.url, "-s", b.url, "--json").stdout)
    assert found["epoch"] == 1 and found["shards"] == [a.url, b.url]
    text = scemon("cluster", "slots", "-s", a.url, "-s", b.url).stdout
    assert f"{b.url:<32}    11 slots  0-9,20" in text

    # Rebalanced onto both: even shares, the 11 slots of b kept.
    spread = scemon("cluster", "move", "-s", a.url, "-s", b.url, "--onto", a.url, "--onto", b.url)
    assert spread.returncode == 0, spread.stderr
    assert "2037 slots moved; slot map epoch 2 on 2 shards" in spread.stderr

    for args, message in [
        (("--slots", "4096", "--to", b.url), "--slots: slots '4096' are not within 0-4095"),
        (("--slots", "x", "--to", b.url), "--slots: 'x' is not a slot or a range of slots"),
        (("--slots", "1"), "give --slots with --to"),
        (("--slots", "1", "--to", b.url, "--onto", a.url), "give --slots with --to, or --onto, not both"),
        (
            ("--slots", "1", "--to", "http://127.0.0.1:9"),
            "no slot was moved: shard http://127.0.0.1:9 is down",
        ),
    ]:
        bad = scemon("cluster", "move", "-s", a.url, "-s", b.url, *args)
        assert bad.returncode == 1, bad.stderr
        assert message in bad.stderr.strip().splitlines()[-1], bad.stderr
    assert orjson.loads(scemon("cluster", "slots", "-s", a.url, "-s", b.url, "--json").stdout)["epoch"] == 2
    assert scemon("cluster", "move", "--help").returncode == 0


def test_register_at_one_event_time(start_server: StartServer, tmp_path: Path) -> None:
    servers = [start_server(), start_server()]
    shards = [arg for s in servers for arg in ("-s", s.url)]
    queries = tmp_path / "queries.txt"
    queries.write_text(QUERIES)
    batch = events(40)
    for k, server in enumerate(servers):
        server.client().post_events("job", 1, [e for e in batch if shard_of(e["src"], 2) == k])

    bad = scemon("cluster", "register", *shards, "-q", queries, "--at", "soon")
    assert bad.returncode == 1 and bad.stderr.startswith("error: --at must be an event time")
    passed = scemon("cluster", "register", *shards, "-q", queries, "--at", "10")
    assert passed.returncode == 1 and "past event time 10" in passed.stderr
    assert [server.client().queries() for server in servers] == [[], []]

    done = scemon("cluster", "register", *shards, "-q", queries)
    assert done.returncode == 0, done.stderr
    assert "2 queries registered on 2 shards at event time 39.00000000000001" in done.stderr
    for server in servers:
        assert [(q.name, q.pending) for q in server.client().queries()] == [("ab", True), ("just_b", True)]

    one = start_server()
    held = scemon("queries", "register", "-s", one.url, "-q", queries, "--at", "100")
    assert held.returncode == 0, held.stderr
    assert [(q.at, q.pending) for q in one.client().queries()] == [(100.0, True), (100.0, True)]

    going = scemon("queries", "delete", "ab", "-s", one.url, "--at", "150")
    assert going.returncode == 0, going.stderr
    assert "ab to be deleted at event time 150.0" in going.stderr
    assert one.client().query("ab").deleting_at == 150.0
    kept = scemon("queries", "delete", "ab", "-s", one.url, "--cancel")
    assert kept.returncode == 0 and one.client().query("ab").deleting_at is None
    again = scemon("queries", "delete", "ab", "-s", one.url, "--cancel")
    assert again.returncode == 1 and "not being deleted" in again.stderr
    now = scemon("queries", "delete", "ab", "-s", one.url)
    assert now.returncode == 0 and [q.name for q in one.client().queries()] == ["just_b"]
    passed = scemon("cluster", "delete", "ab", *shards, "--at", "10")
    assert passed.returncode == 1 and "past event time 10" in passed.stderr
