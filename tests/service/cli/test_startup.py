"""What a ``scemon`` command imports: only what it runs. Checked in a fresh interpreter,
by the modules loaded (no timing).

The app (service/cli/app.py) builds a command from its module when that command runs, so
``scemon replay`` does not import the benchmarks, the server, the Spark job, the HTTP
client, rich or (where the compiled kernel runs) the pure kernel; its options are
converted without pydantic (service/cli/coercion.py). Most of these cost the replay of
1,000 queries tens to hundreds of milliseconds of start-up (the pure kernel, a few).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ecq.kernel.select import status
from service.cli import coercion

ROOT = Path(__file__).resolve().parents[3]

SLOW = ("api.client", "api.models", "httpx")

# Packages `scemon replay` has no use for (a top-level name stands for its submodules).
NOT_FOR_REPLAY = (
    "service.bench",
    "service.server",
    "service.pipeline",
    "service.cli.bench",
    "service.cli.serve",
    "service.cli.stream",
    "service.cli.demo",
    "service.cli.cluster",
    "service.cli.queries",
    "api",
    "httpx",
    "pydantic",
    "rich",
    "fastapi",
    "starlette",
    "uvicorn",
    "pyspark",
    "pyarrow",
    "matplotlib",
    "ecq.evaluation",
    "importlib.metadata",
)


def loaded_after(args: list[str], modules: tuple[str, ...]) -> list[str]:
    """The names of ``modules`` (or their submodules) loaded once ``scemon <args>`` has run
    in a fresh interpreter, in process."""
    code = (
        "import sys\n"
        "from service.cli.app import app\n"
        "try:\n"
        f"    app({args!r})\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        f"print([m for m in {modules!r} if any(n == m or n.startswith(m + '.') for n in sys.modules)])\n"
        "print('ecq.engine' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded, engine = out.stdout.strip().splitlines()[-2:]
    return [*json.loads(loaded.replace("'", '"')), *(["ecq.engine"] if engine == "True" else [])]


def test_the_cli_app_loads_without_the_http_client() -> None:
    code = f"import sys, service.cli.app; print([m for m in {SLOW!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_replay_imports_only_what_it_runs(tmp_path: Path) -> None:
    queries = tmp_path / "queries.txt"
    queries.write_text("QUERY q1 PATTERN SEQ(A a, B b) WITHIN 10\n")
    events = tmp_path / "events.jsonl"
    events.write_text('{"src": "s", "type": "A", "start": 1}\n{"src": "s", "type": "B", "start": 2}\n')
    out = tmp_path / "matches.jsonl"
    args = [
        "replay",
        "-q",
        str(queries),
        "-e",
        str(events),
        "-o",
        str(out),
        "--engine",
        "shared",
        "--lateness",
        "0",
    ]
    # pydantic too, unless this typer converts options in a way service/cli/coercion.py
    # does not know (it then leaves RuntimeParam unset, and typer's own conversion runs).
    expected_absent = tuple(m for m in NOT_FOR_REPLAY if m != "pydantic" or coercion.RuntimeParam is not None)
    # The pure kernel too, where the compiled one runs (CI builds it; SCEMON_PURE=1 runs the pure one).
    if status().kind == "compiled":
        expected_absent += ("ecq.kernel.pure",)
    assert loaded_after(args, expected_absent) == ["ecq.engine"]  # the engine ran, nothing else
    assert len(out.read_text().splitlines()) == 1


def test_the_check_sees_a_command_that_imports_more() -> None:
    """Not vacuous: the help of `bench queries` builds the bench commands, which import
    the benchmarks and rich."""
    loaded = loaded_after(["bench", "queries", "--help"], NOT_FOR_REPLAY)
    assert "service.bench" in loaded and "service.cli.bench" in loaded and "rich" in loaded


def test_the_command_leaves_what_it_built_frozen_for_the_exit(tmp_path: Path) -> None:
    """``scemon`` as a process (``service.cli.process.cli``) freezes what is alive when the
    command ends, so the interpreter's collections at exit skip it; the exit status is
    the command's. Seen from an ``atexit`` handler, which runs after the command and
    before those collections."""
    queries = tmp_path / "queries.txt"
    queries.write_text("QUERY q1 PATTERN SEQ(A a, B b) WITHIN 10\n")
    events = tmp_path / "events.jsonl"
    events.write_text('{"src": "s", "type": "A", "start": 1}\n{"src": "s", "type": "B", "start": 2}\n')
    code = (
        "import atexit, gc, sys\n"
        "from service.cli.process import cli\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 1000))\n"
        "sys.argv = ['scemon', *sys.argv[1:]]\n"
        "cli()\n"
    )
    for args, exit_status in (([str(queries)], 0), ([str(tmp_path / "missing.txt")], 1)):
        out = subprocess.run(
            [sys.executable, "-c", code, "replay", "-q", *args, "-e", str(events)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == exit_status, out.stderr
        assert out.stdout.splitlines()[-1] == "frozen True"


def test_the_server_loads_without_pyarrow_until_an_arrow_batch_comes() -> None:
    """A server's start (and its restart's rebuild from a store of JSON batches) does not
    import pyarrow and numpy; reading an Arrow batch does."""
    code = (
        "import sys\n"
        "import service.server.main, service.server.store\n"
        "print([m for m in ('pyarrow', 'numpy') if m in sys.modules])\n"
        "from service.server.ingest import from_arrow\n"
        "import pyarrow as pa\n"
        "sink = pa.BufferOutputStream()\n"
        "table = pa.table({'src': ['s'], 'type': ['A'], 'start': [1.0]})\n"
        "with pa.ipc.new_stream(sink, table.schema) as writer:\n"
        "    writer.write_table(table)\n"
        "print(len(from_arrow(sink.getvalue().to_pybytes(), 'p', 'b1', 10).events))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines() == ["[]", "1"]
