"""WebSocket subscribers for ``scemon bench pipeline``, in a process of their own.

Why a separate process: a subscriber that reads every match decodes every frame, and
doing that in the process that posts the batches would bill the subscribers' work to
the poster (one interpreter, one GIL). Here they run as users' clients do — beside the
service, sharing the machine with it, not the poster's interpreter.

Run as ``python -m service.bench.subscribers URL N FROM_SEQ RECORD``: ``N``
subscriptions (:class:`api.client.Subscription`, the client users have) from
``FROM_SEQ``, all on one asyncio loop. Each counts the matches it is given; the first
also notes when each match arrived (``time.monotonic()``, the same clock across the
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


async def _consume(url: str, i: int, from_seq: int, counts: _Counts) -> None:
    received, last = counts.received, counts.last
    now = time.monotonic
    if i == 0:
        seqs, times = counts.seqs, counts.times
        async for match in Subscription(url, from_seq=from_seq, max_retries=3):
            t = now()
            seqs.append(match["seq"])
            times.append(t)
            received[0] += 1
            last[0] = t
    else:
        async for _ in Subscription(url, from_seq=from_seq, max_retries=3):
            received[i] += 1
            last[i] = now()


async def _run(url: str, n: int, from_seq: int) -> _Counts:
    counts = _Counts(n)
    tasks = [asyncio.ensure_future(_consume(url, i, from_seq, counts)) for i in range(n)]
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
    counts = asyncio.run(_run(url, n, from_seq))
    record.write_bytes(
        orjson.dumps(
            {"received": counts.received, "last": counts.last, "seqs": counts.seqs, "times": counts.times}
        )
    )
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
