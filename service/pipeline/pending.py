"""Batches handed to the poster and not yet answered, kept in the checkpoint, so that
posting batch N while Spark commits it and prepares N+1 keeps exactly-once.

Spark commits batch N when the ``foreachBatch`` function returns, and by then the job
has only handed N to its poster thread: Spark's commit no longer means "N was
delivered", and a kill before N's answers would lose N (a restart resumes after the
committed batch, and Spark only ever re-runs its latest planned batch, which may be
N+1). So before handing N over, the job writes N as it will be posted — sorted and
routed, one Arrow file per service — to ``<checkpoint>/scemon/pending/<N>/``, and removes
it when every service has answered. A restart posts every batch still there, in order,
before the query starts: under the same ``(producer, batch id)`` and the same chunks,
so a service that had applied it answers "duplicate" and changes nothing. Posts go one
after another, so at most two batches are pending: the one posting and the next.

A kill of the process leaves the files the rename put in place (the page cache
outlives the process); the checkpoint is no safer than that against a machine crash
either: Spark writes its own logs the same way.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from api.spark_sink import PreparedBatch

__all__ = ["PendingBatches"]


class PendingBatches:
    """``<checkpoint>/scemon/pending`` of a local checkpoint folder."""

    def __init__(self, checkpoint: Path) -> None:
        self.folder = checkpoint / "scemon" / "pending"

    def write(self, batch_id: int, prepared: PreparedBatch) -> None:
        """Keep batch ``batch_id`` as it will be posted; whole or not at all (written in a
        hidden folder, then renamed into place, replacing an earlier copy)."""
        part = self.folder / f".{batch_id}.part"
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir(parents=True)
        for k, shard in enumerate(prepared.shards):
            with ipc.new_file(part / f"shard-{k}.arrow", shard.schema) as out:
                out.write_table(shard)
        final = self.folder / str(batch_id)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(part, final)

    def done(self, batch_id: int) -> None:
        """Every service answered batch ``batch_id``: forget it."""
        shutil.rmtree(self.folder / str(batch_id), ignore_errors=True)

    def pending(self) -> Iterator[tuple[int, PreparedBatch]]:
        """The batches not known to be delivered, oldest first, as they were to be posted."""
        if not self.folder.is_dir():
            return
        for batch_id in sorted(int(p.name) for p in self.folder.iterdir() if p.name.isdigit()):
            folder = self.folder / str(batch_id)
            names = sorted(folder.glob("shard-*.arrow"), key=lambda p: int(p.stem.removeprefix("shard-")))
            shards = [ipc.open_file(pa.memory_map(str(path))).read_all() for path in names]
            yield batch_id, PreparedBatch(sum(s.num_rows for s in shards), shards, 0.0)

    @staticmethod
    def rows(prepared: PreparedBatch) -> pa.Table:
        """The batch's events in their original row order (``_row``), as the dead letters
        of refused and late events name them."""
        table = pa.concat_tables(prepared.shards)
        return table.sort_by("_row")
