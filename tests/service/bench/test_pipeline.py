"""``scemon bench pipeline``'s choice of the baseline's Spark job settings."""

from __future__ import annotations

from pathlib import Path

from service.bench.pipeline import ROOT, _sizes_by_events


def test_a_baseline_with_batch_events_runs_the_same_micro_batches(tmp_path: Path) -> None:
    """A checkout whose job sizes micro-batches by events gets the same --batch-events
    as this build (the rows then differ by code alone); an older one, one file each."""
    assert _sizes_by_events(ROOT)
    older = tmp_path / "older" / "service" / "pipeline"
    older.mkdir(parents=True)
    (older / "sources.py").write_text('reader.option("maxFilesPerTrigger", n)\n')
    assert not _sizes_by_events(tmp_path / "older")
    assert not _sizes_by_events(tmp_path / "none")
