"""Sorting py-spy samples into the layers of the path (service/bench/profile.py)."""

from __future__ import annotations

from pathlib import Path

from service.bench.profile import LAYERS, layer_of, layers_of

_INGEST = "_ingest (/w/service/server/host.py:300)"
_ROOT = "_bootstrap (threading.py:1002);run (concurrent/futures/thread.py:58)"


def test_the_deepest_marked_frame_decides_the_layer() -> None:
    engine = [_ROOT, _INGEST, "process (/w/ecq/timekeeper.py:120)", "process (/w/ecq/engine.py:90)"]
    assert layer_of(engine) == "engine"
    rows = [_ROOT, _INGEST, "_number (/w/service/server/host.py:410)", "to_dict (/w/ecq/match.py:40)"]
    assert layer_of(rows) == "match rows (seq, JSON)"
    store = [_ROOT, _INGEST, "commit_batch (/w/service/server/store.py:260)", "_write_matches (store.py:290)"]
    assert layer_of(store) == "store commit (SQLite)"
    send = [
        "run (asyncio/events.py:80)",
        "_stream (/w/service/server/routes/matches.py:190)",
        "send (ws.py:1)",
    ]
    assert layer_of(send) == "WebSocket send"


def test_a_stack_without_a_marker_is_the_loop_or_other() -> None:
    assert (
        layer_of(["run (uvicorn/server.py:60)", "handle (h11/_connection.py:10)"])
        == "HTTP server and event loop"
    )
    assert layer_of(["main (x.py:1)"]) == "other"
    assert "other" in LAYERS and len(set(LAYERS)) == len(LAYERS)


def test_a_raw_file_is_counted_by_layer(tmp_path: Path) -> None:
    raw = tmp_path / "profile.txt"
    raw.write_text(
        f"{_ROOT};{_INGEST};process (/w/ecq/timekeeper.py:1) 7\n"
        f"{_ROOT};{_INGEST};events_body (/w/service/server/store.py:1) 3\n"
        "not a sample line\n"
    )
    assert layers_of(raw) == {"engine": 7, "event log (encode)": 3}
    assert layers_of(tmp_path / "missing.txt") == {}
