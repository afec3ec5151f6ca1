"""SIGKILL at random moments while a producer posts and resends what was not
acknowledged: nothing is lost and nothing is applied twice, and the matches are what
one uninterrupted engine gives for the same batches."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import httpx
import pytest

from ecq.engine import Engine
from ecq.event import Event
from tests.service.conftest import Server, StartServer

pytestmark = pytest.mark.faults

N_BATCHES = 300
KILLS = 6
# Between two batches: the producer paces itself so the kills land across the run.
PACE = 0.02


def make_batch(k: int, rng: random.Random) -> list[dict[str, Any]]:
    t = 40.0 * k
    return [
        {"src": rng.randrange(4), "type": rng.choice("AB"), "start": t + i * 0.5, "id": f"{k}-{i}"}
        for i in range(50)
    ]


class Resender(threading.Thread):
    """Posts the batches in order; each is resent (same id) until acknowledged."""

    def __init__(self, url: str, batches: list[list[dict[str, Any]]]) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.batches = batches
        self.answers: list[dict[str, Any]] = []
        self.retries = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with httpx.Client(base_url=self.url, timeout=30) as http:
                for k, events in enumerate(self.batches):
                    while True:
                        try:
                            response = http.post(
                                "/v1/events", json={"producer": "p", "batch_id": k, "events": events}
                            )
                        except httpx.TransportError:
                            response = None
                        if response is not None and response.status_code == 200:
                            self.answers.append(response.json())
                            time.sleep(PACE)
                            break
                        assert response is None or response.status_code == 503, response.text
                        self.retries += 1
                        time.sleep(0.05)
        except BaseException as err:  # reported by the test
            self.error = err


def kill_while_sending(server: Server, producer: Resender, kills: int, rng: random.Random) -> int:
    """Start ``producer`` and SIGKILL ``server`` (then start it again) at random moments,
    up to ``kills`` times while the producer runs; wait for it and check it failed on
    nothing. The number of kills made."""
    producer.start()
    made = 0
    while made < kills and producer.is_alive():
        time.sleep(rng.uniform(0.1, 0.8))
        server.kill()
        server.start()
        made += 1
    producer.join(300)
    assert producer.error is None, producer.error
    return made


def test_sigkill_at_random_moments_loses_and_duplicates_nothing(start_server: StartServer) -> None:
    rng = random.Random(2024)
    batches = [make_batch(k, rng) for k in range(N_BATCHES)]
    server = start_server(SCEMON_TRIM_EVERY="4")
    queries = {"ones": "A", "pairs": "SEQ(A, B) WITHIN 30 s"}
    with httpx.Client(base_url=server.url) as http:
        for name, text in queries.items():
            assert http.post("/v1/queries", json={"name": name, "text": text}).status_code == 201
    producer = Resender(server.url, batches)
    kills = kill_while_sending(server, producer, KILLS, rng)
    assert not producer.is_alive() and len(producer.answers) == N_BATCHES
    assert kills == KILLS and producer.retries > 0  # the kills hit the producer

    matches = server.client().all_matches()
    assert [m["seq"] for m in matches] == list(range(len(matches)))
    ones = sorted(event for m in matches if m["query"] == "ones" for event in m["events"])
    posted = sorted(e["id"] for events in batches for e in events if e["type"] == "A")
    assert ones == posted  # every A exactly once: no loss, no duplicate

    engine = Engine()
    for name, text in queries.items():
        engine.register(name, text)
    want = []
    for events in batches:
        arriving = [Event(e["src"], e["type"], e["start"], id=e["id"]) for e in events]
        arriving.sort(key=lambda e: (e.end, e.start))
        want += [(m.query, [e.id for e in m.events]) for m in engine.process(arriving)]
    assert [(m["query"], m["events"]) for m in matches] == want
