"""The engine against the naive reference (tests/reference.py) on random query sets and
streams: every operator, both modes, conditions, windows, equal timestamps, interval
events, several sources, registration and unregistration mid-stream."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ecq.engine import Engine
from ecq.errors import QueryError
from ecq.event import Event
from ecq.kernel.select import status
from ecq.language.ast import from_json
from ecq.match import Match
from ecq.network import LEVELS
from tests import reference
from tests.match_share import min_share, record
from tests.strategies import (
    conditioned_sets,
    partitioned_sets,
    planted_streams,
    query_sets,
    query_sets_full,
    streams,
)

# Property tests: `make test` runs them a second time on the pure kernel (SCEMON_PURE=1).
pytestmark = pytest.mark.property

CLASSES = ("A", "B", "C", "D")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def engine_run(
    ops: list[tuple[Any, ...]], level: str = "summary", compiled: bool | None = None
) -> list[dict[str, Any]]:
    """Run reference-style ``ops`` on the engine, checking invariants after each step.
    A registration the engine rejects (an ``@name`` whose query is gone) is removed from
    ``ops`` in place, with the ops that name it, so the reference sees the same stream."""
    eng = Engine(clean_every=2, level=level, compiled=compiled)
    out: list[Match] = []
    rejected: set[str] = set()
    kept: list[tuple[Any, ...]] = []
    for op in ops:
        if op[0] in ("register", "unregister") and op[1] in rejected:
            continue
        kept.append(op)
        if op[0] == "register":
            try:
                eng.register(op[1], from_json(op[2]))
            except QueryError:
                assert any(c.startswith("@") for c in json.dumps(op[2]).split('"')), op
                rejected.add(op[1])
                kept.pop()
        elif op[0] == "unregister":
            eng.unregister(op[1])
        elif op[0] == "event":
            out.extend(eng.process([Event.from_dict(op[1])]))
        else:
            out.extend(eng.advance_time(op[1]))
        eng._check()
    ops[:] = kept
    return [as_reference(m) for m in out]


def as_reference(m: Match) -> dict[str, Any]:
    return {
        "query": m.query,
        "src": m.src,
        "start": m.start,
        "end": m.end,
        "events": m.arrivals(),
        "attrs": m.attrs,
        "prob": m.prob,
        "trigger": m.trigger,
    }


def normalise(matches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m in matches:
        m = dict(m)
        m["prob"] = round(m["prob"], 9)
        m["start"] = float(m["start"])
        m["end"] = float(m["end"])
        out.append(m)
    return out


@st.composite
def scenarios(draw: st.DrawFn, query_strategy: Any = None, mixed: bool = False) -> list[tuple[Any, ...]]:
    """Register a query set, play a stream with registrations, unregistrations and
    clock advances sprinkled in, then flush the clock (``mixed``: events with an
    attribute of every kind, tests.strategies.streams)."""
    queries = draw(query_strategy if query_strategy is not None else query_sets(CLASSES))
    if draw(st.integers(0, 3)):
        # Most examples act some queries out, so that they produce matches.
        events = draw(planted_streams(queries, CLASSES, n_sources=2, max_len=14, mixed=mixed))
    else:
        events = draw(streams(CLASSES, n_sources=2, max_len=14, mixed=mixed))
    split = draw(st.integers(0, len(queries)))
    ops: list[tuple[Any, ...]] = [("register", name, q) for name, q in queries[:split]]
    late = list(queries[split:])
    registered = [name for name, _ in queries[:split]]
    for ev in events:
        action = draw(st.sampled_from(["event", "event", "event", "register", "unregister", "time"]))
        if action == "register" and late:
            name, q = late.pop(0)
            ops.append(("register", name, q))
            registered.append(name)
        elif action == "unregister" and registered:
            ops.append(("unregister", registered.pop(draw(st.integers(0, len(registered) - 1)))))
        elif action == "time":
            ops.append(("time", ev["start"] + draw(st.sampled_from([0.5, 2, 10]))))
        ops.append(("event", ev))
    ops.append(("time", math.inf))
    return ops


def same_as_reference(got: list[dict[str, Any]], ops: list[tuple[Any, ...]]) -> None:
    """The engine's matches (``got``, from ``ops`` as :func:`engine_run` left them) are
    the reference's; the example counts for the test's share of examples with matches."""
    expected = normalise(reference.evaluate(ops))
    record(expected)
    assert normalise(got) == expected


@min_share(0.25)
@SETTINGS
@given(scenarios())
def test_engine_equals_reference(ops: list[tuple[Any, ...]]) -> None:
    same_as_reference(engine_run(ops), ops)


@min_share(0.25)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(query_sets_full(CLASSES)))
def test_engine_equals_reference_with_negation_kleene_and_nesting(ops: list[tuple[Any, ...]]) -> None:
    same_as_reference(engine_run(ops), ops)


@min_share(0.25)
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query_sets_full(CLASSES), streams(CLASSES, n_sources=2, max_len=18, min_len=6), st.booleans())
def test_engine_equals_reference_on_longer_streams(
    queries: list[tuple[str, dict[str, Any]]], events: list[dict[str, Any]], pure: bool
) -> None:
    """Also on the pure kernel (the compiled kernel's twin) for some examples."""
    ops: list[tuple[Any, ...]] = [("register", name, q) for name, q in queries]
    ops += [("event", e) for e in events]
    ops.append(("time", math.inf))
    same_as_reference(engine_run(ops, compiled=False if pure else None), ops)


@min_share(0.25)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from(LEVELS))
def test_every_ablation_level_gives_the_reference_matches(ops: list[tuple[Any, ...]], level: str) -> None:
    """The benchmark's ablations change how matches are found, never which."""
    same_as_reference(engine_run(ops, level), ops)


@min_share(0.25)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.booleans())
def test_compiled_and_pure_python_engines_give_the_reference_matches(
    ops: list[tuple[Any, ...]], compiled: bool
) -> None:
    """The compiled kernel (ecq/kernel/) and the pure one find the same matches; the
    rest of the suite runs the compiled one (the default once built), and `make test`
    runs the property tests again on the pure one."""
    if compiled and not status().compiled:
        pytest.skip(f"no compiled kernel: {status().reason}")
    same_as_reference(engine_run(ops, compiled=compiled), ops)


@min_share(0.25)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(conditioned_sets(CLASSES[:3]), mixed=True), st.booleans())
def test_engine_equals_reference_on_conditioned_sequences(ops: list[tuple[Any, ...]], pure: bool) -> None:
    """Many queries, each with its own conditions on single components (the filter
    index: bounds, bound pairs, equality on numbers, strings and booleans, IN lists,
    residuals), registered and unregistered mid-stream, on both kernels."""
    same_as_reference(engine_run(ops, compiled=False if pure else None), ops)


@min_share(0.25)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(partitioned_sets(query_sets(CLASSES))), st.booleans())
def test_mixed_partition_keys_give_the_reference_matches(ops: list[tuple[Any, ...]], pure: bool) -> None:
    """Queries partitioned by the source, an attribute, two attributes and NONE in one
    engine (docs/semantics.md, "Partitions"), both modes, on both kernels."""
    same_as_reference(engine_run(ops, compiled=False if pure else None), ops)


@min_share(0.25)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(partitioned_sets(query_sets_full(CLASSES))), st.booleans())
def test_mixed_partition_keys_with_negation_kleene_and_nesting(ops: list[tuple[Any, ...]], pure: bool) -> None:
    """The same with negation, Kleene closure, sub-patterns and ``@name`` readers."""
    same_as_reference(engine_run(ops, compiled=False if pure else None), ops)


def engine_run_batched(ops: list[tuple[Any, ...]], compiled: bool | None = None) -> list[dict[str, Any]]:
    """As :func:`engine_run`, with each run of consecutive events given to the engine in
    one ``process`` call (the service's batches: with several keys in use, each network
    runs the batch through its event loop and the matches are merged)."""
    eng = Engine(clean_every=3, compiled=compiled)
    out: list[Match] = []
    kept: list[tuple[Any, ...]] = []
    rejected: set[str] = set()
    pending: list[Event] = []

    def flush() -> None:
        if pending:
            out.extend(eng.process(pending))
            pending.clear()

    for op in ops:
        if op[0] in ("register", "unregister") and op[1] in rejected:
            continue
        kept.append(op)
        if op[0] == "event":
            pending.append(Event.from_dict(op[1]))
            continue
        flush()
        if op[0] == "register":
            try:
                eng.register(op[1], from_json(op[2]))
            except QueryError:
                rejected.add(op[1])
                kept.pop()
        elif op[0] == "unregister":
            eng.unregister(op[1])
        else:
            out.extend(eng.advance_time(op[1]))
        eng._check()
    flush()
    ops[:] = kept
    seqs = [m.seq for m in out]
    assert seqs == list(range(len(out))), "seq numbers the matches in emission order"
    return [as_reference(m) for m in out]


@min_share(0.25)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(partitioned_sets(query_sets_full(CLASSES))), st.booleans())
def test_mixed_partition_keys_on_batches_give_the_reference_matches(
    ops: list[tuple[Any, ...]], pure: bool
) -> None:
    """Events in batches: every network runs a batch through its kernel's event loop and
    the matches of all keys come out merged in the one emission order."""
    same_as_reference(engine_run_batched(ops, compiled=False if pure else None), ops)
