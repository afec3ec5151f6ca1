"""The dead-letter folder: the rows the job could not deliver, with the reason."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import orjson
import pyarrow as pa

from service.pipeline.options import JobError, local_path

__all__ = ["DeadLetters"]


class DeadLetters:
    """The dead-letter folder: per batch, a JSON Lines file of the rows that are not
    valid events, ``batch-<id>.jsonl``; of the events the service refused,
    ``batch-<id>-rejected.jsonl``; and of the events it took late (posted and applied all
    the same, but past the allowed lateness), ``batch-<id>-late.jsonl``. Each line is
    ``{"batch", "file", "line", "reason", "raw"}``.

    The first is written before the batch's events are posted, the others from the
    service's answers; each is replaced whole (write, then rename), so a batch that Spark
    re-runs leaves exactly one copy. The folder is the driver's:
    on a cluster, a volume the driver mounts.
    """

    def __init__(self, folder: str) -> None:
        local = local_path(folder)
        if local is None:
            raise JobError(f"--dead-letter {folder}: must be a folder on the driver's filesystem")
        self.folder = Path(local)

    def write(self, batch_id: int, bad: pa.Table) -> None:
        """Dead-letter the rows the job's validation rejected."""
        if bad.num_rows:
            rows = bad.select(["path", "line", "error", "raw"]).to_pylist()
            self._write(
                f"batch-{batch_id:08d}.jsonl",
                batch_id,
                [(r["path"], r["line"], r["error"], r["raw"]) for r in rows],
            )

    def write_rejected(self, batch_id: int, good: pa.Table, rejected: list[dict[str, object]]) -> None:
        """Dead-letter the events the service refused (422): an event too far ahead of its
        clock, or one a service with stricter limits will not take."""
        self._write(f"batch-{batch_id:08d}-rejected.jsonl", batch_id, self._lines(good, rejected))

    def write_late(self, batch_id: int, good: pa.Table, late: list[dict[str, object]]) -> None:
        """Record the events the service took late (``late by 12.5 s``): they were
        applied, but matches with events it had already let go are lost."""
        self._write(f"batch-{batch_id:08d}-late.jsonl", batch_id, self._lines(good, late))

    @staticmethod
    def _lines(good: pa.Table, items: list[dict[str, object]]) -> list[tuple[object, object, object, object]]:
        lines: list[tuple[object, object, object, object]] = []
        for item in sorted(items, key=lambda item: int(str(item["row"]))):
            row = good.slice(int(str(item["row"])), 1).to_pylist()[0]
            raw = {k: row[k] for k in ("id", "src", "type", "start", "end", "prob", "attrs")}
            lines.append((row["path"], row["line"], str(item["reason"]), orjson.dumps(raw).decode()))
        return lines

    def _write(self, name: str, batch_id: int, rows: Sequence[tuple[object, object, object, object]]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        body = b"".join(
            orjson.dumps({"batch": batch_id, "file": path, "line": line, "reason": reason, "raw": raw})
            + b"\n"
            for path, line, reason, raw in rows
        )
        temp = self.folder / f".{name}.tmp"
        temp.write_bytes(body)
        os.replace(temp, self.folder / name)
