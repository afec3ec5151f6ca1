"""The subscription hub: live matches fanned out to WebSocket subscribers.

Each subscriber has a bounded buffer. The hub never waits for a subscriber: when one
falls further behind than its bound it is marked *overflowed* (and counted at once),
its buffer is dropped, and its connection is closed with a frame saying so; the client
resumes by ``seq`` from the match log. So one slow consumer costs memory bounded by its
limit and never slows ingestion or the other subscribers.

A client that stops reading altogether leaves its connection's send waiting on a full
socket: it is *blocked* (:meth:`Hub.blocked`) from then until the connection goes
(uvicorn's keep-alive pings close it within about a minute).

The hub lives on the event loop. The EngineHost's thread hands it each operation's
matches as one :class:`~service.server.blocks.Block` through
``loop.call_soon_threadsafe`` *after* they are committed to the store, in ``seq``
order; a subscriber registers with the hub before reading its backlog from the store,
so every match reaches it by one path or both (it skips ``seq`` it has sent). A
subscriber of every query takes the block itself (O(1), whatever its size): its frames
are cut once and sent to every such subscriber; one of some queries takes a copy of
their matches (found through the block's index by query, built once for all of them),
so what it queues is bounded by its own matches.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Sequence

from service.server.blocks import Block, Run

__all__ = ["BLOCKED_AFTER", "Hub", "Subscriber"]

# A send pending longer than this (seconds) means the client is not reading.
BLOCKED_AFTER = 1.0


class Subscriber:
    """One subscriber's buffer of matches not yet sent. Event-loop thread only."""

    def __init__(self, queries: frozenset[str] | None, limit: int) -> None:
        self.queries = queries
        self.limit = limit
        self.buffer: deque[Run] = deque()
        # Matches in ``buffer`` (what the bound is checked against).
        self.count = 0
        self.overflowed = False
        self.wake = asyncio.Event()
        # When the send in progress began (monotonic seconds), or None between sends.
        self.sending_since: float | None = None

    def offer(self, blocks: Sequence[Block]) -> bool:
        """Queue the matches this subscriber wants; False if that overflowed it. O(1) a
        block for a subscriber of every query, O(its matches) for one of some queries."""
        if self.overflowed:
            return False
        queries = self.queries
        runs = [
            Run(block, range(len(block))) if queries is None else _wanted(block, queries) for block in blocks
        ]
        wanted = sum(len(run) for run in runs)
        if not wanted:
            return True
        # An empty buffer takes a whole batch however large, so a subscriber that keeps
        # up is never cut off by one big batch; memory stays within limit + one batch.
        if self.count and self.count + wanted > self.limit:
            self.overflowed = True
            self.buffer.clear()
            self.count = 0
            self.wake.set()
            return False
        self.buffer.extend(run for run in runs if run.picks)
        self.count += wanted
        self.wake.set()
        return True

    def take(self) -> list[Run]:
        """Everything buffered, oldest first."""
        out = list(self.buffer)
        self.buffer.clear()
        self.count = 0
        self.wake.clear()
        return out


def _wanted(block: Block, queries: frozenset[str]) -> Run:
    """A filtered subscriber's part of a block: the block itself when every match is
    wanted, else a copy of just the wanted ones (its memory is then bounded by its
    matches, not by the blocks they came in)."""
    picks = block.of_queries(queries)
    if len(picks) == len(block):
        return Run(block, range(len(block)))
    chosen = block.select(picks) if picks else block
    return Run(chosen, range(len(picks)))


class Hub:
    """The set of live subscribers. Event-loop thread only."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        # Those that get matches; ``connected`` also holds the overflowed ones until
        # their connection is gone.
        self.subscribers: set[Subscriber] = set()
        self.connected: set[Subscriber] = set()
        self.overflows = 0
        self.closing = False

    def subscribe(self, queries: frozenset[str] | None) -> Subscriber:
        sub = Subscriber(queries, self.limit)
        self.subscribers.add(sub)
        self.connected.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        self.subscribers.discard(sub)
        self.connected.discard(sub)

    def blocked(self) -> int:
        """Connected subscribers that are cut off (overflowed) or whose send has waited
        more than BLOCKED_AFTER seconds: clients not reading. O(subscribers)."""
        now = time.monotonic()
        return sum(
            1
            for sub in tuple(self.connected)
            if sub.overflowed or (sub.sending_since is not None and now - sub.sending_since > BLOCKED_AFTER)
        )

    def publish(self, blocks: Sequence[Block]) -> None:
        """Hand committed matches (blocks in ``seq`` order) to every subscriber."""
        for sub in tuple(self.subscribers):
            if not sub.offer(blocks):
                self.overflows += 1
                self.subscribers.discard(sub)

    def close(self) -> None:
        """Wake every subscriber so that it closes (server shutdown)."""
        self.closing = True
        for sub in self.subscribers:
            sub.wake.set()

    def backlog(self) -> tuple[int, int]:
        """Matches queued and not yet sent: over all subscribers, and the longest one
        queue (what the overflow bound is checked against). O(subscribers)."""
        lengths = [sub.count for sub in self.subscribers]
        return sum(lengths), max(lengths, default=0)

    def __len__(self) -> int:
        return len(self.connected)
