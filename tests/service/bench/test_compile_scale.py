"""``scemon bench compile``'s registration at scale (service/bench/compile_time.py):
what it measures and the table it makes (behaviour only, never timings)."""

from __future__ import annotations

import pytest

from service.bench import compile_time
from service.bench.compile_time import SCALE_WORKLOADS, measure_scale, run_scale, scale_queries


@pytest.mark.parametrize("workload", SCALE_WORKLOADS)
def test_each_workload_gives_as_many_distinct_queries_as_asked(workload: str) -> None:
    queries = scale_queries(workload, 40)
    assert len(queries) == 40
    assert len({name for name, _ in queries}) == 40


def test_an_unknown_workload_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown workload"):
        scale_queries("nope", 10)


def test_a_point_registers_every_query_and_times_each_phase() -> None:
    got = measure_scale("card", 30)
    assert set(got) == {"compile", "install", "rss", "tree"}
    assert all(v >= 0 for v in got.values())


def test_the_table_has_a_row_per_workload_and_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compile_time, "QUICK_SCALE_SIZES", (20, 40))
    table = run_scale(quick=True)
    assert table.name == "compile_scale"
    rows = table.records()
    assert [(r["workload"], r["queries"]) for r in rows] == [
        (w, n) for w in SCALE_WORKLOADS for n in (20, 40)
    ]
    for r in rows:
        assert r["total_qps"] == "" or float(r["total_qps"]) > 0
        assert float(r["kb_per_query"]) >= 0


def test_a_point_below_100000_queries_keeps_the_run_of_median_total(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each run's phases: the median of the totals (3.0) is the third run's, whatever
    # its order among them; one phase alone would pick another run.
    runs = iter(
        [
            {"compile": 1.0, "install": 1.0, "rss": 1.0, "tree": 0.0},
            {"compile": 0.5, "install": 4.5, "rss": 2.0, "tree": 0.0},
            {"compile": 2.0, "install": 1.0, "rss": 3.0, "tree": 0.0},
            {"compile": 0.1, "install": 0.1, "rss": 4.0, "tree": 0.0},
            {"compile": 3.5, "install": 0.5, "rss": 5.0, "tree": 0.0},
        ]
    )
    monkeypatch.setattr(compile_time, "measure_scale_fresh", lambda workload, n: next(runs))
    assert compile_time._median_run("card", 1000, 5)["rss"] == 3.0
