"""A progress bar that stays out of the way.

Small replays finish before a bar would be readable, and a bar on a pipe or a log file is
noise, so the bar appears only on a terminal, on stderr (stdout carries the matches),
once the work is big or slow, and it vanishes when done. rich is imported only then: a
short run does not pay for it.
"""

from __future__ import annotations

import os
import sys
import time
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

__all__ = ["LazyProgress"]

# Environment variables by which rich takes a pipe for a terminal.
_FORCED = frozenset({"FORCE_TERMINAL", "TTY_COMPATIBLE", "TTY_INTERACTIVE"})


class LazyProgress:
    """Phases of work with a count each; a transient rich bar is shown once a phase's
    total exceeds ``min_items`` or the work has taken longer than ``min_seconds``."""

    def __init__(
        self, min_items: int = 50_000, min_seconds: float = 2.0, enabled: bool | None = None
    ) -> None:
        self._console: Console | None = None
        if enabled is None and not sys.stderr.isatty() and not _FORCED.intersection(os.environ):
            enabled = False  # a pipe or a file: rich would say so too, after its import
        self._enabled = enabled  # None: asked of rich's console once a bar would help
        self._min_items = min_items
        self._min_seconds = min_seconds
        self._started = time.monotonic()
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._description = ""
        self._total: int | None = None

    def __enter__(self) -> LazyProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def phase(self, description: str, total: int | None = None) -> None:
        """Start counting a new phase (``total`` unknown: a count without a bar end)."""
        self._description, self._total = description, total
        if self._bar is not None:
            self._task = self._bar.add_task(description, total=total)
        elif total is not None and total > self._min_items:
            self._show()

    def update(self, done: int) -> None:
        """Report that ``done`` items of the current phase are finished."""
        if self._bar is None:
            if time.monotonic() - self._started < self._min_seconds:
                return
            self._show()
        bar, task = self._bar, self._task
        if bar is not None and task is not None:
            bar.update(task, completed=done)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def _show(self) -> None:
        if self._enabled is False:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        if self._console is None:
            self._console = Console(stderr=True)
        self._enabled = self._console.is_terminal
        if not self._enabled:
            return
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=self._console,
            transient=True,
        )
        self._bar.start()
        self._task = self._bar.add_task(self._description, total=self._total)
