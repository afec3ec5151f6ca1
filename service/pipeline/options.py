"""What ``scemon stream`` tells the job (:class:`JobOptions`), the ``--map`` option's
parsing, and the job's one error (:class:`JobError`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlparse

from api.spark_sink import RetryPolicy
from ecq.errors import ScemonError
from service.pipeline.rows import FIELDS

__all__ = ["RATE_PREFIX", "JobError", "JobOptions", "local_path", "parse_mapping"]

# The synthetic source: ``rate:<rows per second>[:<sources>]``.
RATE_PREFIX = "rate:"


class JobError(ScemonError):
    """A job that cannot start or had to stop: the message says why, on one line."""


@dataclass(frozen=True)
class JobOptions:
    """Everything ``scemon stream`` is told."""

    source: str
    services: Sequence[str]
    checkpoint: str
    dead_letter: str
    fmt: str | None = None
    mapping: Mapping[str, str] | None = None
    once: bool = False
    producer: str | None = None
    max_files_per_trigger: int | None = None
    # About this many events per micro-batch (a file source's bytes per trigger, from
    # the files' bytes per event); ignored when max_files_per_trigger is given.
    batch_events: int = 100_000
    max_batch_events: int = 50_000
    trigger_seconds: float = 2.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    token: str | None = None
    # The disorder the input may have, seconds: every service must hold events that long.
    lateness: float = 0.0
    # Post batch N while Spark commits it and prepares N+1 (needs a local checkpoint,
    # which records what was delivered: service.pipeline.delivered); else post, then commit.
    overlap: bool = True

    @property
    def rate(self) -> tuple[int, int] | None:
        """``(rows per second, sources)`` for the synthetic source, else None."""
        if not self.source.startswith(RATE_PREFIX):
            return None
        parts = self.source[len(RATE_PREFIX) :].split(":")
        try:
            rows = int(parts[0])
            sources = int(parts[1]) if len(parts) > 1 else 1000
        except (ValueError, IndexError):
            rows = sources = 0
        if len(parts) > 2 or rows <= 0 or sources <= 0:
            raise JobError(
                f"bad synthetic source {self.source!r}: expected rate:<rows per second>[:<sources>]"
            )
        return rows, sources


def parse_mapping(text: str | None) -> dict[str, str] | None:
    """``src=card,start=ts`` → ``{"src": "card", "start": "ts"}``; a clear error for a
    field that is not an event field, a field named twice or a column used twice."""
    if not text:
        return None
    out: dict[str, str] = {}
    for item in text.split(","):
        name, eq, column = item.partition("=")
        name, column = name.strip(), column.strip()
        if not eq or not name or not column:
            raise JobError(f"--map {text!r}: expected field=column pairs separated by commas, got {item!r}")
        if name not in FIELDS:
            raise JobError(f"--map: unknown event field {name!r} (expected one of {', '.join(FIELDS)})")
        if name in out:
            raise JobError(f"--map: field {name!r} is mapped twice")
        if column in out.values():
            raise JobError(f"--map: column {column!r} is mapped to two fields")
        out[name] = column
    return out


def local_path(location: str) -> str | None:
    """A plain or ``file:`` path as a local path; None for another filesystem (hdfs:, s3a:)."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file") or len(parsed.scheme) == 1:  # len 1: a Windows drive
        return parsed.path if parsed.scheme == "file" else location
    return None
