"""scemon's version: one source (pyproject.toml), reported by ``scemon --version`` and
``ecq.__version__`` (``GET /v1/stats`` is checked in tests/service/server/test_stats.py),
and a CHANGELOG.md in the Keep a Changelog form whose latest release is that version."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import ecq

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def test_the_version_is_pyprojects() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert ecq.__version__ == version


def test_scemon_version_prints_it() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"scemon {ecq.__version__}\n"


def test_the_changelog_is_in_the_usual_form() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n")
    versions = re.findall(r"^## \[([^\]]+)\](.*)$", text, flags=re.M)
    assert versions, "no version headings"
    names = [name for name, _ in versions]
    assert names[0] == "Unreleased" or names[0] == ecq.__version__
    released = [(name, rest) for name, rest in versions if name != "Unreleased"]
    # The latest release is the version the code reports, each release has a date, and
    # releases go from the newest down.
    assert released[0][0] == ecq.__version__
    for _, rest in released:
        assert re.fullmatch(r" - \d{4}-\d{2}-\d{2}", rest), rest
    keys = [tuple(int(part) for part in name.split(".")) for name, _ in released]
    assert keys == sorted(keys, reverse=True)
    # Every version holds only the usual subsections, and at least one.
    for block in re.split(r"^## ", text, flags=re.M)[1:]:
        subsections = re.findall(r"^### (.+)$", block, flags=re.M)
        assert subsections and set(subsections) <= SECTIONS, subsections
    # Every version heading has its link reference.
    for name in names:
        assert re.search(rf"^\[{re.escape(name)}\]: \S+$", text, flags=re.M), name
