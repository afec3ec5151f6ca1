"""Rizvi's TelegraphCQ event queries (SELECT ... FROM ... PARTITION BY ... EVENT ...):
the report's own queries parse into scemon's operators, and the library example
(examples/library) gives the documented alerts, the reference's matches."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ecq.engine import Engine
from ecq.errors import ParseError
from ecq.event import Event
from ecq.language import format_query, parse_queries, parse_query, to_json
from tests import reference

LIBRARY = Path(__file__).resolve().parents[3] / "examples" / "library"

CLEANING = """SELECT R1.*
FROM RFIDStream R1 R2
PARTITION BY tag_id
EVENT NOTPRECEDES(R1, R2, '1 sec')"""

CONFUSION = """SELECT *
FROM Person P1 P2, Book B
PARTITION BY loc_id
EVENT ANYONE(
  FOLLOWS(B, BOTH(P1, P2, '3 sec'), '3 sec'),
  FOLLOWS(BOTH(P1, P2, '3 sec'), B, '3 sec')
)"""

BOOKLIFTING = """SELECT B.*
FROM Book B, Checkout C
PARTITION BY book_id
BOTH(NOTPRECEDES(B, C, '1 min'), NOTFOLLOWS(B, C, '2 sec'), '3 sec')"""


def _same(rizvi: str, scemon: str) -> None:
    q = parse_query(rizvi)
    assert q == parse_query(scemon)
    assert parse_query(format_query(q)) == q


def test_each_operator_maps_onto_scemons() -> None:
    head = "SELECT * FROM S A1 A2 PARTITION BY k EVENT "
    _same(head + "FOLLOWS(A1, A2, '5 sec')", "SEQ(S A1, S A2) PARTITION BY k WITHIN 5 s MODE ALL")
    _same(head + "NOTFOLLOWS(A1, A2, '5 sec')", "SEQ(S A1, !S A2) PARTITION BY k WITHIN 5 s MODE ALL")
    _same(head + "NOTPRECEDES(A1, A2, '1 min')", "SEQ(!S A2, S A1) PARTITION BY k WITHIN 60 s MODE ALL")
    _same(head + "BOTH(A1, A2, '2 sec')", "AND(S A1, S A2) PARTITION BY k WITHIN 2 s MODE ALL")
    _same("SELECT A1.x FROM S A1, T B EVENT ANYONE(A1, B)", "OR(S A1, T B) MODE ALL RETURN A1.x")


def test_the_reports_queries_parse() -> None:
    _same(CLEANING, "SEQ(!RFIDStream R2, RFIDStream R1) PARTITION BY tag_id WITHIN 1 s MODE ALL")
    _same(
        CONFUSION,
        "OR(SEQ(Book B, AND(Person P1, Person P2)), SEQ(AND(Person P1, Person P2), Book B)) "
        "PARTITION BY loc_id WITHIN 3 s MODE ALL",
    )


def test_cleaning_keeps_the_first_reading_of_each_tag() -> None:
    eng = Engine()
    eng.register("clean", CLEANING)
    events = [Event("r", "RFIDStream", t, attrs={"tag_id": tag}) for t, tag in ((1, 7), (1.5, 7), (1.7, 8), (3, 7))]
    got = eng.process(events) + eng.advance_time(float("inf"))
    assert [(m.src, m.arrivals()) for m in got] == [(7, [0]), (8, [2]), (7, [3])]


def test_operators_with_different_windows_or_a_reused_alias_are_refused_with_their_place() -> None:
    with pytest.raises(ParseError, match="appears twice") as caught:
        parse_query(BOOKLIFTING)
    assert (caught.value.line, caught.value.column) == (4, 45)
    with pytest.raises(ParseError, match="differs from '1 min'"):
        parse_query("SELECT * FROM S A1 A2 A3 EVENT FOLLOWS(NOTPRECEDES(A1, A2, '1 min'), A3, '2 sec')")
    with pytest.raises(ParseError, match="is not a time"):
        parse_query("SELECT * FROM S A1 A2 EVENT FOLLOWS(A1, A2, 'soon')")
    with pytest.raises(ParseError, match="FROM does not bind"):
        parse_query("SELECT Z.x FROM S A1 A2 EVENT FOLLOWS(A1, A2, '1 sec')")


def test_the_library_example_gives_the_documented_alerts() -> None:
    queries = parse_queries((LIBRARY / "queries.txt").read_text())
    events = [orjson.loads(line) for line in (LIBRARY / "events.jsonl").read_bytes().splitlines()]
    eng = Engine()
    for q in queries:
        eng.register(q.name or "", q)
    got = eng.process([Event.from_dict(e) for e in events]) + eng.advance_time(float("inf"))
    alerts = [(m.query, m.src, m.event_ids()) for m in got if m.query in ("booklifting", "confusion")]
    # Book 2 leaves without a checkout while Bob and Carl pass the door; book 1 was
    # checked out, book 3 checked out at the door (turbo checkout).
    assert alerts == [
        ("confusion", "door", [["book07", ["person08", "person09"]]]),
        ("booklifting", 2, [["book07"]]),
    ]
    # The repeated shelf reading of book 1 is cleaned away.
    assert [m.event_ids() for m in got if m.query == "book_seen"] == [
        ["book01"], ["book03"], ["book06"], ["book07"], ["book10"]
    ]
    expected = reference.evaluate_queries([(q.name or "", to_json(q)) for q in queries], events)
    assert [(m.query, m.src, m.arrivals()) for m in got] == [(m["query"], m["src"], m["events"]) for m in expected]
