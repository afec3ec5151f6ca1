"""``deploy/Dockerfile`` and the root's ``.dockerignore``, read statically (no docker here):
the build stage has a C compiler and gets every file ``pip install .`` reads, so the image
builds the compiled kernel; nothing built on the host is sent to the build."""

from __future__ import annotations

import re
import subprocess
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


@dataclass
class Stage:
    base: str
    name: str | None
    runs: list[str] = field(default_factory=list)
    # (from stage or None for the build context, sources, destination)
    copies: list[tuple[str | None, list[str], str]] = field(default_factory=list)


def stages() -> list[Stage]:
    """The Dockerfile's stages, its instructions joined across continued lines."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    found: list[Stage] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word == "FROM":
            parts = rest.split()
            found.append(Stage(parts[0], parts[2] if len(parts) > 2 and parts[1].upper() == "AS" else None))
        elif word == "RUN":
            found[-1].runs.append(rest)
        elif word == "COPY":
            parts = rest.split()
            origin = None
            if parts[0].startswith("--from="):
                origin = parts.pop(0).removeprefix("--from=")
            found[-1].copies.append((origin, parts[:-1], parts[-1]))
    return found


def ignore_patterns() -> list[str]:
    lines = DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern (Go's filepath.Match, plus ``**``) as a regex over a path."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + r"\Z")


def ignored(path: str) -> bool:
    """Whether docker leaves ``path`` (relative to the context) out: a pattern matching it
    or a folder above it; the last matching pattern wins, ``!`` keeps."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for pattern in ignore_patterns():
        keep = pattern.startswith("!")
        regex = _pattern_regex(pattern.removeprefix("!").strip("/"))
        if any(regex.match(prefix) for prefix in prefixes):
            result = not keep
    return result


def install_inputs() -> list[str]:
    """Every tracked file ``pip install .`` reads: pyproject.toml, its readme, setup.py and
    the packages it names (sources, the kernel's .pyx/.pxd/.h, package data)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    includes = project["tool"]["setuptools"]["packages"]["find"]["include"]
    tops = sorted({name.split(".")[0] for name in includes})
    tracked = subprocess.run(
        ["git", "ls-files", *tops], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked, "git ls-files found none of the packages"
    return ["pyproject.toml", project["project"]["readme"], "setup.py", *tracked]


def copied_by(stage: Stage, path: str) -> bool:
    for origin, sources, _ in stage.copies:
        if origin is None and any(path == src.rstrip("/") or path.startswith(src.rstrip("/") + "/")
                                  for src in sources):
            return True
    return False


def test_the_image_has_a_build_stage_with_a_compiler_and_a_runtime_without() -> None:
    build, runtime = stages()
    assert build.name is not None
    assert any(re.search(r"\b(gcc|build-essential|clang)\b", run) for run in build.runs)
    assert not any(re.search(r"\b(gcc|build-essential|clang)\b", run) for run in runtime.runs)
    # The runtime takes the built virtualenv from the build stage, nothing from the context.
    assert any(origin == build.name for origin, _, _ in runtime.copies)
    assert all(origin is not None for origin, _, _ in runtime.copies)


def test_the_build_stage_copies_everything_pip_install_reads() -> None:
    build = stages()[0]
    inputs = install_inputs()
    assert "setup.py" in inputs and "ecq/kernel/_kernel.pyx" in inputs
    assert any(path.startswith("service/server/console/") for path in inputs)
    missing = [path for path in inputs if not copied_by(build, path) or ignored(path)]
    assert not missing, f"the build stage lacks what `pip install .` needs: {missing}"
    assert any("pip install" in run and "." in run for run in build.runs)


def test_the_build_fails_when_the_kernel_is_not_compiled() -> None:
    """Outside the source folder, so the installed package is imported, not /src's."""
    build = stages()[0]
    checks = [run for run in build.runs if "status()" in run and "compiled" in run]
    assert checks and checks[0].startswith("cd / ")


@pytest.mark.parametrize(
    "path",
    [
        "ecq/kernel/_kernel.cpython-311-x86_64-linux-gnu.so",
        "ecq/kernel/_kernel.c",
        "ecq/__pycache__/engine.cpython-311.pyc",
        ".venv/bin/python",
        ".venv-3.13/bin/python",
        "build/compiled-kernel-cpython-311.txt",
        ".git/HEAD",
        "scemon.egg-info/PKG-INFO",
        "data/scemon.db",
    ],
)
def test_dockerignore_keeps_host_builds_out(path: str) -> None:
    assert ignored(path)


@pytest.mark.parametrize("path", ["ecq/kernel/_portable.h", "ecq/kernel/_kernel.pyx", "deploy/build.txt"])
def test_dockerignore_matcher_is_not_vacuous(path: str) -> None:
    assert not ignored(path)
