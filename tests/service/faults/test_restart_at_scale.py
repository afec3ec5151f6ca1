"""A restart at 100,000 queries serves the matches of a start that compiles every query.

The store of the demo's 100,000 credit-card queries (as ``scemon bench restart`` builds
it) is served, takes a window of events and is killed (SIGKILL). The same later events
then go to the server restarted on it — which reads its queries from the snapshot and
replays the window — and to a server started on a copy of the killed store without the
snapshot, which compiles every query again from the op log (as after an upgrade). Both
must hold the matches the killed one committed, and give the same matches after it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from api.client import Client
from service.bench.restart import BATCH, _events, _settled_stats, build_store
from service.server.process import ServerProcess
from service.server.snapshot import SNAPSHOT_FILE

pytestmark = [pytest.mark.faults, pytest.mark.slow]

N_QUERIES = 100_000
WINDOW = 3_000
AFTER = 2_000
# Seconds a start may take: the first one compiles 100,000 queries and writes their snapshot.
START = 300.0


def _serve(data: Path, log: Path) -> ServerProcess:
    return ServerProcess(data, log=log, log_level="info", inherit_settings=False).start(timeout=START)


def test_a_restart_at_100000_queries_gives_the_matches_of_a_start_that_compiles_them(tmp_path: Path) -> None:
    data = tmp_path / "data"
    build_store(data, N_QUERIES)
    batches = _events(N_QUERIES, WINDOW + AFTER)
    window, after = batches[: WINDOW // BATCH], batches[WINDOW // BATCH :]
    first = _serve(data, tmp_path / "first.log")
    try:
        with Client(first.url, timeout=START) as client:
            for k, batch in enumerate(window):
                client.post_events("test", f"window-{k}", batch)
            killed = _settled_stats(client, WINDOW)
            committed = client.all_matches()
    finally:
        first.kill()
    assert (data / SNAPSHOT_FILE).exists()
    copy = tmp_path / "copy"
    shutil.copytree(data, copy)
    (copy / SNAPSHOT_FILE).unlink()

    later: dict[str, list[dict[str, Any]]] = {}
    for label, folder in (("snapshot", data), ("compiled", copy)):
        server = _serve(folder, tmp_path / f"{label}.log")
        try:
            with Client(server.url, timeout=START) as client:
                assert _settled_stats(client, WINDOW)["matches"] == killed["matches"], label
                assert client.all_matches() == committed, label
                for k, batch in enumerate(after):
                    client.post_events("test", f"after-{k}", batch)
                _settled_stats(client, WINDOW + AFTER)
                later[label] = client.all_matches(from_seq=killed["matches"])
        finally:
            server.stop()
    assert "read in" in (tmp_path / "snapshot.log").read_text()  # from the snapshot, as it should
    assert "is not used" in (tmp_path / "compiled.log").read_text()
    # Not vacuous: the window and the later events both matched, across many queries.
    assert len(committed) > 1_000 and len(later["snapshot"]) > 1_000
    assert len({m["query"] for m in later["snapshot"]}) > 100
    assert later["snapshot"] == later["compiled"]
