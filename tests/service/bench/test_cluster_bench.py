"""``scemon bench cluster`` (service/bench/cluster.py): its table's shape and that every
shard count delivers the same matches — behaviour only, never timings."""

from __future__ import annotations

from service.bench.cluster import run


def test_every_shard_count_delivers_one_services_matches() -> None:
    table = run(shard_counts=(1, 2), events=2_000, batch=500, n_queries=200)
    rows = table.records()
    assert [r["shards"] for r in rows] == [1, 2]
    assert rows[0]["matches"] == rows[1]["matches"]
    assert int(rows[0]["matches"]) > 10  # not vacuous
    for row in rows:
        assert row["events"] == 2_000
        assert float(row["register_s"]) > 0 and float(row["events_per_s"]) > 0
        assert 0 <= float(row["latency_p50_ms"]) <= float(row["latency_p99_ms"])
