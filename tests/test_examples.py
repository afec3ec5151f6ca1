"""The committed example events are exactly what examples/make_example.py makes, so the
script stays the one description of the data."""

from __future__ import annotations

import runpy
from pathlib import Path

import orjson

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_committed_example_events_are_what_the_script_makes() -> None:
    make = runpy.run_path(str(EXAMPLES / "make_example.py"))["make"]
    committed = [orjson.loads(line) for line in (EXAMPLES / "events.jsonl").read_bytes().splitlines()]
    assert committed == make()
    assert len(committed) >= 200


def test_login_monitoring_queries_give_the_documented_matches() -> None:
    """examples/logins.txt (Kleene closure as users write it) over examples/logins.jsonl:
    the matches each query's comment promises, and the reference's."""
    import math

    from ecq.engine import Engine
    from ecq.event import Event
    from ecq.language.ast import to_json
    from ecq.language.parser import parse_queries
    from tests import reference

    queries = parse_queries((EXAMPLES / "logins.txt").read_text())
    events = [orjson.loads(line) for line in (EXAMPLES / "logins.jsonl").read_bytes().splitlines()]
    engine = Engine()
    for q in queries:
        assert q.name is not None
        engine.register(q.name, q)
    got = engine.process([Event.from_dict(e) for e in events]) + engine.advance_time(math.inf)
    expected = reference.evaluate_queries([(q.name or "", to_json(q)) for q in queries], events)
    assert [(m.query, m.arrivals()) for m in got] == [(m["query"], m["events"]) for m in expected]
    out = [(m.query, m.to_dict()["events"], m.attrs) for m in got]
    fails = ["e02", "e03", "e04", "e05", "e06", "e07"]
    assert out == [
        ("failures_after_login", ["e01", fails[:3]], {"failures": 3}),
        ("failures_after_login", ["e01", fails[:4]], {"failures": 4}),
        ("five_failures", [fails[:5]], {"failures": 5, "first_ip": "203.0.113.9"}),
        ("failures_after_login", ["e01", fails[:5]], {"failures": 5}),
        ("five_failures", [fails[1:]], {"failures": 5, "first_ip": "203.0.113.9"}),
        ("failures_after_login", ["e01", fails], {"failures": 6}),
        ("a_few_failures_between", ["e08", ["e09", "e10"], "e11"], {}),
        ("growing_downloads", ["e11", ["e12", "e14", "e15"]], {"from_mb": 12, "to_mb": 35, "downloads": 3}),
        (
            "growing_downloads",
            ["e11", ["e12", "e14", "e15", "e16"]],
            {"from_mb": 12, "to_mb": 50, "downloads": 4},
        ),
        ("guessed_it", [["e17", "e18", "e19"], "e20"], {"failures": 3, "ip": "198.51.100.7"}),
        ("takeover", ["e21", ["e22", "e23"]], {}),
        # A group in a conjunction: at each failure from the second on, in any order
        # with the password change; a group over a sub-pattern: a chain of repetitions.
        ("change_amid_failures", ["e27", ["e25", "e28"]], {"failures": 2}),
        ("repeated_lockouts", ["e24", [["e25", "e26"], ["e28", "e29"]]], {"lockouts": 2}),
        ("failures_after_login", ["e24", ["e25", "e28", "e30"]], {"failures": 3}),
        ("change_amid_failures", ["e27", ["e25", "e28", "e30"]], {"failures": 3}),
        # The bursts' one match each, once the clock passes its window (the end of the replay).
        ("failure_burst", ["e01", fails], {"failures": 6}),
        ("failure_burst", ["e24", ["e25", "e28", "e30"]], {"failures": 3}),
    ]
