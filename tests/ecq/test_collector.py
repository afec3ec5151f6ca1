"""ecq.collector: the collector paused around a block, what the block made moved to the
oldest generation after (so that no young collection walks it), nothing moved while
some objects are frozen."""

from __future__ import annotations

import gc

import pytest

from ecq import collector
from ecq.collector import collector_paused


class _Node:
    def __init__(self) -> None:
        self.next: _Node | None = None


def _young_ids() -> set[int]:
    return {id(o) for o in gc.get_objects(generation=0)} | {id(o) for o in gc.get_objects(generation=1)}


def test_what_the_block_made_is_in_the_oldest_generation_after() -> None:
    # What an earlier test in this process left frozen (a service's start freezes its
    # engine) would keep the block's objects where they are: thawed first.
    collector.unfreeze()
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        made = [_Node() for _ in range(1000)]
    assert gc.isenabled()
    young = _young_ids()
    assert not any(id(x) in young for x in made)
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(x) in oldest for x in made)


def test_a_garbage_cycle_made_in_the_block_is_still_collected() -> None:
    with collector_paused():
        a, b = _Node(), _Node()
        a.next, b.next = b, a
        import weakref

        gone = weakref.ref(a)
        del a, b
    assert gone() is not None
    gc.collect()
    assert gone() is None


def test_a_caller_that_had_it_off_keeps_it_off_and_nothing_moves() -> None:
    gc.disable()
    try:
        with collector_paused():
            made = _Node()
        assert not gc.isenabled()
        assert id(made) in {id(o) for o in gc.get_objects(generation=0)}
    finally:
        gc.enable()


def test_nothing_is_moved_while_objects_are_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with collector_paused():
            made = _Node()
        assert gc.isenabled()
        assert gc.get_freeze_count() == frozen
        assert id(made) in _young_ids()
    finally:
        gc.unfreeze()


def test_full_collections_held_keeps_the_young_ones_and_restores_the_thresholds() -> None:
    """Within the block no full collection runs, however many young ones do; a garbage
    cycle is still freed by a young collection; the thresholds are as they were after."""
    import weakref

    from ecq.collector import full_collections_held

    # Python's default thresholds and the collector on, whatever an earlier test left.
    saved, was_enabled = gc.get_threshold(), gc.isenabled()
    gc.set_threshold(700, 10, 10)
    gc.enable()
    before = gc.get_threshold()
    counts = [0, 0, 0]

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            counts[info["generation"]] += 1

    gc.callbacks.append(count)
    try:
        with full_collections_held():
            assert gc.get_threshold()[:2] == before[:2] and gc.get_threshold()[2] > 1_000_000
            node = _Node()
            node.next = node
            gone = weakref.ref(node)
            del node
            kept = [[_Node()] for _ in range(200_000)]  # many young collections, some middle ones
            assert gone() is None  # the cycle went with a young collection
            held = counts.copy()
        assert gc.get_threshold() == before
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*saved)
        if not was_enabled:
            gc.disable()
    assert held[0] > 100 and held[1] > 10 and held[2] == 0
    del kept


def test_objects_frozen_through_freeze_are_not_counted_at_each_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """A service's start freezes its engine's millions of objects; counting them at the
    end of every paused block (each registration) cost a tenth of a second each."""
    collector.freeze()
    try:
        frozen = gc.get_freeze_count()
        counted: list[int] = []
        real = gc.get_freeze_count

        def counting() -> int:
            counted.append(1)
            return real()

        monkeypatch.setattr(gc, "get_freeze_count", counting)
        with collector_paused():
            made = _Node()
        assert not counted
        assert real() == frozen and id(made) in _young_ids()
    finally:
        collector.unfreeze()
    with collector_paused():  # thawed: what a block makes moves again
        made = _Node()
    assert id(made) not in _young_ids()


@pytest.mark.parametrize("many", [False, True])
def test_registering_runs_no_collection_and_leaves_the_query_old(many: bool) -> None:
    # Engine.register pauses the collector as Engine.register_many does: a query makes
    # hundreds of objects, so with a young threshold of 100 every registration would
    # start a collection otherwise.
    from ecq.engine import Engine

    collector.unfreeze()
    engine = Engine()
    texts = [(f"q{i}", f"PATTERN SEQ(A{i} a, B b) WHERE a.v > {i} WITHIN 10 s") for i in range(20)]
    runs: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            runs.append(info["generation"])

    thresholds = gc.get_threshold()
    gc.collect()  # the young generation's count back to 0
    gc.callbacks.append(count)
    gc.set_threshold(100, 10, 10)
    try:
        if many:
            compiled = engine.register_many(texts)
        else:
            compiled = [engine.register(name, text) for name, text in texts]
    finally:
        gc.set_threshold(*thresholds)
        gc.callbacks.remove(count)
    assert runs == []
    assert gc.isenabled()
    young = _young_ids()
    assert not any(id(cq) in young or id(cq.comps) in young for cq in compiled)
