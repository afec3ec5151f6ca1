"""A two-shard cluster as the docs start it: the Spark job routing to two shards, the
queries registered once through the cluster, one merged subscription — exactly the
matches of one service fed the same files by the same job; with queries partitioned by
the merchant and by NONE too, once each shard is told its place."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.cluster import Cluster, SyncClusterSubscription
from api.routing import owner_of
from api.spark_sink import shard_of
from ecq.language import parse_queries, to_json
from service.cli.queries import query_bodies
from tests.service.conftest import StartService
from tests.service.pipeline.conftest import RunJob, ws_matches
from tests.service.pipeline.test_end_to_end import QUERIES, canonical, card_events, write_parts

pytestmark = [pytest.mark.spark, pytest.mark.server]


def test_one_registration_and_one_subscription_over_the_jobs_shards(
    tmp_path: Path, run_job: RunJob, start_service: StartService
) -> None:
    write_parts(tmp_path / "in", card_events(), "jsonl")
    single, first, second = start_service(), start_service(), start_service()
    bodies = query_bodies(QUERIES)
    with Cluster([first.url, second.url]) as cluster:
        cluster.register_bulk(bodies)
    with Cluster([single.url]) as one_shard:
        one_shard.register_bulk(bodies)
    run_job(tmp_path / "in", [single.url], checkpoint=str(tmp_path / "c1"))
    run_job(tmp_path / "in", [first.url, second.url], checkpoint=str(tmp_path / "c2"))

    one = ws_matches(single.url)
    merged = list(SyncClusterSubscription([first.url, second.url], idle_timeout=2.0))
    assert len(one) == 54
    assert {m["shard"] for m in merged} == {0, 1}
    for match in merged:
        assert shard_of(match["src"], 2) == match.pop("shard")
    assert canonical(merged) == canonical(one)


# Per merchant, whichever card paid: two cinema or bar payments at one merchant within an
# hour (six merchants, on both shards);
# across everything: a cinema, then any bar within ten minutes.
KEYED = """
QUERY merchant_pair
PATTERN SEQ(ANY(CNMA_A, BAR_C) a, ANY(CNMA_A, BAR_C) b)
PARTITION BY merchant
WITHIN 1 hours

QUERY cinema_then_bar_anywhere
PATTERN SEQ(CNMA_A, BAR_C)
PARTITION BY NONE
WITHIN 10 minutes
"""


def test_the_jobs_shards_route_queries_of_other_keys(
    tmp_path: Path, run_job: RunJob, start_service: StartService
) -> None:
    write_parts(tmp_path / "in", card_events(), "jsonl")
    single = start_service()
    shards = [start_service(SCEMON_SHARD=f"{k}/2") for k in range(2)]
    bodies = query_bodies(QUERIES) + [{"name": q.name, "pattern": to_json(q)} for q in parse_queries(KEYED)]
    with Cluster([s.url for s in shards]) as cluster:
        cluster.register_bulk(bodies)
    with Cluster([single.url]) as one_shard:
        one_shard.register_bulk(bodies)
    run_job(tmp_path / "in", [single.url], checkpoint=str(tmp_path / "c1"))
    run_job(tmp_path / "in", [s.url for s in shards], checkpoint=str(tmp_path / "c2"))

    one = ws_matches(single.url)
    merged = list(SyncClusterSubscription([s.url for s in shards], idle_timeout=2.0))
    keyed = [m for m in merged if m["query"] == "merchant_pair"]
    assert {owner_of(("merchant",), m["src"], 2) for m in keyed} == {m["shard"] for m in keyed} == {0, 1}
    assert {m["shard"] for m in merged if m["query"] == "cinema_then_bar_anywhere"} == {0}
    for match in merged:
        match.pop("shard")
    assert {m["query"] for m in one} >= {"merchant_pair", "cinema_then_bar_anywhere"}
    assert canonical(merged) == canonical(one)
