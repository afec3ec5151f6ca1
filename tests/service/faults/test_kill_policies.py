"""Selection and consumption policies survive SIGKILL (docs/semantics.md §12): what a
query used up is engine state, rebuilt by replaying the logged ops after a kill, so the
matches of a server killed at random moments are those of one uninterrupted engine.
The policy queries are registered after the first batches, so the log is trimmed before
their registration (and must not be after it)."""

from __future__ import annotations

import random

import httpx
import pytest

from ecq.engine import Engine
from ecq.event import Event
from tests.service.conftest import StartServer
from tests.service.faults.test_kill import Resender, kill_while_sending, make_batch

pytestmark = pytest.mark.faults

N_BATCHES = 160
FIRST = 8  # batches posted before the policy queries are registered
KILLS = 5

QUERIES = {
    "exclusive": "SEQ(A, B) WITHIN 30 s CONSUME EXCLUSIVE",
    "chronicle": "SEQ(A, B) WITHIN 30 s MODE CHRONICLE CONSUME EXCLUSIVE",
    "past": "SEQ(A, B) WITHIN 30 s AFTER MATCH SKIP PAST LAST ROW",
    "nextrow": "SEQ(A, B, A) WITHIN 30 s MODE ALL STRATEGY skip-till-next-match AFTER MATCH SKIP TO NEXT ROW",
    "plain": "SEQ(A, B) WITHIN 30 s",
}


def test_policies_survive_sigkill(start_server: StartServer) -> None:
    rng = random.Random(35)
    batches = [make_batch(k, rng) for k in range(N_BATCHES)]
    server = start_server(SCEMON_TRIM_EVERY="4")
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for k in range(FIRST):
            body = {"producer": "p", "batch_id": k, "events": batches[k]}
            assert http.post("/v1/events", json=body).status_code == 200
        for name, text in QUERIES.items():
            assert http.post("/v1/queries", json={"name": name, "text": text}).status_code == 201
    producer = Resender(server.url, batches)  # resends the first ones: recognised, not applied
    kills = kill_while_sending(server, producer, KILLS, rng)
    assert not producer.is_alive() and len(producer.answers) == N_BATCHES
    assert kills == KILLS

    matches = server.client().all_matches()
    assert [m["seq"] for m in matches] == list(range(len(matches)))

    engine = Engine()
    want = []
    for k, events in enumerate(batches):
        if k == FIRST:
            for name, text in QUERIES.items():
                engine.register(name, text)
        arriving = [Event(e["src"], e["type"], e["start"], id=e["id"]) for e in events]
        arriving.sort(key=lambda e: (e.end, e.start))
        want += [(m.query, [e.id for e in m.events]) for m in engine.process(arriving)]
    got = [(m["query"], m["events"]) for m in matches]
    assert {q for q, _ in want} == set(QUERIES)  # every policy matched
    assert got == want
