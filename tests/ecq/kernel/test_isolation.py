"""A kernel keeps no state outside its object: engines interleaved in one process, or
running in threads, give exactly what each gives alone, on either kernel; and a query's
bit, freed when it leaves, is reused by a later query without anything of the first
one leaking into it."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from ecq.engine import Engine
from ecq.evaluation.workload import Workload, events, sequence_queries
from ecq.event import Event
from ecq.kernel.select import status

KERNELS = [
    pytest.param(
        None, id="compiled", marks=pytest.mark.skipif(not status().compiled, reason=f"{status().reason}")
    ),
    pytest.param(False, id="pure"),
]


def _setup(seed: int) -> tuple[list[tuple[str, str]], list[Event]]:
    w = Workload(n_queries=150, n_classes=12, n_sources=20, source_gap=120.0, seed=seed)
    extra = [
        ("flt", "PATTERN SEQ(C01 a, C02 b) WHERE a.start > 100 WITHIN 1 hour"),
        ("all", "PATTERN SEQ(C03 a, C04 b, C05 c) MODE ALL WITHIN 1 hour"),
        ("neg", "PATTERN SEQ(C06 a, C07 b, !C08 c) WITHIN 30 mins"),
    ]
    return sequence_queries(w) + extra, list(events(w, 3000))


def _engine(queries: list[tuple[str, str]], compiled: bool | None) -> Engine:
    eng = Engine(clean_every=250, compiled=compiled)
    for name, text in queries:
        eng.register(name, text)
    return eng


def _copy(stream: list[Event]) -> list[Event]:
    return [Event(e.src, e.type, e.start, e.end, id=e.id) for e in stream]


def _run(eng: Engine, stream: list[Event], chunk: int) -> list[tuple[Any, ...]]:
    out = []
    for at in range(0, len(stream), chunk):
        out += [(m.query, m.seq, m.prob, tuple(m.arrivals())) for m in eng.process(stream[at : at + chunk])]
    out += [(m.query, m.seq, m.prob, tuple(m.arrivals())) for m in eng.advance_time(float("inf"))]
    return out


@pytest.mark.parametrize("compiled", KERNELS)
def test_two_engines_interleaved_give_what_each_gives_alone(compiled: bool | None) -> None:
    (qa, sa), (qb, sb) = _setup(1), _setup(2)
    alone = [_run(_engine(qa, compiled), _copy(sa), 100), _run(_engine(qb, compiled), _copy(sb), 100)]
    a, b = _engine(qa, compiled), _engine(qb, compiled)
    sa, sb = _copy(sa), _copy(sb)
    got: list[list[tuple[Any, ...]]] = [[], []]
    # Chunks of 7 events, each engine's in turn: their scratch memory would mix here.
    for at in range(0, len(sa), 7):
        for i, (eng, stream) in enumerate(((a, sa), (b, sb))):
            got[i] += [
                (m.query, m.seq, m.prob, tuple(m.arrivals())) for m in eng.process(stream[at : at + 7])
            ]
    for i, eng in enumerate((a, b)):
        got[i] += [(m.query, m.seq, m.prob, tuple(m.arrivals())) for m in eng.advance_time(float("inf"))]
    assert got == alone
    assert len(alone[0]) > 100 and len(alone[1]) > 100 and alone[0] != alone[1]
    assert {q for q, *_ in alone[0]} >= {"flt", "all"}


@pytest.mark.parametrize("compiled", KERNELS)
def test_engines_in_threads_give_what_each_gives_alone(compiled: bool | None) -> None:
    setups = [_setup(seed) for seed in (3, 4, 5)]
    alone = [_run(_engine(q, compiled), _copy(s), 5) for q, s in setups]
    engines = [_engine(q, compiled) for q, _ in setups]
    streams = [_copy(s) for _, s in setups]
    got: list[list[tuple[Any, ...]]] = [[] for _ in setups]
    errors: list[BaseException] = []
    start = threading.Barrier(len(setups))

    def work(i: int) -> None:
        try:
            start.wait()
            # Small chunks: the interpreter switches threads between (and inside) them.
            got[i] = _run(engines[i], streams[i], 5)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(setups))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert got == alone and all(len(x) > 100 for x in alone)


@pytest.mark.parametrize("compiled", KERNELS)
def test_a_freed_bit_is_reused_with_nothing_of_its_old_query(compiled: bool | None) -> None:
    eng = Engine(clean_every=1, compiled=compiled)
    eng.register("old", "PATTERN SEQ(A a, B b, C c) WITHIN 100 secs")
    eng.register("keep", "PATTERN SEQ(D d, E e) WITHIN 100 secs")
    bit = eng.query_state("old").bitno
    got = eng.process([Event("s", "A", 1.0), Event("s", "B", 2.0), Event("s", "D", 3.0)])
    eng.unregister("old")
    # Until every instance that may carry the bit is dropped, it is not reused.
    eng.register("early", "PATTERN SEQ(A a, C c) WITHIN 100 secs")
    assert eng.query_state("early").bitno != bit
    got += eng.process([Event("s", "E", 500.0), Event("s", "D", 600.0)])
    eng.register("new", "PATTERN SEQ(B b, C c) WITHIN 100 secs")
    assert eng.query_state("new").bitno == bit
    # The old query's partial match (A, B) must not complete the new one's.
    got += eng.process([Event("s", "C", 601.0), Event("s", "B", 602.0), Event("s", "C", 603.0)])
    assert [(m.query, m.arrivals()) for m in got] == [("new", [6, 7])]
    eng._check()
