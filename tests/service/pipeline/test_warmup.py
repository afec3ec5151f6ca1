"""``warm_up``: the job's plan run once on a sample leaves Spark's Python workers started
with scemon imported — the tasks that follow find them so — and leaves nothing else.

It runs in a process of its own: the tests' shared Spark session has long had its
workers warmed by other jobs, so only a fresh one shows the difference."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

pytestmark = pytest.mark.spark

_SCRIPT = """
import os, sys, tempfile
import orjson
from service.pipeline.session import spark_session
from service.pipeline.warmup import warm_up

def probe(batches):
    # Runs in a Python worker: is scemon's parser loaded there already?
    import os, sys
    import pyarrow as pa
    for _ in batches:
        yield pa.RecordBatch.from_pydict(
            {"pid": [os.getpid()], "warm": ["service.pipeline.rows" in sys.modules]}
        )

def workers(spark):
    rows = spark.range(0, 2, numPartitions=2).mapInArrow(probe, "pid long, warm boolean").collect()
    return sorted((row.pid, row.warm) for row in rows)

spark = spark_session("local[2]", app_name="scemon-warm-up-test")
before = workers(spark)
seconds = warm_up(spark)
after = workers(spark)
left = [p.name for p in os.scandir(tempfile.gettempdir()) if p.name.startswith("scemon-warm-up-")]
print(orjson.dumps({
    "before": before, "after": after, "seconds": seconds,
    "active": len(spark.streams.active), "left": left,
}).decode())
spark.stop()
"""


def test_warm_up_leaves_the_python_workers_started_with_scemon_loaded(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    result = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(temp)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = orjson.loads(result.stdout.strip().splitlines()[-1])
    # Fresh workers have not loaded the parser; after the warm-up the job's tasks run
    # in workers that have (Spark reuses them), so the first micro-batch does not pay
    # their start.
    assert [warm for _, warm in out["before"]] == [False, False]
    assert [warm for _, warm in out["after"]] == [True, True]
    assert out["seconds"] > 0
    # Its streaming query ended and its sample, checkpoint and dead letters are gone.
    assert out["active"] == 0
    assert out["left"] == []
