"""Probes and Prometheus metrics."""

from __future__ import annotations

import httpx

from tests.service.conftest import StartServer


def test_health_readiness_and_metrics(start_server: StartServer) -> None:
    server = start_server()
    client = server.client()
    assert httpx.get(f"{server.url}/healthz").json() == {"status": "ok", "detail": None}
    assert httpx.get(f"{server.url}/readyz").json()["status"] == "ok"
    client.register("ab", "SEQ(A, B) WITHIN 10 s")
    client.post_events("p", 1, [{"src": 1, "type": "A", "start": 1}, {"src": 1, "type": "B", "start": 2}])
    client.post_events("p", 1, [{"src": 1, "type": "A", "start": 1}])
    response = httpx.get(f"{server.url}/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    for line in (
        "scemon_events_total 2.0",
        "scemon_batches_total 1.0",
        "scemon_duplicate_batches_total 1.0",
        'scemon_matches_total{query="ab"} 1.0',
        "scemon_ingest_seconds_count 2.0",
        "scemon_subscribers 0.0",
        "scemon_queries 1.0",
        "scemon_ecqs 2.0",
        "scemon_stored_instances 1.0",  # the A; a last component's event is not stored
        "scemon_ready 1.0",
    ):
        assert line in text, line
    # The engine's own CPU time, counted by the writer thread around each batch.
    engine = [line for line in text.splitlines() if line.startswith("scemon_engine_cpu_seconds_total ")]
    assert len(engine) == 1 and float(engine[0].split()[1]) > 0, engine
