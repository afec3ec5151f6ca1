"""The SQLite store on its own: the op log, applied batch ids, the match log by ``seq``,
one transaction per operation (all or nothing), trimming, and what a reopened store
holds."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import orjson
import pyarrow as pa
import pytest

from service.server.blocks import Block
from service.server.faults import StoreFault
from service.server.store import BATCH, LATENESS, REGISTER, TIME, UNREGISTER, Clocks, Meta, Store

Q1 = {"text": "SEQ(A, B) WITHIN 10 s"}
Q2 = {"text": "SEQ(B, C) WITHIN 5 s"}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "data")
    yield opened
    opened.close()


def rows(first_seq: int, *queries: str) -> Block:
    texts = [orjson.dumps({"query": q, "seq": first_seq + n}).decode() for n, q in enumerate(queries)]
    return Block.of(first_seq, queries, texts)


def batch(store: Store, batch_id: str, max_end: float, matches: Block | None, next_seq: int) -> None:
    counts: dict[str, tuple[int, float]] = {}
    for q in matches.queries if matches is not None else ():
        n, _ = counts.get(q, (0, max_end))
        counts[q] = (n + 1, max_end)
    store.commit_batch("p", batch_id, b"[]", 2, max_end, matches, counts, next_seq, Clocks(max_end, max_end))


def test_a_new_store_is_empty(store: Store) -> None:
    assert store.meta() == Meta(0, float("-inf"), float("-inf"))
    assert list(store.ops()) == [] and store.queries() == [] and store.op_count() == 0
    assert store.read_matches(0, 10) == ([], 0, 0)


def test_registrations_are_logged_in_order_and_listed_until_unregistered(store: Store) -> None:
    store.commit_register([("q1", Q1), ("q2", Q2)])
    store.commit_unregister("q1")
    assert [(op.pos, op.kind, op.name) for op in store.ops()] == [
        (0, REGISTER, "q1"),
        (1, REGISTER, "q2"),
        (2, UNREGISTER, "q1"),
    ]
    [only] = store.queries()
    assert (only.name, only.spec, only.matches, only.last_match) == ("q2", Q2, 0, None)


def test_a_batch_commits_its_op_id_matches_counts_and_meta_together(store: Store) -> None:
    store.commit_register([("q1", Q1), ("q2", Q2)])
    batch(store, "b1", 7.0, rows(0, "q1", "q2", "q1"), next_seq=3)
    assert store.is_applied("p", "b1") and not store.is_applied("p", "b2") and not store.is_applied("x", "b1")
    assert [(op.kind, op.time) for op in store.ops()][-1] == (BATCH, 7.0)
    assert store.meta() == Meta(3, 7.0, 7.0)
    assert {q.name: (q.matches, q.last_match) for q in store.queries()} == {"q1": (2, 7.0), "q2": (1, 7.0)}
    got, next_seq, first_seq = store.read_matches(0, 10)
    assert [seq for seq, _ in got] == [0, 1, 2] and (next_seq, first_seq) == (3, 0)
    assert orjson.loads(got[1][1]) == {"query": "q2", "seq": 1}


def test_matches_are_read_by_seq_query_and_limit(store: Store) -> None:
    store.commit_register([("q1", Q1), ("q2", Q2)])
    batch(store, "b1", 5.0, rows(0, "q1", "q2", "q1", "q2"), next_seq=4)
    assert [seq for seq, _ in store.read_matches(1, 2)[0]] == [1, 2]
    assert [seq for seq, _ in store.read_matches(0, 10, frozenset({"q2"}))[0]] == [1, 3]
    assert store.read_matches(4, 10)[0] == []
    assert store.has_matches_of("q2") and not store.has_matches_of("q3")


def test_a_failed_batch_leaves_nothing_behind(store: Store) -> None:
    store.commit_register([("q1", Q1)])
    batch(store, "b1", 5.0, rows(0, "q1"), next_seq=1)
    before = (store.op_count(), store.meta(), store.read_matches(0, 10))
    with pytest.raises(StoreFault, match="UNIQUE constraint"):
        batch(store, "b1", 9.0, rows(1, "q1"), next_seq=2)  # the same batch id again
    assert (store.op_count(), store.meta(), store.read_matches(0, 10)) == before


def test_time_advances_are_logged_with_their_matches(store: Store) -> None:
    store.commit_register([("q1", Q1)])
    store.commit_time(20.0, rows(0, "q1"), {"q1": (1, 20.0)}, next_seq=1, clocks=Clocks(20.0, 25.0))
    assert [(op.kind, op.time) for op in store.ops()][-1] == (TIME, 20.0)
    assert store.meta() == Meta(1, 20.0, 25.0)


def test_trim_drops_what_replay_no_longer_needs(store: Store) -> None:
    store.commit_register([("q1", Q1), ("gone", Q2)])
    batch(store, "b1", 5.0, rows(0, "q1", "q1"), next_seq=2)
    store.commit_unregister("gone")
    store.commit_time(8.0, None, {}, next_seq=2, clocks=Clocks(8.0, 8.0))
    batch(store, "b2", 30.0, rows(2, "q1", "q1", "q1"), next_seq=5)
    # Batches before the first one reaching the horizon go, with the time advances
    # among them and a registration that was undone there; live q1's stays.
    dropped = store.trim(horizon=20.0, keep={"q1"}, match_log_max=2, next_seq=5)
    assert dropped == 4
    assert [(op.kind, op.name) for op in store.ops()] == [(REGISTER, "q1"), (BATCH, None)]
    # The match log keeps the latest 2 matches in whole blocks: b2's block, 2..4.
    assert [seq for seq, _ in store.read_matches(0, 10)[0]] == [2, 3, 4]
    assert store.read_matches(0, 10)[2] == 2  # the oldest seq still kept


def test_a_reopened_store_holds_everything_committed(tmp_path: Path) -> None:
    first = Store(tmp_path / "data")
    first.commit_register([("q1", Q1)])
    batch(first, "b1", 5.0, rows(0, "q1"), next_seq=1)
    first.close()
    again = Store(tmp_path / "data")
    try:
        assert again.meta() == Meta(1, 5.0, 5.0)
        assert [q.name for q in again.queries()] == ["q1"] and again.is_applied("p", "b1")
        assert [seq for seq, _ in again.read_matches(0, 10)[0]] == [0]
    finally:
        again.close()


def test_trim_keeps_a_registration_that_a_live_query_reads(store: Store) -> None:
    # "gone" was unregistered, but a live query reads @gone: replay must register it
    # again before that query.
    store.commit_register([("gone", Q1)])
    store.commit_register([("reader", {"text": "SEQ(@gone, A) WITHIN 5 s"})])
    store.commit_unregister("gone")
    batch(store, "b1", 30.0, None, next_seq=0)
    assert store.trim(horizon=20.0, keep={"reader", "gone"}, match_log_max=10, next_seq=0) == 0
    assert [(op.kind, op.name) for op in store.ops()] == [
        (REGISTER, "gone"),
        (REGISTER, "reader"),
        (UNREGISTER, "gone"),
        (BATCH, None),
    ]


def test_trimming_keeps_only_the_last_lateness_change_before_the_cut(store: Store) -> None:
    none: dict[str, tuple[int, float]] = {}
    store.commit_time(10.0, None, none, 0, Clocks(0.0, 0.0), kind=LATENESS)
    batch(store, "b1", 1.0, None, 0)
    store.commit_time(5.0, None, none, 0, Clocks(1.0, 1.0), kind=LATENESS)
    batch(store, "b2", 2.0, None, 0)
    batch(store, "b3", 50.0, None, 0)
    store.commit_time(0.0, None, none, 0, Clocks(50.0, 50.0), kind=LATENESS)
    store.trim(horizon=10.0, keep=set(), match_log_max=10, next_seq=0)
    assert [(op.kind, op.time) for op in store.ops()] == [(LATENESS, 5.0), (BATCH, 50.0), (LATENESS, 0.0)]


def test_a_batch_keeps_its_late_events_and_the_clocks_both_survive_a_reopen(tmp_path: Path) -> None:
    first = Store(tmp_path / "data")
    late = orjson.dumps([[1, "a1", 9.0]])
    first.commit_batch("p", "b1", b"[]", 2, 20.0, None, {}, 0, Clocks(10.0, 20.0), late)
    first.commit_batch("p", "b2", b"[]", 1, 21.0, None, {}, 0, Clocks(10.5, 21.0))
    first.close()
    again = Store(tmp_path / "data")
    try:
        assert again.late_of("p", "b1") == late and again.late_of("p", "b2") is None
        assert again.late_of("p", "unknown") is None
        assert again.meta() == Meta(0, 10.5, 21.0)
    finally:
        again.close()


def test_a_store_from_before_late_events_is_upgraded_and_reads_its_clock_as_both(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    with closing(sqlite3.connect(folder / "scemon.sqlite3")) as db:
        db.executescript(
            # The schema of a0dfc60, the last build before late events.
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
            "CREATE TABLE ops (pos INTEGER PRIMARY KEY, kind TEXT NOT NULL, name TEXT, body BLOB, time REAL);"
            "CREATE TABLE queries (name TEXT PRIMARY KEY, spec BLOB NOT NULL, pos INTEGER NOT NULL,"
            " matches INTEGER NOT NULL DEFAULT 0, last_match REAL);"
            "CREATE TABLE batches (producer TEXT NOT NULL, batch_id TEXT NOT NULL, pos INTEGER NOT NULL,"
            " accepted INTEGER NOT NULL, PRIMARY KEY (producer, batch_id)) WITHOUT ROWID;"
            "CREATE TABLE matches (seq INTEGER PRIMARY KEY, query TEXT NOT NULL, body BLOB NOT NULL);"
            "INSERT INTO meta VALUES ('next_seq', '3'), ('clock', '42.0');"
        )
    old = Store(folder)
    try:
        assert old.meta() == Meta(3, 42.0, 42.0)
        old.commit_batch("p", "b", b"[]", 0, 43.0, None, {}, 3, Clocks(43.0, 43.0), b"[]")
        assert [op.kind for op in old.ops()] == [BATCH]
    finally:
        old.close()


def test_an_arrow_batch_is_logged_as_posted_and_read_back_as_applied() -> None:
    """The op log keeps an Arrow post's bytes as they came; reading them back gives the
    events the host applied — sorted by (end, start) with ties in posted order, id-less
    events named "<batch_id>:<index>" by their posted index — the same events a JSON
    log of them gives."""
    from api.spark_sink import encode_events
    from service.server.ingest import from_arrow
    from service.server.store import ARROW_LOG, arrival_key, arrow_log, events_body, events_of

    table = pa.table(
        {
            "src": ["a", "b", "a", "c"],
            "type": ["A", "B", "A", "C"],
            "start": [5.0, 1.0, 1.0, 3.0],
            "end": [6.0, 2.0, 2.0, None],
            "id": [None, "x", None, None],
            "attrs": ['{"k": 1}', None, '{"k": "v", "f": 1.5}', "{}"],
        }
    )
    body = encode_events(table)
    batch_id = "spark-7.0 é"  # any text a batch id may be, UTF-8 included
    posted = from_arrow(body, "p", batch_id, 100)
    assert posted.arrow == body
    applied = sorted(posted.events, key=arrival_key)
    log = arrow_log(batch_id, body)
    assert log.startswith(ARROW_LOG) and log.endswith(body)
    read = events_of(log)
    assert [e.to_dict() for e in read] == [e.to_dict() for e in applied]
    assert [e.id for e in read] == ["x", f"{batch_id}:2", f"{batch_id}:3", f"{batch_id}:0"]
    assert [e.to_dict() for e in events_of(events_body(applied))] == [e.to_dict() for e in read]


def test_the_match_log_is_one_block_per_batch_read_across_blocks(store: Store) -> None:
    """One row per batch, not per match; reads start mid-block, run across blocks, cut
    at ``limit``, and skip blocks that hold none of the queries asked for."""
    store.commit_register([("q1", Q1), ("q2", Q2)])
    batch(store, "b1", 5.0, rows(0, "q1", "q2", "q1"), next_seq=3)
    batch(store, "b2", 6.0, rows(3, "q1", "q1"), next_seq=5)
    batch(store, "b3", 7.0, rows(5, "q2"), next_seq=6)
    with closing(sqlite3.connect(store.path)) as db:
        assert db.execute("SELECT first_seq, next_seq FROM match_blocks").fetchall() == [
            (0, 3),
            (3, 5),
            (5, 6),
        ]
        assert db.execute("SELECT COUNT(*) FROM matches").fetchone()[0] == 0
    got, next_seq, first_seq = store.read_matches(1, 4)
    assert [seq for seq, _ in got] == [1, 2, 3, 4] and (next_seq, first_seq) == (6, 0)
    assert [orjson.loads(text)["seq"] for _, text in got] == [1, 2, 3, 4]
    assert [seq for seq, _ in store.read_matches(2, 10, frozenset({"q2"}))[0]] == [5]
    assert [seq for seq, _ in store.read_matches(0, 10, frozenset({"q1", "q2"}))[0]] == list(range(6))
    runs, _, _ = store.read_runs(4, 1, whole=True)  # a backlog takes whole blocks
    assert [run.seqs() for run in runs] == [[4]]
    runs, _, _ = store.read_runs(3, 1, whole=True)
    assert [run.seqs() for run in runs] == [[3, 4]]
    assert store.has_matches_of("q1") and store.has_matches_of("q2") and not store.has_matches_of("q")


def test_a_store_with_a_match_row_per_match_is_moved_into_blocks(tmp_path: Path) -> None:
    """A store of the builds that logged one row per match reads the same after it is
    opened: its rows become blocks (split where seqs are not consecutive)."""
    folder = tmp_path / "data"
    Store(folder).close()
    texts = {seq: orjson.dumps({"query": f"q{seq % 2}", "seq": seq}).decode() for seq in (4, 5, 6, 9)}
    with closing(sqlite3.connect(folder / "scemon.sqlite3")) as db:
        db.execute("DROP TABLE match_blocks")
        db.execute("CREATE INDEX matches_by_query ON matches (query, seq)")
        db.executemany(
            "INSERT INTO matches VALUES (?, ?, ?)",
            [(seq, f"q{seq % 2}", t.encode()) for seq, t in texts.items()],
        )
        db.execute("INSERT INTO meta (key, value) VALUES ('next_seq', '10')")
        db.commit()
    old = Store(folder)
    try:
        got, next_seq, first_seq = old.read_matches(0, 10)
        assert got == sorted(texts.items()) and (next_seq, first_seq) == (10, 4)
        assert [seq for seq, _ in old.read_matches(0, 10, frozenset({"q1"}))[0]] == [5, 9]
        with closing(sqlite3.connect(folder / "scemon.sqlite3")) as db:
            assert db.execute("SELECT first_seq, next_seq FROM match_blocks").fetchall() == [(4, 7), (9, 10)]
            assert db.execute("SELECT COUNT(*) FROM matches").fetchone()[0] == 0
    finally:
        old.close()


def test_match_counts_survive_a_reopen_and_start_again_for_a_name_registered_again(tmp_path: Path) -> None:
    """The counts are one row of meta rewritten with each batch, not an UPDATE per
    query: reopened, they read the same; an unregistered name registered again counts
    from 0; a store of an older build reads its counts from the queries table."""
    first = Store(tmp_path / "data")
    first.commit_register([("q1", Q1), ("q2", Q2)])
    batch(first, "b1", 5.0, rows(0, "q1", "q2", "q1"), next_seq=3)
    batch(first, "b2", 8.0, rows(3, "q2"), next_seq=4)
    first.commit_unregister("q1")
    first.commit_register([("q1", Q1)])
    first.close()
    again = Store(tmp_path / "data")
    try:
        assert {q.name: (q.matches, q.last_match) for q in again.queries()} == {
            "q2": (2, 8.0),
            "q1": (0, None),
        }
    finally:
        again.close()
    with closing(sqlite3.connect(tmp_path / "data" / "scemon.sqlite3")) as db:
        db.execute("DELETE FROM meta WHERE key = 'counts'")
        db.execute("UPDATE queries SET matches = 7, last_match = 3.5 WHERE name = 'q2'")
        db.commit()
    old = Store(tmp_path / "data")
    try:
        assert {q.name: (q.matches, q.last_match) for q in old.queries()} == {"q2": (7, 3.5), "q1": (0, None)}
    finally:
        old.close()


def test_a_held_unregistration_is_trimmed_only_once_it_took_effect(store: Store) -> None:
    # Held for event time 40: the query is still listed, its registration must stay.
    store.commit_register([("q1", Q1), ("going", Q2)])
    store.commit_unregister("going", at=40.0)
    assert [q.name for q in store.queries()] == ["q1", "going"]
    batch(store, "b1", 5.0, None, next_seq=0)
    batch(store, "b2", 30.0, None, next_seq=0)
    store.trim(horizon=20.0, keep=set(), match_log_max=10, next_seq=0)
    assert [(op.kind, op.name, op.time) for op in store.ops()] == [
        (REGISTER, "q1", None),
        (REGISTER, "going", None),
        (UNREGISTER, "going", 40.0),
        (BATCH, None, 30.0),
    ]
    # The op that reaches 40 forgets it (with its counts); then the pair may go.
    store.commit_time(41.0, None, {}, next_seq=0, clocks=Clocks(41.0, 41.0), forget=["going"])
    assert [q.name for q in store.queries()] == ["q1"]
    batch(store, "b3", 80.0, None, next_seq=0)
    store.trim(horizon=60.0, keep=set(), match_log_max=10, next_seq=0)
    assert [(op.kind, op.name) for op in store.ops()] == [(REGISTER, "q1"), (BATCH, None)]


def test_a_cancelled_held_unregistration_leaves_the_log(store: Store) -> None:
    store.commit_register([("q1", Q1)])
    store.commit_unregister("q1", at=40.0)
    assert store.cancel_unregister("q1") is True
    assert store.cancel_unregister("q1") is False
    assert [(op.kind, op.name) for op in store.ops()] == [(REGISTER, "q1")]
    assert [q.name for q in store.queries()] == ["q1"]
    # An unregistration without a time (every older build's) deletes at once.
    store.commit_unregister("q1")
    assert store.queries() == []
