"""Matches per second of each query over the last minute, for ``GET /v1/queries``.

Why on the server: a console opened now should see the rates at once, not after it has
watched the counts for a minute. Counts are kept in one-second buckets; the writer
thread adds to the newest, readers (the event loop) sum the buckets of the last minute,
so a lock guards them. Adding is O(queries that matched in the batch); reading is
O(buckets × queries with recent matches).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping

__all__ = ["MatchRates"]


class MatchRates:
    """Sliding-window match counts per query."""

    def __init__(self, span: int = 60, clock: Callable[[], float] = time.monotonic) -> None:
        self.span = span
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()
        # (second, {query: matches in that second}), oldest first
        self._buckets: deque[tuple[int, dict[str, int]]] = deque()

    def add(self, counts: Mapping[str, int]) -> None:
        """Count ``counts[query]`` matches now."""
        second = int(self._clock())
        with self._lock:
            buckets = self._buckets
            if not buckets or buckets[-1][0] != second:
                buckets.append((second, {}))
                while buckets[0][0] <= second - self.span:
                    buckets.popleft()
            bucket = buckets[-1][1]
            for query, n in counts.items():
                bucket[query] = bucket.get(query, 0) + n

    def per_second(self) -> dict[str, float]:
        """Each query's matches in the last ``span`` seconds divided by that span (or by
        the time since start, when that is shorter); queries without any are absent."""
        now = self._clock()
        oldest = int(now) - self.span
        totals: dict[str, int] = {}
        with self._lock:
            for second, bucket in self._buckets:
                if second > oldest:
                    for query, n in bucket.items():
                        totals[query] = totals.get(query, 0) + n
        seconds = max(1.0, min(float(self.span), now - self._started))
        return {query: n / seconds for query, n in totals.items()}
