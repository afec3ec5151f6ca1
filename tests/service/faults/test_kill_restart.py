"""A server killed (SIGKILL) and started again serves what one that never died serves:
queries of every operator family and policy, the same matches for the events posted
before and after the kill, the same canonical texts — also when the texts the store keeps
for a restart are damaged or were printed by another build (they are printed again),
and with a query registered and another deleted just before the kill."""

from __future__ import annotations

import random
import sqlite3
from contextlib import closing
from typing import Any

import httpx
import pytest

from ecq.engine import Engine
from ecq.event import Event
from tests.service.conftest import Server, StartServer

pytestmark = pytest.mark.faults

QUERIES = {
    "seq": "SEQ(A, B) WITHIN 30 s",
    "seq_cond": "SEQ(A a, B b) WHERE a.v < b.v WITHIN 30 s MODE ALL",
    "conj": "AND(A, B, C) WITHIN 20 s",
    "conj_neg": "AND(A, B, !C) WITHIN 10 s MODE ALL",
    "any": "SEQ(ANY(A, C), B) WITHIN 20 s",
    "neg_lead": "SEQ(!C, A, B) WITHIN 20 s",
    "neg_mid": "SEQ(A, !C, B) WITHIN 20 s",
    "neg_trail": "SEQ(A, B, !C) WITHIN 10 s",
    "kleene": "SEQ(A a, B+ b[], C c) WHERE count(b) >= 2 WITHIN 30 s RETURN count(b) AS n",
    "nested": "AND(A, (SEQ(B, C))) WITHIN 20 s",
    "derived": "SEQ(@seq s, C) WITHIN 60 s",
    "keyed": "SEQ(A, B) PARTITION BY k WITHIN 30 s",
    "single": "A WHERE A.v > 5",
    "prob": "AND(A, B) WITHIN 10 s PROBABILITY >= 0.5",
    "exclusive": "SEQ(A, B) WITHIN 30 s CONSUME EXCLUSIVE",
    "chronicle": "SEQ(A, B) WITHIN 30 s MODE CHRONICLE CONSUME EXCLUSIVE",
    "past": "SEQ(A, B) WITHIN 30 s AFTER MATCH SKIP PAST LAST ROW",
    "nextrow": "SEQ(A, B, A) WITHIN 30 s MODE ALL STRATEGY skip-till-next-match AFTER MATCH SKIP TO NEXT ROW",
}
# Registered, and deleted, just before the first kill.
LATE = ("late", "SEQ(C, A) WHERE C.v >= A.v WITHIN 15 s")
DELETED = "neg_mid"
N_BATCHES = 24
KILL_AT = (8, 16)  # the batches posted before each kill


def make_batch(k: int, rng: random.Random) -> list[dict[str, Any]]:
    t = 20.0 * k
    return [
        {
            "src": rng.randrange(3),
            "type": rng.choice("ABC"),
            "start": round(t + i * 0.7, 3),
            "id": f"{k}-{i}",
            "attrs": {"v": rng.randrange(10), "k": rng.choice("xy")},
            "prob": rng.choice((1.0, 1.0, 0.6)),
        }
        for i in range(28)
    ]


def event(d: dict[str, Any]) -> Event:
    return Event(d["src"], d["type"], d["start"], attrs=d["attrs"], prob=d["prob"], id=d["id"])


class Twin:
    """The server that never died: an engine given the same operations in order."""

    def __init__(self) -> None:
        self.engine = Engine()
        self.matches: list[dict[str, Any]] = []

    def register(self, name: str, text: str) -> None:
        self.engine.register(name, text)

    def unregister(self, name: str) -> None:
        self.engine.unregister(name)

    def post(self, batch: list[dict[str, Any]]) -> None:
        arriving = sorted((event(d) for d in batch), key=lambda e: (e.end, e.start))
        self.matches += [m.to_dict(lambda e: e.id) for m in self.engine.process(arriving)]


def post(http: httpx.Client, k: int, batch: list[dict[str, Any]]) -> None:
    response = http.post("/v1/events", json={"producer": "p", "batch_id": k, "events": batch})
    assert response.status_code == 200, response.text


def texts(http: httpx.Client) -> dict[str, str]:
    response = http.get("/v1/queries")
    assert response.status_code == 200, response.text
    return {q["name"]: q["text"] for q in response.json()["queries"]}


def wire(matches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keys = ("query", "src", "start", "end", "events", "attrs", "prob", "seq")
    return [{k: m.get(k) for k in keys} for m in matches]


def damage_kept_texts(server: Server) -> None:
    """With the server stopped: half the kept texts as if printed by another build, the
    other half with a changed text (failing its checksum)."""
    with closing(sqlite3.connect(server.data / "scemon.sqlite3")) as db:
        positions = [pos for (pos,) in db.execute("SELECT pos FROM query_texts ORDER BY pos")]
        assert positions, "the store keeps no texts"
        for i, pos in enumerate(positions):
            if i % 2:
                db.execute("UPDATE query_texts SET version = 'language-other' WHERE pos = ?", (pos,))
            else:
                db.execute("UPDATE query_texts SET text = 'SEQ(X, Y) WITHIN 1 s' WHERE pos = ?", (pos,))
        db.commit()


def test_a_killed_server_serves_what_one_that_never_died_serves(start_server: StartServer) -> None:
    rng = random.Random(37)
    batches = [make_batch(k, rng) for k in range(N_BATCHES)]
    twin = Twin()
    server = start_server(SCEMON_TRIM_EVERY="4")
    http = httpx.Client(base_url=server.url, timeout=60)
    try:
        for name, text in QUERIES.items():
            assert http.post("/v1/queries", json={"name": name, "text": text}).status_code == 201
            twin.register(name, text)
        before = texts(http)
        for first, kill_at in zip((0, *KILL_AT), KILL_AT, strict=False):
            for k in range(first, kill_at):
                post(http, k, batches[k])
                twin.post(batches[k])
            if kill_at == KILL_AT[0]:
                # Just before the kill: a registration and a deletion, each committed.
                assert http.post("/v1/queries", json={"name": LATE[0], "text": LATE[1]}).status_code == 201
                twin.register(*LATE)
                assert http.delete(f"/v1/queries/{DELETED}").status_code == 204
                twin.unregister(DELETED)
                before = texts(http)
            server.kill()
            if kill_at == KILL_AT[-1]:
                damage_kept_texts(server)
            server.start()
            # The same queries under the same canonical texts (printed again where the
            # kept ones were damaged or another build's).
            assert texts(http) == before
        for k in range(KILL_AT[-1], N_BATCHES):
            post(http, k, batches[k])
            twin.post(batches[k])
        got = server.client().all_matches()
    finally:
        http.close()
    assert {m["query"] for m in twin.matches} >= set(QUERIES) - {DELETED}  # non-vacuous
    assert wire(got) == wire(twin.matches)
