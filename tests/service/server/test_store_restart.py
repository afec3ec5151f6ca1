"""What the store keeps so that a restart need not redo work: the canonical texts of
the registered queries (by the build that printed them), the checksum of a row computed
the same however large the store, and the light read of the registered queries."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import zlib
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ecq.engine import Engine
from service.server import rowscan
from service.server import store as store_module
from service.server.faults import DamagedRows, UnusableStore
from service.server.store import STORE_FILE, Store, _text_crc, check, check_started, row_crc

Q1 = {"text": "SEQ(A, B) WITHIN 10 s"}
Q2 = {"text": "SEQ(B, C) WITHIN 5 s"}


def reference_crc(*values: Any) -> int:
    """The row checksum as the store has always defined it, value by value."""
    crc = 0
    for value in values:
        if value is None:
            crc = zlib.crc32(b"\x00", crc)
        elif isinstance(value, bytes):
            crc = zlib.crc32(value, crc)
        elif isinstance(value, str):
            crc = zlib.crc32(value.encode(), crc)
        else:
            crc = zlib.crc32(repr(value).encode(), crc)
        crc = zlib.crc32(b"\x1f", crc)
    return crc


values = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
    # Over the size joined in one call (built, not drawn: drawing 64 KiB is slow).
    st.binary(min_size=1, max_size=8).map(lambda b: b * (70_000 // len(b) + 1)),
)


@given(st.lists(values, max_size=8))
def test_row_checksum_is_the_stores_definition(row: list[Any]) -> None:
    assert row_crc(*row) == reference_crc(*row)


@given(values, values, values)
def test_a_kept_texts_checksum_is_the_stores_definition(pos: Any, version: Any, text: Any) -> None:
    assert _text_crc(pos, version, text) == reference_crc(pos, version, text)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "data")
    yield opened
    opened.close()


def test_texts_are_kept_with_their_registration_and_build(store: Store) -> None:
    store.commit_register([("a", Q1), ("b", Q2)], ["SEQ(A, B) WITHIN 10 s", "SEQ(B, C) WITHIN 5 s"], "v1")
    assert store.query_texts("v1") == {0: "SEQ(A, B) WITHIN 10 s", 1: "SEQ(B, C) WITHIN 5 s"}
    assert store.query_texts("v2") == {}  # another build prints them again
    assert store.query_counts() == [("a", 0, 0, None), ("b", 1, 0, None)]
    store.commit_unregister("a")
    assert store.query_texts("v1") == {1: "SEQ(B, C) WITHIN 5 s"}
    store.keep_texts([(1, "SEQ(B, C) WITHIN 5 s")], "v2")
    assert store.query_texts("v2") == {1: "SEQ(B, C) WITHIN 5 s"}


def test_a_registration_without_texts_never_takes_a_stale_one(store: Store) -> None:
    store.commit_register([("a", Q1)], ["SEQ(A, B) WITHIN 10 s"], "v1")
    # As if the op had been dropped since (its position free again) with its text left.
    with closing(sqlite3.connect(store.path)) as db:
        db.execute("DELETE FROM ops")
        db.execute("DELETE FROM queries")
        db.commit()
    store.commit_register([("b", Q2)])
    assert store.query_texts("v1") == {}


def test_a_damaged_kept_text_is_left_out_not_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = Store(data)
    store.commit_register([("a", Q1), ("b", Q2)], ["SEQ(A, B) WITHIN 10 s", "SEQ(B, C) WITHIN 5 s"], "v1")
    store.close()
    with closing(sqlite3.connect(data / "scemon.sqlite3")) as db:
        db.execute("UPDATE query_texts SET text = 'SEQ(A, X) WITHIN 10 s' WHERE pos = 0")
        db.commit()
    reopened = Store(data)  # a cache: its damage does not refuse the store
    try:
        assert reopened.query_texts("v1") == {1: "SEQ(B, C) WITHIN 5 s"}
    finally:
        reopened.close()


def test_a_rebuild_takes_the_kept_texts_and_keeps_those_it_printed(tmp_path: Path) -> None:
    import asyncio

    from service.server.host import EngineHost, canonical_text
    from service.server.metrics import Metrics
    from service.server.versions import language_version

    data = tmp_path / "data"
    spec = {"text": "PATTERN Sequence WITH A, B WHERE [src] WITHIN 10 s"}

    def start(check: Any) -> Any:
        async def main() -> Any:
            store = Store(data)
            host = EngineHost(store, Metrics(), lambda blocks: None)
            host.start()
            await host.wait_ready()
            try:
                return await check(host)
            finally:
                await asyncio.to_thread(host.stop)
                store.close()

        return asyncio.run(main())

    async def register(host: EngineHost) -> str:
        (info,) = await host.register([("q", spec)])
        return info.text

    text = start(register)
    assert text == canonical_text(Engine.compile("q", str(spec["text"]))) and text != spec["text"]
    with closing(sqlite3.connect(data / "scemon.sqlite3")) as db:
        assert db.execute("SELECT text, version FROM query_texts").fetchall() == [(text, language_version())]
        db.execute("DELETE FROM query_texts")  # as a store of an older build has them
        db.commit()

    async def texts(host: EngineHost) -> list[str]:
        return [info.text for info in host.queries()]

    assert start(texts) == [text]  # printed again
    with closing(sqlite3.connect(data / "scemon.sqlite3")) as db:
        assert db.execute("SELECT pos, text FROM query_texts").fetchall() == [(0, text)]  # and kept
        db.execute("UPDATE query_texts SET text = 'marker'")
        db.execute("UPDATE query_texts SET crc = ?", (row_crc(0, language_version(), "marker"),))
        db.commit()
    assert start(texts) == ["marker"]  # taken as kept: not printed


def _killed_store(tmp_path: Path) -> Path:
    """A store left as a kill leaves it: its last commit still in the write-ahead log
    (copied while the writer's connection is open, which keeps the log)."""
    live = tmp_path / "live"
    writer = Store(live)
    try:
        writer.commit_register([(f"q{i}", Q1 if i % 2 else Q2) for i in range(50)])
        killed = tmp_path / "killed"
        killed.mkdir()
        for part in live.iterdir():
            if part.name.startswith(STORE_FILE):
                shutil.copyfile(part, killed / part.name)
    finally:
        writer.close()
    assert (killed / f"{STORE_FILE}-wal").stat().st_size > 0
    return killed / STORE_FILE


def test_a_store_checked_at_start_is_not_scanned_again_when_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _killed_store(tmp_path)
    scans: list[int] = []
    real_scan = store_module.scan

    def counted(*args: Any, **kwargs: Any) -> Any:
        scans.append(1)
        return real_scan(*args, **kwargs)

    monkeypatch.setattr(store_module, "scan", counted)
    check(path, init=False)
    assert len(scans) == 1
    # Closing the check's connection moved the log into the file: what the server then
    # opens is the store the check read, so it is not read a second time.
    opened = Store(path.parent)
    try:
        assert len(scans) == 1
        assert [name for name, *_ in opened.query_counts()] == [f"q{i}" for i in range(50)]
    finally:
        opened.close()


def test_a_store_changed_after_its_check_is_checked_again(tmp_path: Path) -> None:
    path = _killed_store(tmp_path)
    check(path, init=False)
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        # A digit of a stored query changed behind the store's back: its checksum fails.
        db.execute("UPDATE queries SET pos = pos + 1 WHERE name = 'q3'")
    with pytest.raises(UnusableStore, match="fails? their checksum|failing their checksum"):
        check(path, init=False)


def _damage_an_op(path: Path) -> None:
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("UPDATE ops SET name = 'other' WHERE pos = 2")


def test_the_op_log_read_at_start_is_checked_again_by_any_later_read(tmp_path: Path) -> None:
    """The start's check vouches for the rows once: the first read of the op log takes
    them as checked, a later one (a rebuild while serving) checks every row again."""
    path = _killed_store(tmp_path)
    opened = Store(path.parent)
    try:
        assert len(list(opened.ops())) == 50
        _damage_an_op(path)
        with pytest.raises(DamagedRows, match="logged operation 2"):
            list(opened.ops())
    finally:
        opened.close()


def test_a_write_after_the_check_makes_the_op_log_checked_again(tmp_path: Path) -> None:
    path = _killed_store(tmp_path)
    opened = Store(path.parent)
    try:
        _damage_an_op(path)
        opened.commit_register([("late", Q1)])
        with pytest.raises(DamagedRows, match="logged operation 2"):
            list(opened.ops())
    finally:
        opened.close()


def test_a_store_opened_without_the_check_checks_the_op_log(tmp_path: Path) -> None:
    path = _killed_store(tmp_path)
    check(path, init=False)
    _damage_an_op(path)  # after the check: the file is not the one it read
    store_module._checked.pop(path, None)  # as a store opened by another process
    with pytest.raises(UnusableStore):
        Store(path.parent)


def test_the_rows_checked_by_a_child_process_give_the_same_verdict(tmp_path: Path) -> None:
    """``scemon serve`` leaves the scan of every row to a child process while it imports
    the server: the structure is checked at once, the rows' verdict when asked for."""
    path = _killed_store(tmp_path)
    verdict = check_started(path, init=False)
    assert verdict() is True
    opened = Store(path.parent)  # the verdict vouches for the file: not scanned again
    try:
        assert opened._rows_checked
    finally:
        opened.close()
    store_module._checked.pop(path, None)
    _damage_an_op(path)
    verdict = check_started(path, init=False)  # the structure is sound: no error yet
    with pytest.raises(UnusableStore, match="logged operation 2"):
        verdict()
    assert path not in store_module._checked


def test_a_child_that_gives_no_verdict_leaves_the_rows_to_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _killed_store(tmp_path)
    _damage_an_op(path)

    def dying(_path: Path) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.exit(9)"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

    monkeypatch.setattr(store_module, "_start_scan", dying)
    verdict = check_started(path, init=False)
    with pytest.raises(UnusableStore, match="logged operation 2"):
        verdict()


def test_the_row_scan_command_names_the_damaged_rows(tmp_path: Path) -> None:
    path = _killed_store(tmp_path)
    _damage_an_op(path)
    done = subprocess.run(
        [sys.executable, "-m", "service.server.rowscan", str(path)], capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert [where for _table, where, _seqs in orjson.loads(done.stdout)] == ["logged operation 2"]
    path.write_bytes(b"not a database at all" * 100)
    done = subprocess.run(
        [sys.executable, "-m", "service.server.rowscan", str(path)], capture_output=True, check=False
    )
    assert done.returncode == rowscan.UNREADABLE and b"is damaged" in done.stderr
