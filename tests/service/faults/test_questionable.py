"""What an outside tester judged questionable, each with its decided outcome, against a
real server: deleting a query another reads (409 naming the readers); one event that
completes more matches of a query than the cap (kept up to the cap, the rest counted and
logged); ``WITHIN 0`` and absurd Kleene counts (422); ``/v1/time`` with a string or a
boolean (422); a token in a WebSocket or HTTP URL (never logged); ``HEAD`` on the probes
(200)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.service.conftest import Server, StartServer

pytestmark = pytest.mark.faults


def test_deleting_a_query_another_reads_is_refused_naming_the_readers(start_server: StartServer) -> None:
    server = start_server()
    url = f"{server.url}/v1/queries"
    assert httpx.post(url, json={"name": "ab", "text": "SEQ(A, B) WITHIN 5"}).status_code == 201
    for name in ("r1", "r2"):
        assert httpx.post(url, json={"name": name, "text": "SEQ(@ab, C) WITHIN 10"}).status_code == 201
    refused = httpx.delete(f"{url}/ab")
    assert refused.status_code == 409, refused.text
    detail = refused.json()["detail"]
    assert detail["dependents"] == ["r1", "r2"] and detail["query"] == "ab"
    assert "'r1', 'r2'" in detail["message"]
    assert [q["name"] for q in httpx.get(url).json()["queries"]] == ["ab", "r1", "r2"]
    # Once its readers are gone it can be deleted.
    assert httpx.delete(f"{url}/r1").status_code == 204
    assert httpx.delete(f"{url}/r2").status_code == 204
    assert httpx.delete(f"{url}/ab").status_code == 204


def test_matches_over_the_per_event_cap_are_dropped_counted_and_logged(start_server: StartServer) -> None:
    server = start_server(SCEMON_MAX_MATCHES_PER_EVENT=100)
    query = {"name": "all", "text": "SEQ(A, B, C) WITHIN 1000 MODE ALL"}
    assert httpx.post(f"{server.url}/v1/queries", json=query).status_code == 201
    events = [{"src": 1, "type": "A", "start": float(i)} for i in range(10)]
    events += [{"src": 1, "type": "B", "start": 100.0 + i} for i in range(20)]
    events += [{"src": 1, "type": "C", "start": 200.0}, {"src": 1, "type": "C", "start": 201.0}]
    answer = httpx.post(f"{server.url}/v1/events", json={"producer": "p", "batch_id": "b", "events": events})
    assert answer.status_code == 200, answer.text
    # Each C completes 10 x 20 = 200 matches: 100 kept of each, 100 of each dropped.
    assert answer.json()["matches"] == 200 and answer.json()["matches_capped"] == 200
    page = httpx.get(f"{server.url}/v1/matches", params={"limit": 1000}).json()
    assert len(page["matches"]) == 200
    assert httpx.get(f"{server.url}/v1/stats").json()["matches_capped"] == 200
    metrics = httpx.get(f"{server.url}/metrics").text
    assert 'scemon_matches_capped_total{query="all"} 200.0' in metrics
    log = server.log.read_text()
    assert "completed up to 200 matches of one query with one event; kept 100" in log


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("SEQ(A, B) WITHIN 0", "within", "WITHIN 0"),
        ("SEQ(A, B) WITHIN 0 ms", "within", "WITHIN 0"),
        ("SEQ(A, B^99999999999) WITHIN 10", "pattern", "99,999,999,999"),
        ("SEQ(A, B{200000}) WITHIN 10", "pattern", "200,000"),
        ("SEQ(A, B{100001,}, C) WITHIN 10", "pattern", "100,001"),
    ],
)
def test_a_zero_window_and_absurd_counts_are_422(
    shared_server: Server, text: str, field: str, words: str
) -> None:
    for route in ("/v1/queries", "/v1/queries/validate"):
        answer = httpx.post(f"{shared_server.url}{route}", json={"name": "bad", "text": text})
        assert answer.status_code == 422, (route, answer.text)
        assert answer.json()["detail"]["field"] == field and words in answer.json()["detail"]["message"]
    assert all(q["name"] != "bad" for q in httpx.get(f"{shared_server.url}/v1/queries").json()["queries"])


@pytest.mark.parametrize("value", ["5", True, False, None, [5], {"t": 5}])
def test_time_must_be_a_json_number(shared_server: Server, value: object) -> None:
    answer = httpx.post(f"{shared_server.url}/v1/time", json={"time": value})
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"]["field"] == "time"


def test_time_takes_integers_and_floats(shared_server: Server) -> None:
    for value in (5, 6.5):
        assert httpx.post(f"{shared_server.url}/v1/time", json={"time": value}).status_code == 200


def test_a_token_in_a_url_is_never_logged(tmp_path: Path) -> None:
    server = Server(tmp_path / "data", {"SCEMON_TOKENS": "s3cret-admin:admin"})
    server.log_level = "info"  # the access log, where URLs are printed
    server.start()
    try:
        with (
            pytest.raises(InvalidStatus),
            connect(
                f"ws://127.0.0.1:{server.port}/v1/matches/ws?from_seq=0&token=s3cret-admin", open_timeout=10
            ),
        ):
            pass
        httpx.get(f"{server.url}/v1/matches", params={"access_token": "s3cret-admin", "from_seq": 0})
        httpx.get(f"{server.url}/v1/stats", headers={"Authorization": "Bearer s3cret-admin"})
    finally:
        server.stop()
    log = server.log.read_text()
    assert "/v1/matches/ws?from_seq=0&token=<redacted>" in log  # the line is there, the token not
    assert "access_token=<redacted>" in log
    assert "s3cret" not in log


def test_head_on_the_probes_is_200(shared_server: Server) -> None:
    for path in ("/healthz", "/readyz"):
        answer = httpx.head(f"{shared_server.url}{path}")
        assert answer.status_code == 200 and answer.content == b""
