"""``scemon bench restart``: seconds from starting ``scemon serve`` on a store to
``/readyz`` ok, against the number of stored queries, with a window of events retained.

Each point is a real server in a subprocess on 127.0.0.1 and a temporary store:

1. the store is given ``n`` queries of the demo (credit-card) workload, logged as one
   bulk registration (what a server that registered them keeps, written directly: the
   service's registration is not what this measures);
2. a server starts on it (``first_start_s``: it rebuilds every query from the log and
   writes the snapshot of them, service.server.snapshot), and ``events`` events of the
   workload are posted as JSON batches: the retained window;
3. the server is killed (SIGKILL: nothing flushed) and started again; ``restart_s`` is
   the wall time from the spawn of the process to ``/readyz`` answering 200, with the
   queries read from the snapshot and the window's batches replayed. ``rebuild_s`` is the
   part the engine's rebuild took, as the server logs it; the rest is the process
   starting (imports, the store's check, the web app).

The restarted server must hold what the killed one committed (the same next ``seq``),
else the point fails. ``against``: the same points on another checkout's server (``git
worktree add DIR <commit>``, its kernel built in place), on a store built the same way.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from service.bench.table import Table

__all__ = ["SIZES", "QUICK_SIZES", "measure", "run"]

SIZES = (1000, 10_000, 100_000)
QUICK_SIZES = (200, 1000)
EVENTS = 5000
QUICK_EVENTS = 1000
BATCH = 1000
# A start longer than this (seconds) fails the point.
START_TIMEOUT = 3600.0
# How long the engine's figures may take to count every posted event.
STATS_TIMEOUT = 600.0

_REBUILT = re.compile(r"engine rebuilt from the store in ([0-9.]+) s")


def build_store(data: Path, n_queries: int) -> None:
    """A store holding ``n_queries`` demo queries, as one bulk registration."""
    from ecq.evaluation.workload import credit_card_workload
    from service.server.store import Store

    queries, _ = credit_card_workload(n_queries=n_queries, n_events=0)
    store = Store(data)
    try:
        store.commit_register([(name, {"text": text}) for name, text in queries])
    finally:
        store.close()


def _events(n_queries: int, n_events: int) -> list[list[dict[str, Any]]]:
    from ecq.evaluation.workload import credit_card_workload

    _, events = credit_card_workload(n_queries=n_queries, n_events=n_events)
    dicts = [e.to_dict() for e in events]
    return [dicts[i : i + BATCH] for i in range(0, len(dicts), BATCH)]


def _rebuild_seconds(log: Path, offset: int) -> float | None:
    """The last rebuild time the server logged after byte ``offset`` of its log."""
    try:
        text = log.read_bytes()[offset:].decode(errors="replace")
    except OSError:
        return None
    found = _REBUILT.findall(text)
    return float(found[-1]) if found else None


def _settled_stats(client: Any, n_events: int) -> dict[str, Any]:
    """``/v1/stats`` once the engine's figures count every posted event: the server
    computes them on its writer thread, and answers with the last ones it has when that
    takes longer than a second (as it does with tens of thousands of queries)."""
    deadline = time.monotonic() + STATS_TIMEOUT
    while True:
        stats: dict[str, Any] = client.stats().model_dump()
        if stats["engine"].get("events") == n_events or time.monotonic() > deadline:
            return stats
        time.sleep(0.5)


def measure(n_queries: int, n_events: int, checkout: Path | None = None) -> dict[str, float | int]:
    """One point: ``first_start_s``, ``restart_s``, ``rebuild_s``, ``store_mb``, ``matches``
    (the matches the window gave)."""
    from api.client import Client
    from service.server.process import ServerProcess

    root = Path(tempfile.mkdtemp(prefix="scemon-bench-restart-"))
    try:
        data = root / "data"
        build_store(data, n_queries)
        server = ServerProcess(
            data, log=root / "server.log", log_level="info", inherit_settings=False, checkout=checkout
        )
        began = time.perf_counter()
        server.start(timeout=START_TIMEOUT)
        first = time.perf_counter() - began
        try:
            with Client(server.url, timeout=START_TIMEOUT) as client:
                for k, batch in enumerate(_events(n_queries, n_events)):
                    client.post_events("bench", f"window-{k}", batch)
                before = _settled_stats(client, n_events)
            server.kill()
            offset = server.log.stat().st_size
            began = time.perf_counter()
            server.start(timeout=START_TIMEOUT)
            restart = time.perf_counter() - began
            with Client(server.url, timeout=START_TIMEOUT) as client:
                after = _settled_stats(client, n_events)
        finally:
            server.stop()
        held = {k: (before["engine"].get(k), after["engine"].get(k)) for k in ("queries", "stored_instances")}
        if after["matches"] != before["matches"] or any(b != a for b, a in held.values()):
            raise RuntimeError(
                f"the restarted server differs from the killed one: next seq {after['matches']} against "
                f"{before['matches']}, (killed, restarted) engine figures {held}"
            )
        rebuild = _rebuild_seconds(server.log, offset)
        size = sum(p.stat().st_size for p in data.iterdir() if p.is_file())
        return {
            "first_start_s": round(first, 2),
            "restart_s": round(restart, 2),
            "rebuild_s": round(rebuild, 2) if rebuild is not None else -1.0,
            "store_mb": round(size / 1e6, 1),
            "matches": int(before["matches"]),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(
    quick: bool = False,
    sizes: tuple[int, ...] | None = None,
    events: int | None = None,
    against: Path | None = None,
) -> list[Table]:
    """One table: restart seconds against the stored queries (and on ``against``)."""
    from service.bench.table import Plot, Table

    ns = sizes or (QUICK_SIZES if quick else SIZES)
    n_events = events if events is not None else (QUICK_EVENTS if quick else EVENTS)
    columns = ["queries", "events", "matches", "store_mb", "first_start_s", "restart_s", "rebuild_s"]
    if against is not None:
        columns += ["other_restart_s", "other_rebuild_s"]
    table = Table(
        "restart",
        "Restart: seconds from starting the server to /readyz ok, against the stored queries",
        columns,
        plot=Plot(
            x="queries",
            series=tuple(c for c in columns if c.endswith("restart_s")),
            y_label="seconds to ready",
            x_label="stored queries (demo workload)",
            x_log=True,
            y_log=True,
        ),
        notes=[
            f"the demo (credit-card) workload's queries, {n_events} of its events posted in batches of "
            f"{BATCH} (the retained window), then SIGKILL and a new server on the store",
            "first_start_s: the first start on the store; restart_s: spawn to /readyz 200 after the "
            "kill; rebuild_s: the engine's rebuild within it, as the server logs it",
        ],
    )
    if against is not None:
        table.notes.append(f"other_*: the same on the checkout in {against}")
    for n in ns:
        point = measure(n, n_events)
        row: dict[str, int | float | str] = {"queries": n, "events": n_events, **point}
        if against is not None:
            other = measure(n, n_events, against)
            row["other_restart_s"] = other["restart_s"]
            row["other_rebuild_s"] = other["rebuild_s"]
        table.add(**row)
    return [table]
