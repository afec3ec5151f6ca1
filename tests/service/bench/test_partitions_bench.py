"""The partitions figure's one-deployment-per-key comparison runs what the keyed engine
runs: the same matches from the same events."""

from __future__ import annotations

from collections import Counter

from ecq.engine import Engine
from ecq.evaluation.workload import Workload
from service.bench.partitions import _PerKeyEngines, _queries, _stream
from service.bench.runner import fresh


def _found(matches: list) -> Counter[tuple[str, tuple[str, ...]]]:
    return Counter((m.query, tuple(str(e.id) for e in m.events)) for m in matches)


def test_one_engine_per_key_gives_the_keyed_engines_matches() -> None:
    w = Workload(n_queries=40, n_sources=30, n_classes=6, seed=3)
    stream = _stream(w, 1500)
    for keys in (2, 4):
        keyed = Engine()
        for name, text in _queries(w, keys):
            keyed.register(name, text)
        apart = _PerKeyEngines(w, keys, stream)
        assert len(apart.engines) == keys
        got_keyed: list = []
        got_apart: list = []
        for at in range(0, len(stream), 500):
            batch = stream[at : at + 500]
            got_keyed += keyed.process(fresh(batch))
            got_apart += apart.process(fresh(batch))
        assert len(got_keyed) > 50
        assert _found(got_apart) == _found(got_keyed)
