"""A two-shard cluster as the docs start it: the Spark job routing to two shards, the
queries registered once through the cluster, one merged subscription — exactly the
matches of one service fed the same files by the same job."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.cluster import Cluster, SyncClusterSubscription
from api.spark_sink import shard_of
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
