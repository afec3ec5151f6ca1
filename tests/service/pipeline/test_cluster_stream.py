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


# Per merchant, whichever card paid: two cinema or bar payments at one merchant within an
# hour (six merchants, on both shards); across everything: a cinema, then any bar within
# ten minutes.
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


def test_one_registration_and_one_subscription_over_the_jobs_shards(
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
    assert len(one) > 54  # the card queries' 54 and the keyed ones'
    assert {m["query"] for m in one} >= {"merchant_pair", "cinema_then_bar_anywhere"}
    # Each match comes from the shard that owns its value: the source, the merchant, NONE's one value.
    for match in merged:
        shard = match.pop("shard")
        if match["query"] == "merchant_pair":
            assert owner_of(("merchant",), match["src"], 2) == shard
        elif match["query"] == "cinema_then_bar_anywhere":
            assert shard == 0
        else:
            assert shard_of(match["src"], 2) == shard
    assert {owner_of(("merchant",), m["src"], 2) for m in merged if m["query"] == "merchant_pair"} == {0, 1}
    assert canonical(merged) == canonical(one)
