"""Sorting py-spy samples into the layers of the path (service/bench/profile.py)."""

from __future__ import annotations

from pathlib import Path

from service.bench.profile import LAYERS, layer_of, layers_of

# Frames as py-spy's raw format writes them: methods as Class.method, the writer thread
# under concurrent.futures (which must not make it count as the event loop).
_INGEST = "EngineHost._ingest (/w/service/server/host.py:300)"
_ROOT = "Thread._bootstrap (threading.py:1002);_WorkItem.run (concurrent/futures/thread.py:58)"


def test_the_deepest_marked_frame_decides_the_layer() -> None:
    engine = [
        _ROOT,
        _INGEST,
        "EngineHost._process (/w/service/server/host.py:702)",
        "TimeKeeper.process (/w/ecq/time/timekeeper.py:120)",
        "Network.clean.<locals>.<genexpr> (/w/ecq/network.py:641)",
    ]
    assert layer_of(engine) == "engine"
    rows = [
        _ROOT,
        _INGEST,
        "EngineHost._number (/w/service/server/host.py:410)",
        "to_dict (/w/ecq/match.py:40)",
    ]
    assert layer_of(rows) == "match rows (seq, JSON)"
    store = [
        _ROOT,
        _INGEST,
        "Store.commit_batch (/w/service/server/store.py:260)",
        "Store._write_matches (/w/service/server/store.py:290)",
    ]
    assert layer_of(store) == "store commit (SQLite)"
    log = [
        _ROOT,
        _INGEST,
        "events_body (/w/service/server/store.py:144)",
        "events_body.<locals>.<listcomp> (x)",
    ]
    assert layer_of(log) == "event log (encode)"
    decode = [_ROOT, "from_arrow (/w/service/server/ingest.py:184)", "from_arrow.<locals>.<dictcomp> (x)"]
    assert layer_of(decode) == "decode (Arrow → events)"
    stats = [_ROOT, _INGEST, "EngineHost._refresh_stats (/w/service/server/host.py:789)", "Engine.stats (e)"]
    assert layer_of(stats) == "stats"
    send = [
        "run (asyncio/events.py:80)",
        "_stream (/w/service/server/routes/matches.py:190)",
        "send (ws.py:1)",
    ]
    assert layer_of(send) == "WebSocket send"


def test_the_writer_thread_outside_every_layer_is_host_bookkeeping() -> None:
    sort = [_ROOT, _INGEST, "_arrival_key (/w/service/server/host.py:212)"]
    assert layer_of(sort) == "host bookkeeping"
    # A marker's function name must be the frame's whole last part, not a suffix of it.
    assert layer_of([_ROOT, _INGEST, "Engine.preprocess (/w/ecq/time/timekeeper.py:1)"]) == "host bookkeeping"


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
        f"{_ROOT};{_INGEST};TimeKeeper.process (/w/ecq/time/timekeeper.py:1) 7\n"
        f"{_ROOT};{_INGEST};events_body (/w/service/server/store.py:1) 3\n"
        "not a sample line\n"
    )
    assert layers_of(raw) == {"engine": 7, "event log (encode)": 3}
    assert layers_of(tmp_path / "missing.txt") == {}
