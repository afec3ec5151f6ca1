"""Compiling and registering a query costs work linear in its size, and a query compiled
ahead of its registration (as the service does, off its writer thread) is not compiled
again.

Work is counted, not timed: the number of Python lines executed (``sys.settrace``) is
the same on a fast and on a slow machine, so the bound cannot break on a loaded CI
runner. The unit is what a 1,000-class ``OR`` costs, counted in the same test.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import orjson
import pytest

from ecq.compiler.query import compile_query, retag
from ecq.engine import Engine
from ecq.language import format_query, parse_query
from ecq.language.ast import from_json, to_json


class TooMuchWork(Exception):
    pass


def lines(fn: Callable[[], object], limit: float = float("inf")) -> int:
    """Python lines ``fn`` executes; raises TooMuchWork past ``limit`` (so a quadratic
    build fails in seconds rather than counting for an hour)."""
    count = 0

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
            if count > limit:
                raise TooMuchWork(f"more than {limit:,.0f} lines")
        return trace

    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


def or_of(n: int) -> str:
    return "OR(" + ", ".join(f"C{i}" for i in range(n)) + ")"


def seq_of(n: int) -> str:
    return "SEQ(" + ", ".join(f"C{i}" for i in range(n)) + ") WITHIN 10 s"


def register_as_the_service_does(text: str, json_form: bool = False) -> Callable[[], None]:
    """Parse (or read the AST JSON), compile, install in an engine, print the canonical
    text, and unregister: everything a registration and a deletion cost."""

    def run() -> None:
        ast = parse_query(text)
        if json_form:
            ast = from_json(orjson.loads(orjson.dumps(to_json(ast))))
        cq = Engine.compile("q", ast)
        engine = Engine()
        engine.register("q", cq)
        format_query(cq.ast)
        engine.unregister("q")

    return run


# Linear work gives about 10 units for 10,000 classes and a little over 1 for a
# 1,000-component sequence; the quadratic build this replaces took ~460 and ~5.
OR_10K_UNITS = 20
SEQ_1K_UNITS = 3


def test_registration_work_is_linear_in_the_size_of_the_query() -> None:
    unit = lines(register_as_the_service_does(or_of(1000)))
    for name, run, units in (
        ("OR of 10,000 classes", register_as_the_service_does(or_of(10_000)), OR_10K_UNITS),
        ("its AST JSON form", register_as_the_service_does(or_of(10_000), json_form=True), OR_10K_UNITS + 4),
        ("SEQ of 1,000 components", register_as_the_service_does(seq_of(1000)), SEQ_1K_UNITS),
    ):
        try:
            work = lines(run, limit=units * unit)
        except TooMuchWork:
            pytest.fail(f"{name}: more than {units} times the work of a 1,000-class OR")
        assert work > unit / 2, name  # the count saw the work


def test_retag_gives_what_compiling_at_that_point_gives() -> None:
    text = "SEQ(A a, (B; C) bc, D, AND(E, (B; C)), F) WHERE a.x > 1 WITHIN 10 s"
    ast = parse_query(text)
    early = compile_query("q", ast, text, "#0")
    late = compile_query("q", ast, text, "#7")
    moved = retag(early, "#7")
    assert [s.name for s in moved.subs] == [s.name for s in late.subs]
    assert all(s.name.endswith("#7") for s in moved.subs)
    assert [c.classes for c in moved.comps] == [c.classes for c in late.comps]
    for node, expected in zip(moved.subs, late.subs, strict=True):
        assert [c.classes for c in node.comps] == [c.classes for c in expected.comps]
        assert all(c.sub is None or c.sub in moved.subs for c in node.comps)
    assert all(c.sub is None or c.sub in moved.subs for c in moved.comps)
    assert retag(moved, "#7") is moved


def test_a_query_compiled_ahead_is_installed_without_compiling_again() -> None:
    cq = Engine.compile("q", "SEQ(A a, B b) WHERE a.x > 1 WITHIN 10 s")
    engine = Engine()
    installed = engine.register("q", cq)
    # The same compiled predicate, not a second compile's.
    assert installed.comps[0].filter is cq.comps[0].filter
    engine.process([])
    with_subs = Engine.compile("r", "SEQ(A, (B; C), D) WITHIN 10 s")
    assert engine.register("r", with_subs).subs[0].name.endswith(f"#{engine.network.seen}")
