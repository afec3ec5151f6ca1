"""Match blocks: the matches one operation produced, as one JSON array text.

Why: a batch of 10,000 events gives thousands of matches, and everything the service
did with them was per match — one match-log row each (an SQLite insert and an index
entry: most of the store's cost), one string per subscriber per match to fan out, and
each subscriber joining its own frames. A :class:`Block` holds them the way every
consumer wants them: the op's matches in ``seq`` order as the text
``[m0,m1,...]`` (each ``mi`` the match's wire JSON, ``seq`` included), with where each
match starts in it and which query each belongs to. The store logs a block as one row
(:mod:`service.server.store`), the hub hands the same block to every subscriber
(:mod:`service.server.hub`), and a WebSocket frame of a whole block, or of a run of it,
is a slice of its text — built once per block and frame size however many subscribers
send it (:meth:`Block.frames`).

A :class:`Run` is what one subscriber (or one read of the log) takes of a block: all
of it, a stretch of it (resuming mid-block), or the matches of some queries.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from heapq import merge
from itertools import accumulate

__all__ = ["Block", "Frame", "Run", "frames_of", "u32_bytes", "u32_list"]

# (the seq of its last match, the message's text, how many matches it holds)
Frame = tuple[int, str, int]


def u32_bytes(values: Iterable[int]) -> bytes:
    """Unsigned 32-bit integers as little-endian bytes (how the store keeps offsets)."""
    out = array("I", values)
    if out.itemsize != 4:  # pragma: no cover - no CPython platform we build for
        out = array("L", out)
    if sys.byteorder == "big":  # pragma: no cover
        out.byteswap()
    return out.tobytes()


def u32_list(data: bytes) -> list[int]:
    """The inverse of :func:`u32_bytes`."""
    out = array("I")
    out.frombytes(data)
    if sys.byteorder == "big":  # pragma: no cover
        out.byteswap()
    return out.tolist()


class Block:
    """``len(queries)`` matches with seqs ``first ..`` (or ``seqs``), as one JSON array
    text. Immutable once built; any thread may read it, frames are cached on it (event
    loop only)."""

    __slots__ = ("first", "seqs", "queries", "text", "starts", "_frames", "_by_query")

    def __init__(
        self,
        first: int,
        queries: Sequence[str],
        text: str,
        starts: Sequence[int],
        seqs: Sequence[int] | None = None,
    ) -> None:
        """``starts[i]``: where match ``i`` begins in ``text``; ``starts[n]`` is
        ``len(text)`` (so match ``i`` is ``text[starts[i] : starts[i + 1] - 1]``, the
        comma or the closing bracket after it left out). ``seqs``: each match's seq,
        ascending, when they are not ``first, first + 1, ...`` (a :meth:`select`)."""
        self.first = first
        self.seqs: Sequence[int] = range(first, first + len(queries)) if seqs is None else seqs
        self.queries = queries
        self.text = text
        self.starts = starts
        self._frames: dict[int, list[Frame]] = {}
        self._by_query: dict[str, list[int]] | None = None

    @classmethod
    def of(cls, first: int, queries: Sequence[str], texts: Sequence[str]) -> Block:
        """A block of the matches ``texts`` (their JSON, in seq order), of ``queries``.
        O(total length)."""
        text = "[" + ",".join(texts) + "]"
        starts = list(accumulate((len(t) + 1 for t in texts), initial=1))
        return cls(first, queries, text, starts)

    def __len__(self) -> int:
        return len(self.queries)

    @property
    def next_seq(self) -> int:
        """The seq after its last match."""
        return self.seqs[-1] + 1 if self.queries else self.first

    def select(self, picks: Sequence[int]) -> Block:
        """A block of only the matches at ``picks``: what a subscriber of some queries
        keeps, so that its queue holds their text, not the whole block's (a slow one
        would otherwise keep every block alive that one of its matches came in)."""
        match, seqs = self.match, self.seqs
        chosen = Block.of(0, [self.queries[i] for i in picks], [match(i) for i in picks])
        chosen.seqs = [seqs[i] for i in picks]
        chosen.first = chosen.seqs[0] if picks else self.first
        return chosen

    def match(self, i: int) -> str:
        """Match ``i``'s JSON text."""
        return self.text[self.starts[i] : self.starts[i + 1] - 1]

    def span(self, lo: int, hi: int) -> str:
        """Matches ``lo .. hi - 1`` as the inside of a JSON array (``m,m,m``)."""
        return self.text[self.starts[lo] : self.starts[hi] - 1]

    def of_queries(self, queries: frozenset[str]) -> list[int]:
        """The indexes of the matches of ``queries``, in order. The index by query is
        built once per block (O(n)) and shared by every filtered subscriber."""
        by_query = self._by_query
        if by_query is None:
            by_query = {}
            for i, query in enumerate(self.queries):
                by_query.setdefault(query, []).append(i)
            self._by_query = by_query
        lists = [by_query[q] for q in queries if q in by_query]
        if len(lists) <= 1:
            return lists[0] if lists else []
        return list(merge(*lists))

    def frames(self, batch: int) -> list[Frame]:
        """The whole block as messages of at most ``batch`` matches (one match object a
        message for ``batch`` 1, else JSON arrays), built once per frame size and shared
        by every subscriber that takes the whole block."""
        cached = self._frames.get(batch)
        if cached is None:
            cached = self._frames[batch] = self.cut(0, len(self.queries), batch)
        return cached

    def cut(self, lo: int, hi: int, batch: int) -> list[Frame]:
        seqs = self.seqs
        if batch == 1:
            return [(seqs[i], self.match(i), 1) for i in range(lo, hi)]
        if lo == 0 and hi == len(self.queries) and hi <= batch:
            return [(seqs[hi - 1], self.text, hi)]  # the text itself: no copy
        out: list[Frame] = []
        for at in range(lo, hi, batch):
            end = min(at + batch, hi)
            out.append((seqs[end - 1], "[" + self.span(at, end) + "]", end - at))
        return out


@dataclass(slots=True)
class Run:
    """What one reader takes of a block: the matches at ``picks`` (indexes, ascending)."""

    block: Block
    picks: range | list[int]

    def __len__(self) -> int:
        return len(self.picks)

    @property
    def last_seq(self) -> int:
        return self.block.seqs[self.picks[-1]]

    def after(self, seq: int) -> Run | None:
        """The part with seqs above ``seq`` (None when nothing is left)."""
        picks, seqs = self.picks, self.block.seqs
        if not picks or seqs[picks[-1]] <= seq:
            return None
        if seqs[picks[0]] > seq:
            return self
        if isinstance(picks, range):  # seqs ascend: the first index past seq
            return Run(self.block, range(bisect_right(seqs, seq, picks.start, picks.stop), picks.stop))
        return Run(self.block, [i for i in picks if seqs[i] > seq])

    def texts(self) -> list[str]:
        """Each match's JSON text."""
        match = self.block.match
        return [match(i) for i in self.picks]

    def seqs(self) -> list[int]:
        seqs = self.block.seqs
        return [seqs[i] for i in self.picks]

    def inside(self) -> str:
        """The matches as the inside of a JSON array (``m,m,m``)."""
        picks = self.picks
        if isinstance(picks, range):
            return self.block.span(picks.start, picks.stop) if picks else ""
        return ",".join(self.texts())

    def frames(self, batch: int) -> list[Frame]:
        block, picks = self.block, self.picks
        if isinstance(picks, range):
            if picks.start == 0 and picks.stop == len(block):
                return block.frames(batch)
            return block.cut(picks.start, picks.stop, batch)
        texts, seqs = self.texts(), block.seqs
        if batch == 1:
            return [(seqs[i], t, 1) for i, t in zip(picks, texts, strict=True)]
        out: list[Frame] = []
        for at in range(0, len(picks), batch):
            end = min(at + batch, len(picks))
            out.append((seqs[picks[end - 1]], "[" + ",".join(texts[at:end]) + "]", end - at))
        return out


def frames_of(runs: Sequence[Run], batch: int) -> list[Frame]:
    """The messages for ``runs`` (in seq order) with at most ``batch`` matches each:
    each run's frames (a whole block's are its cached ones, the same text for every
    subscriber), neighbouring frames joined while they fit in one — so many small
    blocks (time advances, small posts) still go out as few messages. O(matches)."""
    if batch == 1:
        return [frame for run in runs for frame in run.frames(1)]
    out: list[Frame] = []
    pending: list[Frame] = []
    count = 0
    for run in runs:
        for frame in run.frames(batch):
            if pending and count + frame[2] > batch:
                out.append(_joined(pending, count))
                pending, count = [], 0
            pending.append(frame)
            count += frame[2]
    if pending:
        out.append(_joined(pending, count))
    return out


def _joined(frames: list[Frame], count: int) -> Frame:
    if len(frames) == 1:
        return frames[0]
    return (frames[-1][0], "[" + ",".join(text[1:-1] for _, text, _ in frames) + "]", count)
