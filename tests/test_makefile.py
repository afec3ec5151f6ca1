"""``make demo`` blocks until Ctrl-C only for a person at a terminal: its service stays up
after the run (``scemon demo --keep``) when make's stdin is a TTY, and the demo ends
after the run from a script, CI or a pipe, where nobody would press Ctrl-C. ``KEEP=1``
or ``KEEP=0`` decides either way. Read from ``make -n`` (the commands, not run), with
stdin a pseudo-terminal or not one."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")


@pytest.fixture
def terminal() -> Iterator[int]:
    """The far end of a pseudo-terminal: a file descriptor for which ``isatty`` holds."""
    leader, follower = pty.openpty()
    try:
        yield follower
    finally:
        os.close(follower)
        os.close(leader)


def _demo_command(stdin: int, *args: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KEEP", "DEMO_FLAGS", "MAKEFLAGS")}
    out = subprocess.run(
        ["make", "-n", "demo", *args],
        cwd=ROOT,
        stdin=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = [line.split() for line in out.stdout.splitlines() if "scemon demo" in line]
    assert len(lines) == 1, out.stdout
    return lines[0][lines[0].index("demo") + 1 :]


@pytest.mark.parametrize(("args", "flags"), [((), []), (("KEEP=1",), ["--keep"]), (("KEEP=0",), [])])
def test_without_a_terminal_the_demo_ends_unless_asked_to_keep(
    args: tuple[str, ...], flags: list[str]
) -> None:
    assert _demo_command(subprocess.DEVNULL, *args) == flags


@pytest.mark.parametrize(("args", "flags"), [((), ["--keep"]), (("KEEP=0",), []), (("KEEP=1",), ["--keep"])])
def test_at_a_terminal_the_service_stays_up_unless_asked_not_to(
    terminal: int, args: tuple[str, ...], flags: list[str]
) -> None:
    assert _demo_command(terminal, *args) == flags


def test_other_demo_options_pass_through(terminal: int) -> None:
    assert _demo_command(terminal, "DEMO_FLAGS=--events 2000") == ["--keep", "--events", "2000"]
    assert _demo_command(subprocess.DEVNULL, "DEMO_FLAGS=--events 2000") == ["--events", "2000"]


def _dry_run(target: str, venv: Path) -> str:
    """``make -n TARGET`` for a virtualenv that does not exist yet: every install step."""
    # Run as `make test` runs the tests, make's own variables would make this make print
    # "Entering/Leaving directory" around the commands: not a sub-make's view.
    env = {
        k: v for k, v in os.environ.items() if k not in ("KEEP", "DEMO_FLAGS", "MAKEFLAGS", "MAKELEVEL", "MFLAGS")
    }
    return subprocess.run(
        ["make", "--no-print-directory", "-n", target, f"VENV={venv}", "KEEP=0"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout


def test_the_demo_installs_scemon_with_the_spark_extra_only(tmp_path: Path) -> None:
    """No dev tools (mypy, pytest, schemathesis, playwright) and no browser for a demo;
    a Java runtime, which Spark needs."""
    commands = _dry_run("demo", tmp_path / "venv")
    installs = [line for line in commands.splitlines() if "pip install" in line]
    assert installs == [f"{tmp_path / 'venv'}/bin/python -m pip install --quiet -e '.[spark]'"]
    assert "chromium" not in commands and "dev" not in installs[0]
    assert "openjdk" in commands
    assert commands.rstrip().splitlines()[-1].split()[1:] == ["demo"]


def test_the_tests_install_everything(tmp_path: Path) -> None:
    commands = _dry_run("test", tmp_path / "venv")
    assert "-e '.[dev,spark]'" in commands
    assert "chromium" in commands and "openjdk" in commands


def test_after_the_full_install_the_demo_installs_nothing_more(tmp_path: Path) -> None:
    """The full install holds the demo's: it marks the demo's install done too."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for stamp in (".installed", ".installed-demo"):
        (venv / stamp).touch()
    assert "pip install" not in _dry_run("demo", venv)
    assert "touch" in _dry_run("test", tmp_path / "other")
    assert f"{tmp_path / 'other'}/.installed-demo" in _dry_run("test", tmp_path / "other")
