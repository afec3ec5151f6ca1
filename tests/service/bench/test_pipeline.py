"""``scemon bench pipeline``'s choice of the baseline's Spark job settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from service.bench.pipeline import (
    _BAD_ROWS,
    _BATCH_LINE,
    ROOT,
    Row,
    _cpu_seconds,
    _sizes_by_events,
    _tree_cpu_seconds,
)


def test_a_baseline_with_batch_events_runs_the_same_micro_batches(tmp_path: Path) -> None:
    """A checkout whose job sizes micro-batches by events gets the same --batch-events
    as this build (the rows then differ by code alone); an older one, one file each."""
    assert _sizes_by_events(ROOT)
    older = tmp_path / "older" / "service" / "pipeline"
    older.mkdir(parents=True)
    (older / "sources.py").write_text('reader.option("maxFilesPerTrigger", n)\n')
    assert not _sizes_by_events(tmp_path / "older")
    assert not _sizes_by_events(tmp_path / "none")


def test_the_job_s_batch_line_gives_its_dead_lettered_rows() -> None:
    """The Spark row refuses a run that dead-lettered rows; it reads the count from the
    line ``scemon stream`` prints per batch (service/cli/stream.py)."""
    line = (
        "batch 3: 100000 events in 2 posts, 65869 matches, 7.65s (1.40s collecting, "
        "6.26s posting; total 400000 events, 223151 bad rows)"
    )
    assert _BATCH_LINE.match(line)
    found = _BAD_ROWS.search(line)
    assert found is not None and found.group(1) == "223151"


def test_cpu_bound_is_the_server_s_core_or_the_machine_s_cores() -> None:
    """The server's Python is one core; with the others' CPU, all cores are shared."""
    alone = Row("service, 0 subs", 0, 1_000_000, 0, 10.0, cpu_seconds=5.0)
    assert alone.cpu_bound(2) == 200_000  # 5 µs of server per event: one core
    shared = Row("Spark job, 1 sub", 1, 1_000_000, 0, 10.0, cpu_seconds=5.0, subs_cpu_seconds=1.0)
    shared.job_cpu_seconds = 14.0  # 20 µs per event in all, on two cores
    assert shared.all_cpu_seconds == 20.0
    assert shared.cpu_bound(2) == 100_000


def test_a_process_tree_s_cpu_counts_its_children() -> None:
    """The job's CPU is its whole tree (driver, JVM, Python workers): a child's CPU shows."""
    burn = (
        "import time\nend = time.process_time() + 0.3\n"
        "while time.process_time() < end: pass\nprint(1, flush=True)\ninput()"
    )
    with subprocess.Popen(
        [sys.executable, "-c", burn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "1"
            assert _tree_cpu_seconds(os.getpid()) >= _cpu_seconds(os.getpid()) + 0.25
        finally:
            child.kill()
