"""``scemon stream``, ``scemon queries register`` and ``scemon demo`` as real processes:
every bad input is one line on stderr and exit status 1, before Spark starts."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import httpx
import orjson
import pytest

from api.client import Client
from service.cli.collector import THRESHOLDS
from service.server.process import free_port
from tests.service.conftest import ROOT, StartService, scemon


def stream(tmp_path: Path, *args: str | Path) -> tuple[int, str]:
    result = scemon(
        "stream", "--checkpoint", tmp_path / "ck", "--dead-letter", tmp_path / "dead", *args, timeout=120
    )
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    return result.returncode, result.stderr


def test_a_source_folder_that_does_not_exist_is_named(tmp_path: Path) -> None:
    code, err = stream(tmp_path, "--source", tmp_path / "nope", "--service", "http://127.0.0.1:9")
    assert code == 1
    assert f"source folder {tmp_path / 'nope'} does not exist" in err


def test_an_unknown_map_column_is_named_with_the_columns_there_are(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "pay.csv").write_text("card,kind,ts\n1,A,2\n")
    code, err = stream(
        tmp_path,
        "--source",
        tmp_path / "in",
        "--service",
        "http://127.0.0.1:9",
        "--map",
        "src=card,type=kind,start=time",
    )
    assert code == 1
    assert "--map start=time: no column 'time'" in err and "(it has: card, kind, ts)" in err


@pytest.mark.parametrize(
    ("mapping", "message"),
    [("colour=c", "unknown event field 'colour'"), ("src", "expected field=column pairs")],
)
def test_a_malformed_map_is_refused(tmp_path: Path, mapping: str, message: str) -> None:
    (tmp_path / "in").mkdir()
    code, err = stream(
        tmp_path, "--source", tmp_path / "in", "--service", "http://127.0.0.1:9", "--map", mapping
    )
    assert code == 1 and message in err


def test_a_service_that_is_down_is_retried_then_the_command_fails(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    code, err = stream(tmp_path, "--source", tmp_path / "in", "--service", url, "--retry-seconds", "2")
    assert code == 1
    assert f"service not reachable: {url} is not ready: gave up after" in err
    assert "Connection refused" in err
    assert 1.5 < time.monotonic() - started < 60


def test_a_service_that_is_not_a_url_is_refused(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    code, err = stream(tmp_path, "--source", tmp_path / "in", "--service", "localhost:8080")
    assert code == 1 and "expected a URL like http://" in err


@pytest.mark.server
def test_queries_are_registered_on_every_shard_and_a_rerun_skips_them(
    tmp_path: Path, start_service: StartService
) -> None:
    one, two = start_service(), start_service()
    queries = ROOT / "examples" / "queries.txt"
    first = scemon("queries", "register", "--service", one.url, "--service", two.url, "--queries", queries)
    assert first.returncode == 0, first.stderr
    assert first.stderr.splitlines() == [
        f"{one.url}: 6 registered, 0 already there",
        f"{two.url}: 6 registered, 0 already there",
    ]
    again = scemon("queries", "register", "-s", one.url, "-s", two.url, "-q", queries)
    assert again.returncode == 0 and "0 registered, 6 already there" in again.stderr
    for url in (one.url, two.url):
        with Client(url) as client:
            assert len(client.queries()) == 6


@pytest.mark.server
def test_registering_on_a_shard_that_is_down_names_it_and_the_shards_done(
    tmp_path: Path, start_service: StartService
) -> None:
    one = start_service()
    down = f"http://127.0.0.1:{free_port()}"
    result = scemon("queries", "register", "-s", one.url, "-s", down, "-q", ROOT / "examples" / "queries.txt")
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].startswith(f"error: {down}: not reachable")
    assert f"(done: {one.url})" in result.stderr


# `scemon ARGS...` in a process where the dev extra's packages cannot be imported, as in
# the virtualenv `make demo` installs (scemon with the spark extra only).
_WITHOUT_DEV_TOOLS = """
import sys
from importlib.abc import MetaPathFinder

class WithoutDevTools(MetaPathFinder):
    '''Each finder of the interpreter, blind to the blocked packages: to an import
    or a probe (importlib.util.find_spec) they are not installed.'''

    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED or not hasattr(self.finder, "find_spec"):
            return None
        return self.finder.find_spec(name, path, target)

    def invalidate_caches(self):
        if hasattr(self.finder, "invalidate_caches"):
            self.finder.invalidate_caches()

BLOCKED = set(sys.argv[1].split(","))
assert not BLOCKED & set(sys.modules)
sys.meta_path[:] = [WithoutDevTools(finder) for finder in sys.meta_path]
from service.cli.app import app
app(sys.argv[2:], prog_name="scemon")
"""


def dev_only_modules() -> list[str]:
    """The modules of the dev extra that neither scemon nor its spark extra requires."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

    def names(requirements: list[str]) -> set[str]:
        return {re.split(r"[\\[<>=!~; ]", req, maxsplit=1)[0].lower().replace("-", "_") for req in requirements}

    extras = project["optional-dependencies"]
    dev = names(extras["dev"]) - names(project["dependencies"]) - names(extras["spark"])
    assert {"pytest", "mypy", "playwright", "schemathesis"} <= dev
    return sorted(dev)


@pytest.mark.spark
@pytest.mark.server
def test_the_demo_runs_end_to_end_and_exits_0(tmp_path: Path) -> None:
    """In a temporary folder (here under tmp_path, through TMPDIR): it goes at the end,
    all but the logs the demo named, which stay where it said. Without the dev tools, as
    `make demo` installs it."""
    demo = ["demo", "--events", "3000", "--files", "2", "--queries", "50"]
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_DEV_TOOLS, ",".join(dev_only_modules()), *demo],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "1000", "TMPDIR": str(tmp_path)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "events streamed" in result.stdout and "3,000" in result.stdout
    assert "matches (posts said · WebSocket got)" in result.stdout
    # Spark's one-time start (session, workers warmed on a sample) is shown apart from
    # the stream's rate.
    assert "Spark start-up (once: session, workers, plan)" in result.stdout
    (workdir,) = tmp_path.glob("scemon-demo-*")
    assert [child.name for child in workdir.iterdir()] == ["logs"]
    for log in ("server.log", "spark.log"):
        assert f"{workdir / 'logs' / log}" in result.stdout
        assert (workdir / "logs" / log).is_file()
    assert result.stdout.rstrip().endswith(f"the logs are kept in {workdir / 'logs'}")


@pytest.mark.spark
@pytest.mark.server
def test_the_demo_keeps_its_service_and_console_up_until_ctrl_c(tmp_path: Path) -> None:
    """With --keep the run is followed by a live feed through the job until Ctrl-C."""
    port = free_port()
    command = [sys.executable, "-m", "service.cli", "demo", "--keep", "--port", str(port)]
    command += ["--events", "3000", "--files", "2", "--queries", "50", "--workdir", str(tmp_path / "demo")]
    out = tmp_path / "demo.out"
    with out.open("wb") as sink:
        demo = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "COLUMNS": "200"},
        )
    try:
        deadline = time.monotonic() + 300
        while "Ctrl-C stops it" not in out.read_text(errors="replace"):
            assert demo.poll() is None, out.read_text(errors="replace")
            assert time.monotonic() < deadline, out.read_text(errors="replace")
            time.sleep(0.5)
        url = f"http://127.0.0.1:{port}"
        assert f"open {url}/ for its console" in out.read_text()
        # The run is over and the service is still up, with the demo's data.
        page = httpx.get(f"{url}/")
        assert page.status_code == 200 and "scemon console" in page.text
        with Client(url) as client:
            assert client.stats().events >= 3000 and client.stats().matches > 0
            assert len(client.queries()) == 52
            # Payments go on streaming: the service's count of events keeps rising, past
            # the run's 3,000 and then again past each reading (bounded by the deadline).
            readings = [client.stats().events]
            while len(readings) < 4:
                assert demo.poll() is None, out.read_text(errors="replace")
                assert time.monotonic() < deadline, (readings, out.read_text(errors="replace"))
                time.sleep(1)
                events = client.stats().events
                if events > readings[-1]:
                    readings.append(events)
            assert readings[-1] > 3000
        demo.send_signal(signal.SIGINT)  # the user's Ctrl-C
        assert demo.wait(60) == 0, out.read_text(errors="replace")
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{url}/healthz", timeout=2)
        assert "stopping the service" in out.read_text()
        # Nothing is left writing into the folder: the feed stopped with the demo.
        files = sorted((tmp_path / "demo" / "in").glob("payments-*.jsonl"))
        time.sleep(3)
        assert sorted((tmp_path / "demo" / "in").glob("payments-*.jsonl")) == files
        assert (tmp_path / "demo" / "logs" / "server.log").is_file()
    finally:
        if demo.poll() is None:
            # The demo's whole session (its own process group): its service and Spark's
            # JVM too, which a SIGKILL of the demo alone would leave running.
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()


# The kept service's wait (Demo._serve) with Ctrl-C's SIGINT delivered to another thread
# of the process than the main one, as the kernel may when the demo runs its WebSocket
# listener, py4j's and pyarrow's threads beside it.
_CTRL_C_ELSEWHERE = """
import signal, sys, threading, time
from pathlib import Path
from rich.console import Console
from service.cli.demo import Demo

def ctrl_c_to_this_thread():
    time.sleep(0.5)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)

# As the demo has it by then (service.pipeline.session): a test run started in the
# background by a shell without job control inherits SIGINT ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
threading.Thread(target=ctrl_c_to_this_thread, daemon=True).start()
Demo(workdir=Path(sys.argv[1]), console=Console(width=200))._serve("http://127.0.0.1:1")
print("served")
"""


def test_the_kept_service_stops_on_ctrl_c_whichever_thread_gets_the_signal(tmp_path: Path) -> None:
    """Python runs a signal's handler in the main thread when that thread next wakes; a
    wait that slept an hour at a time did not see a SIGINT the kernel handed to another
    thread for that hour (likely why the demo's Ctrl-C test above once timed out)."""
    command = [sys.executable, "-c", _CTRL_C_ELSEWHERE, str(tmp_path)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "stopping the service" in result.stdout and result.stdout.rstrip().endswith("served")


# Runs `scemon stream` in a process of its own with a spy on the job's run: the real
# command, Spark and service; the spy only records the collector's state it runs under.
_COLLECTOR_SPY = """
import gc, sys
import orjson
from service.cli.app import app
from service.pipeline import job
before = gc.get_threshold()[0]
seen = []
run = job.Pipeline.run
def watched(self):
    seen.append((gc.get_threshold()[0], gc.get_freeze_count()))
    return run(self)
job.Pipeline.run = watched
code = 0
try:
    app(sys.argv[1:], prog_name="scemon")
except SystemExit as end:
    code = end.code
after = gc.get_threshold()[0]
print(orjson.dumps({"seen": seen, "before": before, "after": after, "code": code}).decode())
"""


@pytest.mark.spark
@pytest.mark.server
def test_the_job_runs_with_the_collector_tuned_and_gives_it_back(
    tmp_path: Path, start_service: StartService
) -> None:
    """The job's driver holds pyspark's, py4j's and pyarrow's objects for its whole run;
    the collector walked them every few hundred allocations (a third of the demo's
    driver CPU). It runs with them frozen and at the tuned thresholds, and the process
    gets the collector back as it was."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"src": "s", "type": "A", "start": 1}\n')
    service = start_service()
    command = [sys.executable, "-c", _COLLECTOR_SPY, "stream", "--source", str(tmp_path / "in")]
    command += ["--service", service.url, "--checkpoint", str(tmp_path / "ck")]
    command += ["--dead-letter", str(tmp_path / "dead"), "--once"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = orjson.loads(result.stdout.strip().splitlines()[-1])
    assert out["code"] in (0, None), result.stderr[-3000:]
    [(threshold, frozen)] = out["seen"]
    assert threshold == THRESHOLDS[0] and frozen > 10_000  # the driver's modules and session
    # The interpreter's default as the process had it (700 to 3.12, 2000 from 3.13).
    assert out["after"] == out["before"] != THRESHOLDS[0]
