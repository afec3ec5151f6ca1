"""``scemon bench builds``: builds of the engine side by side, each in a process of its
own over the same workload. Behaviour only (no timing thresholds)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from ecq.evaluation.workload import Workload
from service.bench.builds import Build, compare, parse_build, replay_compare, workload_spec

ROOT = Path(__file__).resolve().parents[3]


def test_builds_are_measured_over_the_same_workload_in_their_own_processes(tmp_path: Path) -> None:
    here = Build("a", sys.executable, ROOT)
    again = Build("b", sys.executable, ROOT)
    fractions: list[float] = []
    table = compare(
        [here, again],
        Workload(n_queries=60, n_sources=20),
        (10, 60),
        events=900,
        warmup=300,
        clean_every=250,
        chunk=200,
        progress=lambda done, _what: fractions.append(done),
    )
    rows: list[dict[str, Any]] = [dict(zip(table.columns, row, strict=True)) for row in table.rows]
    assert [(r["build"], r["queries"]) for r in rows] == [("a", 10), ("a", 60), ("b", 10), ("b", 60)]
    assert all(r["shared_us"] > 0 and r["events_per_s"] > 0 and r["cpu_us"] > 0 for r in rows)
    assert [r["vs_first"] for r in rows[:2]] == [r["cpu_vs_first"] for r in rows[:2]] == [1.0, 1.0]
    # The same engine on the same events: the same matches in both processes.
    assert [r["matches_per_event"] for r in rows[:2]] == [r["matches_per_event"] for r in rows[2:]]
    assert rows[1]["matches_per_event"] > 0
    assert fractions and fractions[-1] == 1.0 and fractions == sorted(fractions)


def test_a_build_is_named_an_interpreter_and_a_checkout(tmp_path: Path) -> None:
    assert parse_build("new=python3", ROOT) == Build("new", "python3", ROOT)
    venv = parse_build("old=.venv/bin/python@" + str(tmp_path), ROOT)
    assert venv.checkout == tmp_path.resolve() and Path(venv.python).is_absolute()
    for bad in ("python3", "=python3", "new="):
        with pytest.raises(ValueError, match="NAME=PYTHON"):
            parse_build(bad, ROOT)


def test_a_build_that_runs_another_checkouts_engine_is_refused(tmp_path: Path) -> None:
    # A checkout without an engine of its own: its worker imports this one's.
    (tmp_path / "README").write_text("not a checkout\n")
    with pytest.raises(RuntimeError, match="not its checkout's engine"):
        compare(
            [Build("a", sys.executable, ROOT), Build("elsewhere", sys.executable, tmp_path)],
            Workload(n_queries=10, n_sources=5),
            (10,),
            events=100,
            warmup=100,
            clean_every=100,
        )


def test_scemon_replay_is_timed_end_to_end_in_each_build() -> None:
    builds = [Build("a", sys.executable, ROOT), Build("b", sys.executable, ROOT)]
    table = replay_compare(builds, Workload(n_queries=40, n_sources=20), 800, rounds=2)
    rows: list[dict[str, Any]] = [dict(zip(table.columns, row, strict=True)) for row in table.rows]
    assert [r["build"] for r in rows] == ["a", "b"]
    assert rows[0]["vs_first"] == rows[0]["cpu_vs_first"] == 1.0
    assert all(r["events_per_s"] > 0 and r["cpu_s"] > 0 for r in rows)
    # The same command on the same files: the same matches, and some.
    assert rows[0]["matches"] == rows[1]["matches"] > 0


def test_a_replay_of_another_checkouts_engine_is_refused(tmp_path: Path) -> None:
    (tmp_path / "README").write_text("not a checkout\n")
    with pytest.raises(RuntimeError, match="build elsewhere runs .*not its checkout's engine"):
        replay_compare(
            [Build("a", sys.executable, ROOT), Build("elsewhere", sys.executable, tmp_path)],
            Workload(n_queries=10, n_sources=5),
            200,
            rounds=1,
        )


def test_workers_are_told_only_the_workload_fields_off_their_defaults() -> None:
    # An older checkout's Workload lacks fields added since (7ae3988's has no n_attrs):
    # it must not be sent them while they keep their defaults.
    assert workload_spec(Workload()) == {}
    assert workload_spec(Workload(n_queries=60, n_sources=20)) == {"n_queries": 60, "n_sources": 20}
    assert Workload(**workload_spec(Workload(n_attrs=2, seed=7))) == Workload(n_attrs=2, seed=7)
