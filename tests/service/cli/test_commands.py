"""The ``scemon`` program, run as a real process (``python -m service.cli``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest

from ecq.kernel.select import status

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"

AB = "QUERY ab\nPATTERN SEQ(A, B)\nWITHIN 10 s\n"
# a1 b1 on source 1; on source 2 an id-less a (line 2) and b (line 4, after a blank
# line), then a b too late for the window.
EVENTS = (
    '{"id": "a1", "src": 1, "type": "A", "start": 1}\n'
    '{"id": "b1", "src": 1, "type": "B", "start": 2, "end": 3}\n'
    '{"src": "s2", "type": "A", "start": 4}\n'
    "\n"
    '{"src": "s2", "type": "B", "start": 9}\n'
    '{"src": "s2", "type": "B", "start": 20}\n'
)
EXPECTED = [
    {"query": "ab", "src": 1, "start": 1.0, "end": 3.0, "events": ["a1", "b1"], "attrs": {}, "prob": 1.0},
    {"query": "ab", "src": "s2", "start": 4.0, "end": 9.0, "events": [2, 4], "attrs": {}, "prob": 1.0},
]


def scemon(
    *args: str | Path, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def records(text: str) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in text.splitlines()]


def without_seq(matches: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{k: v for k, v in m.items() if k != "seq"} for m in matches]


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in result.stderr


# ------------------------------------------------------------------------------ help


@pytest.mark.parametrize("command", [[], ["parse"], ["replay"]])
def test_every_command_has_help(command: list[str]) -> None:
    result = scemon(*command, "--help")
    assert result.returncode == 0
    assert "Usage" in result.stdout
    if command:
        assert "--queries" in result.stdout


def test_replay_help_says_how_id_less_events_are_named() -> None:
    text = " ".join(scemon("replay", "--help").stdout.split())
    assert "0-based line number" in text
    assert "0-based data row" in text


# ----------------------------------------------------------------------------- parse


def test_parse_prints_canonical_queries_that_parse_again(tmp_path: Path) -> None:
    first = scemon("parse", "--queries", EXAMPLES / "queries.txt")
    assert first.returncode == 0, first.stderr
    for name in ("dinner_and_a_movie", "brand_spree", "movie_then_bar"):
        assert name in first.stdout
    again = scemon("parse", "--queries", write(tmp_path, "canonical.txt", first.stdout))
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout


def test_parse_accepts_a_json_queries_file(tmp_path: Path) -> None:
    path = write(tmp_path, "q.json", '[{"name": "ab", "text": "SEQ(A, B) WITHIN 10 s"}]')
    result = scemon("parse", "-q", path)
    assert result.returncode == 0, result.stderr
    assert "ab" in result.stdout


def test_parse_reports_the_first_bad_query_on_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "q.txt", AB + "\nQUERY bad\nPATTERN SEQ(A, B\nWITHIN 10 s\n")
    result = scemon("parse", "--queries", path)
    assert_one_line_error(result, str(path), "line ")
    assert result.stdout == ""


def test_parse_of_a_missing_file_is_one_line(tmp_path: Path) -> None:
    result = scemon("parse", "--queries", tmp_path / "nope.txt")
    assert_one_line_error(result, "nope.txt")


# ---------------------------------------------------------------------------- replay


def test_replay_writes_matches_as_json_lines_to_stdout(tmp_path: Path) -> None:
    result = scemon("replay", "-q", write(tmp_path, "q.txt", AB), "-e", write(tmp_path, "e.jsonl", EVENTS))
    assert result.returncode == 0, result.stderr
    matches = records(result.stdout)
    assert without_seq(matches) == EXPECTED
    seqs = [m["seq"] for m in matches]
    assert all(isinstance(s, int) for s in seqs) and seqs == sorted(set(seqs))  # type: ignore[type-var]
    assert "5 events, 2 matches (ab 2)" in result.stderr


@pytest.mark.parametrize("pure", [False, True])
def test_replay_warns_on_one_line_when_it_runs_the_pure_kernel(tmp_path: Path, pure: bool) -> None:
    """Never the slow kernel silently: a line on stderr saying why, the same matches."""
    if not pure and not status().compiled:
        pytest.skip(f"{status().reason}")
    env = {k: v for k, v in os.environ.items() if k != "SCEMON_PURE"}
    if pure:
        env["SCEMON_PURE"] = "1"
    queries, events = write(tmp_path, "q.txt", AB), write(tmp_path, "e.jsonl", EVENTS)
    result = scemon("replay", "-q", queries, "-e", events, env=env)
    assert result.returncode == 0, result.stderr
    assert without_seq(records(result.stdout)) == EXPECTED
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == (
        ["warning: running the pure-Python kernel of the engine, several times slower (SCEMON_PURE is set)"]
        if pure
        else []
    )
    # The baseline is pure Python by design: no warning for it.
    separate = scemon("replay", "-q", queries, "-e", events, "--engine", "separate", env=env)
    assert separate.returncode == 0 and "warning" not in separate.stderr, separate.stderr


def test_replay_to_a_file_writes_the_same_lines(tmp_path: Path) -> None:
    queries, events = write(tmp_path, "q.txt", AB), write(tmp_path, "e.jsonl", EVENTS)
    out = tmp_path / "matches.jsonl"
    to_file = scemon("replay", "--queries", queries, "--events", events, "--out", out)
    to_stdout = scemon("replay", "--queries", queries, "--events", events, "--out", "-")
    assert to_file.returncode == 0 and to_stdout.returncode == 0
    assert to_file.stdout == ""
    assert out.read_text() == to_stdout.stdout


def test_replay_reads_csv_and_json_queries(tmp_path: Path) -> None:
    csv = "id,src,type,start,end\na1,1,A,1,\nb1,1,B,2,3\n,s2,A,4,\n,s2,B,9,\n,s2,B,20,\n"
    queries = write(tmp_path, "q.json", '[{"name": "ab", "text": "SEQ(A, B) WITHIN 10 s"}]')
    result = scemon("replay", "-q", queries, "-e", write(tmp_path, "e.csv", csv))
    assert result.returncode == 0, result.stderr
    expected = [dict(m) for m in EXPECTED]
    expected[1]["events"] = [2, 3]  # CSV: 0-based data rows
    assert without_seq(records(result.stdout)) == expected


def test_replay_emits_matches_waiting_on_the_window_at_end_of_input(tmp_path: Path) -> None:
    queries = write(tmp_path, "q.txt", "QUERY ab_not_c\nPATTERN SEQ(A, B, !C)\nWITHIN 10 s\n")
    events = write(
        tmp_path, "e.jsonl", '{"src": 1, "type": "A", "start": 1}\n{"src": 1, "type": "B", "start": 2}\n'
    )
    result = scemon("replay", "-q", queries, "-e", events)
    assert result.returncode == 0, result.stderr
    assert [m["events"] for m in records(result.stdout)] == [[0, 1]]


def test_replay_bad_event_writes_nothing(tmp_path: Path) -> None:
    queries = write(tmp_path, "q.txt", AB)
    bad = EVENTS + '{"src": 1, "type": "A", "start": "noon"}\n'
    events = write(tmp_path, "events.jsonl", bad)
    out = tmp_path / "matches.jsonl"
    result = scemon("replay", "-q", queries, "-e", events, "-o", out)
    assert_one_line_error(result, "events.jsonl line 7", "'start'")
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl", "q.txt"]
    to_stdout = scemon("replay", "-q", queries, "-e", events)
    assert to_stdout.returncode == 1 and to_stdout.stdout == ""


def test_replay_bad_csv_start_names_line_and_field(tmp_path: Path) -> None:
    events = write(tmp_path, "e.csv", "src,type,start\n1,A,1\n1,B,soon\n")
    result = scemon("replay", "-q", write(tmp_path, "q.txt", AB), "-e", events)
    assert_one_line_error(result, "e.csv line 3", "'start'")
    assert result.stdout == ""


def test_replay_bad_query_names_the_queries_file(tmp_path: Path) -> None:
    queries = write(tmp_path, "q.json", '[{"name": "oops", "text": "SEQ(A, B WITHIN 10 s"}]')
    result = scemon("replay", "-q", queries, "-e", write(tmp_path, "e.jsonl", EVENTS))
    assert_one_line_error(result, "q.json", "'oops'")
    assert result.stdout == ""


def test_replay_missing_events_file_is_one_line(tmp_path: Path) -> None:
    result = scemon("replay", "-q", write(tmp_path, "q.txt", AB), "-e", tmp_path / "none.jsonl")
    assert_one_line_error(result, "none.jsonl")


def test_bundled_example_matches_every_query_several_times() -> None:
    result = scemon("replay", "-q", EXAMPLES / "queries.txt", "-e", EXAMPLES / "events.jsonl")
    assert result.returncode == 0, result.stderr
    counts = Counter(str(m["query"]) for m in records(result.stdout))
    names = [
        line.split()[1]
        for line in (EXAMPLES / "queries.txt").read_text().splitlines()
        if line.startswith("QUERY")
    ]
    assert names and all(counts[name] >= 3 for name in names), counts
    csv = scemon("replay", "-q", EXAMPLES / "queries.txt", "-e", EXAMPLES / "events.csv")
    assert csv.stdout == result.stdout


def test_generate_writes_a_workload_that_replay_reads(tmp_path: Path) -> None:
    out = tmp_path / "wl"
    args = [
        "generate",
        "--queries",
        "30",
        "--sources",
        "5",
        "--classes",
        "4",
        "--events",
        "400",
        "--source-gap",
        "60",
    ]
    made = scemon(*args, "--out", out)
    assert made.returncode == 0, made.stderr
    assert (out / "queries.txt").read_text().count("QUERY ") == 30
    lines = (out / "events.jsonl").read_text().splitlines()
    assert len(lines) == 400
    again = scemon(*args, "--out", tmp_path / "again")
    assert again.returncode == 0
    assert (tmp_path / "again" / "events.jsonl").read_text() == (out / "events.jsonl").read_text()  # seeded
    replayed = scemon("replay", "--queries", out / "queries.txt", "--events", out / "events.jsonl")
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.count("\n") > 0  # a dense stream over 4 classes completes matches
