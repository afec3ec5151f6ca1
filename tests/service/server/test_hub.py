"""The subscription hub in process: each subscriber gets the matches of its queries in
``seq`` order, a slow one is cut off at its bound without slowing the others; a
subscriber of every query takes a block whole and sends its frames, cut once for all."""

from __future__ import annotations

import orjson
import pytest

from service.server.blocks import Block, Run, frames_of
from service.server.hub import Hub

BLOCK = Block.of(0, ["q1", "q2", "q1"], ['{"m":0}', '{"m":1}', '{"m":2}'])


def pairs(runs: list[Run]) -> list[tuple[int, str]]:
    return [pair for run in runs for pair in zip(run.seqs(), run.texts(), strict=True)]


def block(first: int, queries: list[str]) -> Block:
    texts = [orjson.dumps({"query": q, "seq": first + i}).decode() for i, q in enumerate(queries)]
    return Block.of(first, queries, texts)


def test_a_subscriber_gets_its_queries_matches_in_seq_order() -> None:
    hub = Hub(limit=10)
    only_q1 = hub.subscribe(frozenset({"q1"}))
    every = hub.subscribe(None)
    hub.publish([BLOCK])
    assert pairs(only_q1.take()) == [(0, '{"m":0}'), (2, '{"m":2}')]
    assert pairs(every.take()) == [(0, '{"m":0}'), (1, '{"m":1}'), (2, '{"m":2}')]


def test_taking_empties_the_buffer_and_clears_the_wake_up() -> None:
    hub = Hub(limit=10)
    sub = hub.subscribe(None)
    assert not sub.wake.is_set()
    hub.publish([block(0, ["q1"])])
    assert sub.wake.is_set() and sub.count == 1
    assert [run.seqs() for run in sub.take()] == [[0]]
    assert not sub.wake.is_set() and sub.take() == [] and sub.count == 0


def test_matches_of_other_queries_do_not_wake_a_subscriber() -> None:
    hub = Hub(limit=10)
    sub = hub.subscribe(frozenset({"q3"}))
    hub.publish([BLOCK])
    assert not sub.wake.is_set() and sub.take() == []


def test_an_empty_buffer_takes_a_batch_larger_than_the_bound() -> None:
    """A subscriber that keeps up is never cut off by one big batch."""
    hub = Hub(limit=2)
    sub = hub.subscribe(None)
    hub.publish([BLOCK])
    assert sum(len(run) for run in sub.take()) == 3
    assert hub.overflows == 0 and len(hub) == 1


def test_a_subscriber_that_falls_behind_is_cut_off_and_the_others_go_on() -> None:
    hub = Hub(limit=2)
    slow = hub.subscribe(None)
    fast = hub.subscribe(None)
    hub.publish([block(0, ["q1"])])
    fast.take()
    hub.publish([block(1, ["q2", "q1"])])  # slow holds 1, would hold 3 > 2
    assert slow.overflowed and slow.wake.is_set() and slow.take() == []
    assert hub.overflows == 1 and hub.subscribers == {fast}
    assert [run.seqs() for run in fast.take()] == [[1, 2]]
    # Once cut off, it takes nothing more: the client resumes by seq from the log.
    assert not slow.offer([BLOCK])
    assert slow.take() == []


def test_unsubscribe_and_close() -> None:
    hub = Hub(limit=10)
    gone = hub.subscribe(None)
    staying = hub.subscribe(None)
    hub.unsubscribe(gone)
    hub.unsubscribe(gone)  # twice is harmless
    hub.publish([BLOCK])
    assert gone.take() == [] and sum(len(run) for run in staying.take()) == 3
    hub.close()
    assert hub.closing and staying.wake.is_set() and len(hub) == 1


def test_a_whole_block_is_framed_once_for_every_subscriber() -> None:
    """Subscribers of every query send the same frame objects: cut once per block and
    frame size; a block that fits one frame is its own text, no copy."""
    hub = Hub(limit=100)
    subs = [hub.subscribe(None) for _ in range(3)]
    big = block(0, ["q1", "q2"] * 5)
    hub.publish([big])
    framed = [frames_of(sub.take(), 4) for sub in subs]
    assert all(f is g for f, g in zip(framed[0], framed[1], strict=True))
    assert [(last, n) for last, _, n in framed[0]] == [(3, 4), (7, 4), (9, 2)]
    assert [m["seq"] for _, text, _ in framed[0] for m in orjson.loads(text)] == list(range(10))
    [(last, text, n)] = frames_of([Run(big, range(10))], 10)
    assert text is big.text and (last, n) == (9, 10)


@pytest.mark.parametrize("batch", [1, 2, 3, 7, 100])
def test_frames_hold_every_match_once_in_seq_order_whatever_the_runs(batch: int) -> None:
    """Whole blocks, a block resumed mid-way, a filtered run and small neighbours
    joined into one message: every match once, in order, at most ``batch`` a message,
    each message valid JSON whose last seq is the frame's."""
    first = block(0, ["a", "b", "a", "c", "a"])
    second = block(5, ["b"])
    third = block(6, ["a", "a", "b"])
    runs = [
        Run(first, range(5)).after(1),
        Run(second, range(1)),
        Run(third, third.of_queries(frozenset({"a"}))),
    ]
    frames = frames_of([r for r in runs if r is not None], batch)
    seqs: list[int] = []
    for last, text, n in frames:
        got = orjson.loads(text)
        got = [got] if batch == 1 else got
        assert len(got) == n <= batch and got[-1]["seq"] == last
        seqs += [m["seq"] for m in got]
    assert seqs == [2, 3, 4, 5, 6, 7]
    if batch >= 6:
        assert len(frames) == 1  # small neighbours share a message


def test_a_filtered_subscriber_takes_the_merge_of_its_queries() -> None:
    b = block(10, ["a", "b", "c", "a", "b"])
    assert b.of_queries(frozenset({"a", "b"})) == [0, 1, 3, 4]
    assert b.of_queries(frozenset({"c"})) == [2] and b.of_queries(frozenset({"x"})) == []
    assert Run(b, [0, 1, 3, 4]).after(11) == Run(b, [3, 4]) and Run(b, [0, 1]).after(11) is None
    assert Run(b, [0, 3]).inside() == b.match(0) + "," + b.match(3)


def test_a_block_of_non_ascii_matches_has_character_offsets() -> None:
    """With a non-ASCII match the offsets are characters, and every match reads back as
    it was written."""
    texts = [
        orjson.dumps({"seq": i, "attrs": {"city": city}}).decode()
        for i, city in enumerate(["Kyiv", "Zürich", "東京"])
    ]
    made = Block.of(4, ["q", "q", "q"], texts)
    assert [made.match(i) for i in range(3)] == texts
    assert orjson.loads(made.text) == [orjson.loads(t) for t in texts]


def test_a_filtered_subscriber_keeps_only_its_matches_text_not_the_blocks() -> None:
    """Bounded memory: a subscriber of one query that does not read holds the text of
    its own matches, however large the blocks they came in."""
    hub = Hub(limit=1000)
    sub = hub.subscribe(frozenset({"rare"}))
    big = [block(100 * k, ["rare"] + ["common"] * 99) for k in range(5)]
    hub.publish(big)
    held = sub.take()
    assert [seq for run in held for seq in run.seqs()] == [0, 100, 200, 300, 400]
    assert all(run.block not in big and len(run.block.text) < len(big[0].text) // 50 for run in held)
    [(last, text, n)] = frames_of(held, 10)
    assert (last, n) == (400, 5) and [m["seq"] for m in orjson.loads(text)] == [0, 100, 200, 300, 400]
    every = hub.subscribe(frozenset({"rare", "common"}))  # all of a block: the block itself
    hub.publish([big[0]])
    assert [run.block for run in every.take()] == [big[0]]
