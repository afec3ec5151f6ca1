"""The EngineHost and its store without HTTP: replay rebuilds the same engine state from
a trimmed log, including registrations that a live query's ``@name`` still needs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ecq.event import Event
from service.server.blocks import Block
from service.server.errors import ConflictError
from service.server.host import EngineHost
from service.server.metrics import Metrics
from service.server.store import Store


def run_host(data: Path, script: Any, trim_every: int = 1) -> Any:
    """Run ``await script(host)`` on a fresh host over ``data``; returns its result and
    what the host published."""
    published: list[Block] = []

    async def main() -> Any:
        store = Store(data)
        host = EngineHost(store, Metrics(), published.extend, trim_every=trim_every)
        host.start()
        await host.wait_ready()
        try:
            return await script(host)
        finally:
            await asyncio.to_thread(host.stop)
            store.close()

    return asyncio.run(main()), published


def ev(src: int, type: str, t: float) -> Event:
    return Event(src, type, t, id=f"{type}{t:g}")


def test_a_trimmed_log_keeps_what_a_live_query_reads_through_at_name(tmp_path: Path) -> None:
    async def before(host: EngineHost) -> int:
        await host.register([("ab", {"text": "SEQ(A, B) WITHIN 5 s"})])
        await host.register([("reads", {"text": "SEQ(@ab, C) WITHIN 10 s"})])
        with pytest.raises(ConflictError, match="'reads'"):  # read as @ab: not deleted
            await host.unregister("ab")
        for k in range(30):
            await host.ingest("p", str(k), [ev(1, "X", 10.0 * k)])
        await host.ingest("p", "a", [ev(1, "A", 400), ev(1, "B", 401)])
        return host.store.op_count()

    ops, _ = run_host(tmp_path, before)
    assert ops < 35  # old batches went

    async def after(host: EngineHost) -> list[str]:
        await host.ingest("p", "c", [ev(1, "C", 402)])
        return [q.name for q in host.queries()]

    names, published = run_host(tmp_path, after)
    assert names == ["ab", "reads"]
    assert [query for block in published for query in block.queries] == [
        "reads"
    ]  # the @ab match of before the restart


def test_replay_emits_nothing_and_seq_continues(tmp_path: Path) -> None:
    async def first(host: EngineHost) -> int:
        await host.register([("ab", {"text": "SEQ(A, B) WITHIN 5 s MODE ALL"})])
        await host.ingest("p", "1", [ev(1, "A", 1), ev(1, "B", 2), ev(1, "B", 3)])
        return host.next_seq

    seq, published = run_host(tmp_path, first, trim_every=1000)
    assert seq == 2 and [block.first + i for block in published for i in range(len(block))] == [0, 1]

    async def second(host: EngineHost) -> tuple[int, bool]:
        duplicate = (await host.ingest("p", "1", [ev(1, "A", 1)])).duplicate
        await host.ingest("p", "2", [ev(1, "B", 4)])
        return host.next_seq, duplicate

    (seq, duplicate), published = run_host(tmp_path, second, trim_every=1000)
    assert duplicate and seq == 3
    # nothing re-emitted by the replay
    assert [block.first + i for block in published for i in range(len(block))] == [2]


def test_engine_stats_are_walked_when_asked_not_after_every_operation(tmp_path: Path) -> None:
    """Nobody asking, no walk of the network (it cost ~25 ms with a thousand queries);
    an ask gets figures that include every operation before it."""

    async def script(host: EngineHost) -> tuple[int, int, int, int]:
        await host.register([("ab", {"text": "SEQ(A, B) WITHIN 5 s"})])
        walked = host.stats_snapshot()["next_seq"]
        for k in range(3):
            await host.ingest("p", str(k), [ev(1, "A", 10.0 * k), ev(1, "B", 10.0 * k + 1)])
        stale = host.stats_snapshot()["next_seq"]
        asked = await asyncio.gather(host.stats(), host.stats())  # two askers share one walk
        return walked, stale, asked[0]["next_seq"], asked[1]["next_seq"]

    (walked, stale, fresh, again), _ = run_host(tmp_path, script)
    assert (walked, stale, fresh, again) == (0, 0, 3, 3)


def test_a_bulk_registration_compiles_with_the_collector_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compiling a batch allocates objects that stay alive: no cyclic collection walks
    them while the queries compile (each would walk every query compiled so far), and
    the collector is on again after, or still off when the caller had it off."""
    import gc

    from service.server import host

    entries = [
        (f"q{i}", {"text": f"SEQ(A a, B b) WHERE a.x > {i} AND b.y < {i + 0.5} WITHIN 5 s"})
        for i in range(400)
    ]
    collections: list[int] = []
    during: list[int] = []
    compile_one = host._compile

    def compiling(name: str, spec: dict[str, Any]) -> Any:
        before = len(collections)
        try:
            return compile_one(name, spec)
        finally:
            during.append(len(collections) - before)

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    monkeypatch.setattr(host, "_compile", compiling)
    gc.callbacks.append(note)
    try:
        assert len(host.prepare(entries)) == 400
        assert gc.isenabled()
        assert len(during) == 400
        assert sum(during) == 0
        gc.disable()
        try:
            host.prepare(entries[:3])
            assert not gc.isenabled()
        finally:
            gc.enable()
    finally:
        gc.callbacks.remove(note)


@pytest.mark.parametrize(("shard", "refused"), [("", False), ("0/2", True)])
def test_a_batch_routed_as_for_the_only_shard(tmp_path: Path, shard: str, refused: bool) -> None:
    """A job of one URL that had no answer to its routing ask yet marks its batch
    ONLY_SHARD: a lone service takes it; a shard of a slot map of several refuses it
    (409, nothing applied), so no event lands where it is not owned."""
    from api.routing import ONLY_SHARD
    from service.server.sharding import ShardSlots

    async def script(host: EngineHost) -> Any:
        host.slots = ShardSlots.open(tmp_path / "slots", shard, "")
        try:
            await host.ingest("p", "b0", [ev(1, "A", 1.0)], epoch=ONLY_SHARD)
        except ConflictError as err:
            return str(err)
        return None

    got, _ = run_host(tmp_path / "data", script)
    if refused:
        assert got is not None and "only shard" in got
    else:
        assert got is None


def test_a_rebuild_reads_the_head_with_the_collector_paused_then_freezes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head's queries (read from the snapshot, or compiled) all stay: no cyclic
    collection walks them while the head is rebuilt, and they leave the collector's
    generations before the window is replayed (gc.freeze); a rebuild unfreezes the
    engine it replaces first. Both on the start that writes the snapshot and the one
    that reads it."""
    import gc

    store = Store(tmp_path)
    store.commit_register(
        [(f"q{i}", {"text": f"SEQ(A a, B b) WHERE a.x > {i} WITHIN 5 s"}) for i in range(300)]
    )
    store.close()
    collections: list[int] = []
    seen: list[tuple[int, int, bool]] = []

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(note)
    try:
        for _ in range(2):
            store = Store(tmp_path)
            host = EngineHost(store, Metrics(), lambda blocks: None)
            from_snapshot = host._from_snapshot

            def reading(head: Any, host: EngineHost = host, read: Any = from_snapshot) -> Any:
                before = len(collections)
                frozen = gc.get_freeze_count()
                out = read(head)
                seen.append((frozen, len(collections) - before, out[0] is not None))
                return out

            monkeypatch.setattr(host, "_from_snapshot", reading)
            gc.freeze()  # what an engine frozen before looks like
            host._startup_job()
            assert host.state == "ok"
            assert gc.isenabled() and gc.get_freeze_count() > 0
            store.close()
        # Unfrozen when read, no collection while reading; the second start read the snapshot.
        assert seen == [(0, 0, False), (0, 0, True)]
    finally:
        gc.callbacks.remove(note)
        gc.unfreeze()


def test_a_held_delete_survives_trimming_and_a_restart(tmp_path: Path) -> None:
    """Trimming every batch while a delete is held (its registration stays in the log),
    then a restart before and after the stream reaches it."""

    async def before(host: EngineHost) -> list[tuple[str, float | None]]:
        await host.register([("ab", {"text": "SEQ(A, B) WITHIN 5 s"})])
        await host.register([("going", {"text": "SEQ(A, B) WITHIN 5 s"})])
        await host.unregister("going", at=500.0)
        for k in range(30):
            await host.ingest("p", str(k), [ev(1, "X", 10.0 * k)])
        return [(q.name, q.deleting_at) for q in host.queries()]

    listed, _ = run_host(tmp_path, before)
    assert listed == [("ab", None), ("going", 500.0)]

    async def reach(host: EngineHost) -> list[tuple[str, float | None]]:
        assert [(q.name, q.deleting_at) for q in host.queries()] == [("ab", None), ("going", 500.0)]
        # A, B before 500 match both; the delete falls inside the batch, before B at 500.
        await host.ingest("p", "a", [ev(1, "A", 497), ev(1, "B", 499), ev(1, "A", 499.5), ev(1, "B", 500)])
        for k in range(30):
            await host.ingest("p", f"x{k}", [ev(1, "X", 600.0 + 10.0 * k)])
        return [(q.name, q.deleting_at) for q in host.queries()]

    listed, published = run_host(tmp_path, reach)
    assert listed == [("ab", None)]
    assert sorted(query for block in published for query in block.queries) == ["ab", "ab", "going"]

    async def after(host: EngineHost) -> list[str]:
        return [q.name for q in host.queries()]

    names, _ = run_host(tmp_path, after)
    assert names == ["ab"]
