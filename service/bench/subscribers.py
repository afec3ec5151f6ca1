"""WebSocket subscribers for ``scemon bench pipeline``, in processes of their own.

Why a separate process: a subscriber that reads every match decodes every frame, and
doing that in the process that posts the batches would bill the subscribers' work to
the poster (one interpreter, one GIL). Here they run as users' clients do — beside the
service, sharing the machine with it, not the poster's interpreter.

Run as ``python -m service.bench.subscribers URL N FROM_SEQ RECORD [TIMED]``: ``N``
subscriptions (:class:`api.client.Subscription`, the client users have) from
``FROM_SEQ``, all on one asyncio loop, each reading a message's matches at a time
(:meth:`~api.client.Subscription.batches`: every match decoded, one step of the loop
per message). The bench runs several such processes for many subscribers (one per core
at most: 10 Python subscribers on one loop were the bound of a 10-subscriber row, not
the server). Each counts the matches it is given; with ``TIMED`` 1 (the default) the
first also notes when each match arrived (``time.monotonic()``, the same clock across the
processes of one machine) so the bench can compute post-to-frame latency. A line on
stdin, the number of matches to expect, ends the run once every subscriber has them
(or after ``TIMEOUT`` seconds); the counts and the arrival times go to ``RECORD`` as
JSON, and ``done`` is printed.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import orjson

from api.client import Subscription

__all__ = ["TIMEOUT", "main"]

# The longest a run waits for the expected matches after being told how many.
TIMEOUT = 300.0


class _Counts:
    def __init__(self, n: int) -> None:
        self.received = [0] * n
        self.last = [0.0] * n
        self.seqs: list[int] = []
        self.times: list[float] = []


async def _consume(url: str, i: int, from_seq: int, counts: _Counts, timed: bool) -> None:
    received, last = counts.received, counts.last
    now = time.monotonic
    async for matches in Subscription(url, from_seq=from_seq, max_retries=3).batches():
        t = now()
        if timed:
            counts.seqs += [match["seq"] for match in matches]
            counts.times += [t] * len(matches)
        received[i] += len(matches)
        last[i] = t


async def _run(url: str, n: int, from_seq: int, timed: bool) -> _Counts:
    counts = _Counts(n)
    tasks = [asyncio.ensure_future(_consume(url, i, from_seq, counts, timed and i == 0)) for i in range(n)]
    loop = asyncio.get_running_loop()
    line = await loop.run_in_executor(None, sys.stdin.readline)
    expected = int(line.strip() or 0)
    deadline = time.monotonic() + TIMEOUT
    while any(r < expected for r in counts.received) and time.monotonic() < deadline:
        failed = [t for t in tasks if t.done()]
        if failed:  # a subscription gave up: stop waiting, the record shows the shortfall
            break
        await asyncio.sleep(0.005)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return counts


def main(argv: list[str]) -> None:
    url, n, from_seq, record = argv[0], int(argv[1]), int(argv[2]), Path(argv[3])
    timed = len(argv) < 5 or argv[4] == "1"
    counts = asyncio.run(_run(url, n, from_seq, timed))
    record.write_bytes(
        orjson.dumps(
            {"received": counts.received, "last": counts.last, "seqs": counts.seqs, "times": counts.times}
        )
    )
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
