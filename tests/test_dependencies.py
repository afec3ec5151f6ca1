"""The import arrows of docs/architecture.md, read from the source with ``ast`` so that a
wrong arrow fails here, wherever the import sits (top level, inside a function, under
``TYPE_CHECKING``):

    service.cli → service.server / service.pipeline / service.bench → api, service.files → ecq

``ecq`` imports only the standard library and sortedcontainers, and has no import
circle; ``ecq`` and ``api`` never import ``service``; the web framework, Spark and the
command-line toolkit each stay in the one room that needs them.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP = ("ecq", "api", "service", "deploy")
FIRST_PARTY = {"ecq", "api", "service"}

# Each room and the first-party rooms it may import (besides itself). A module belongs to
# the longest room name that prefixes it.
ALLOWED: dict[str, set[str]] = {
    "ecq": set(),
    "api": {"ecq"},
    "service": set(),  # service/__init__.py: a docstring
    "service.files": {"ecq"},
    "service.server": {"ecq", "api"},
    "service.pipeline": {"ecq", "api", "service.files"},
    "service.bench": {"ecq", "api", "service.server", "service.files"},
    "service.cli": {"ecq", "api", "service.files", "service.server", "service.pipeline", "service.bench"},
    "deploy": {"service.cli"},
}
# Inside the engine: its sub-packages and top modules, grouped by the SCEMon paper's
# concepts (docs/architecture.md, "The engine's modules"), and what each may import
# besides itself. Read at the same granularity: a module belongs to the longest name here
# that prefixes it.
ENGINE_ALLOWED: dict[str, set[str]] = {
    "ecq": {"ecq.engine", "ecq.errors", "ecq.event", "ecq.match"},  # ecq/__init__.py: the public API
    "ecq.errors": set(),
    # The language asks ecq.kernel.select (which imports nothing of the engine) for the
    # compiled lexer, as the event and match classes ask it for their base classes.
    "ecq.language": {"ecq.errors", "ecq.kernel"},
    "ecq.event": {"ecq.errors", "ecq.kernel"},
    "ecq.match": {"ecq.event", "ecq.kernel"},
    "ecq.compiler": {"ecq.errors", "ecq.language"},
    "ecq.time": {"ecq.errors", "ecq.event", "ecq.match"},
    "ecq.structures": {"ecq.errors", "ecq.event", "ecq.language", "ecq.compiler", "ecq.time"},
    "ecq.matching": {"ecq.errors", "ecq.event", "ecq.match", "ecq.compiler", "ecq.time", "ecq.structures"},
    "ecq.kernel": {
        "ecq.errors", "ecq.event", "ecq.match", "ecq.compiler", "ecq.time", "ecq.structures", "ecq.matching",
    },
    "ecq.network": {
        "ecq.errors", "ecq.event", "ecq.match", "ecq.language", "ecq.compiler", "ecq.time", "ecq.structures",
        "ecq.matching", "ecq.kernel",
    },
    "ecq.ops": {"ecq.event", "ecq.match", "ecq.matching"},
    "ecq.engine": {
        "ecq.errors", "ecq.event", "ecq.match", "ecq.language", "ecq.compiler", "ecq.time", "ecq.structures",
        "ecq.matching", "ecq.kernel", "ecq.network", "ecq.ops",
    },
    "ecq.evaluation": {
        "ecq.errors", "ecq.event", "ecq.match", "ecq.language", "ecq.compiler", "ecq.time", "ecq.structures",
        "ecq.matching", "ecq.kernel", "ecq.network", "ecq.ops", "ecq.engine",
    },
}
# Third-party packages that belong to one room (a module prefix) or a few.
CONFINED: dict[str, tuple[str, ...]] = {
    "fastapi": ("service.server",),
    "starlette": ("service.server",),
    "uvicorn": ("service.server",),
    "pyspark": ("service.pipeline", "api.spark_sink"),
    "typer": ("service.cli",),
}
# Besides the standard library: sortedcontainers, and what Cython's own declarations bring
# into the compiled kernel (ecq/kernel/_*.pyx).
ENGINE_EXTRA = {"sortedcontainers"}
CYTHON = {"cython", "cpython", "libc"}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, "service.cli.app"
    target: str  # what it imports, "service.server.main"
    where: str  # "service/cli/app.py:12"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_in(path: Path, text: str | None = None) -> Iterator[Import]:
    """Every import of a Python file, relative ones resolved to absolute names."""
    source = path.read_text() if text is None else text
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    where = path.relative_to(ROOT)
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, f"{where}:{node.lineno}")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            # `from service.server import main` imports service.server.main.
            for alias in node.names:
                yield Import(
                    module, f"{target}.{alias.name}" if node.level == 0 else target, f"{where}:{node.lineno}"
                )


def pyx_imports(path: Path) -> Iterator[Import]:
    """The imports of a Cython file, read line by line (``ast`` cannot parse it)."""
    pattern = re.compile(r"^\s*(?:from\s+([\w.]+)\s+c?import|c?import\s+([\w.]+))")
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        found = pattern.match(line)
        if found:
            target = found.group(1) or found.group(2)
            yield Import(module_name(path), target, f"{path.relative_to(ROOT)}:{lineno}")


def all_imports() -> list[Import]:
    found: list[Import] = []
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*.py")):
            found.extend(imports_in(path))
        for path in sorted((ROOT / top).rglob("*.pyx")):
            found.extend(pyx_imports(path))
    return found


def room_of(name: str) -> str | None:
    """The room of a first-party module name, or None for a third-party one."""
    rooms = [room for room in ALLOWED if name == room or name.startswith(room + ".")]
    return max(rooms, key=len) if rooms else None


def wrong_arrows(found: list[Import]) -> list[str]:
    wrong = []
    for imp in found:
        source = room_of(imp.module)
        target = room_of(imp.target)
        assert source is not None, imp
        if target is None or target == source:
            continue
        # Importing a package's __init__ on the way down (`service.server` from service.cli).
        if any(room.startswith(imp.target + ".") for room in ALLOWED[source] | {source}):
            continue
        if target not in ALLOWED[source]:
            wrong.append(f"{imp.where}: {source} imports {imp.target}")
    return wrong


def misplaced_third_party(found: list[Import]) -> list[str]:
    wrong = []
    for imp in found:
        owners = CONFINED.get(imp.target.split(".")[0])
        if owners is not None and not any(
            imp.module == owner or imp.module.startswith(owner + ".") for owner in owners
        ):
            wrong.append(f"{imp.where}: {imp.module} imports {imp.target} (only {', '.join(owners)} may)")
    return wrong


@pytest.fixture(scope="module")
def found() -> list[Import]:
    return all_imports()


def test_every_room_is_there_and_read(found: list[Import]) -> None:
    """The check reads every room: a room renamed or emptied would pass vacuously."""
    seen = {room_of(imp.module) for imp in found}
    assert seen >= set(ALLOWED) - {"service"}, set(ALLOWED) - seen
    first_party = [imp for imp in found if room_of(imp.target) not in (None, room_of(imp.module))]
    assert len(first_party) > 100


def test_imports_point_one_way(found: list[Import]) -> None:
    assert wrong_arrows(found) == []


def test_frameworks_stay_in_their_rooms(found: list[Import]) -> None:
    assert misplaced_third_party(found) == []


def test_a_wrong_arrow_is_caught() -> None:
    """The checker itself: an upward import, a relative one and a framework out of its
    room are each reported."""
    fake = [
        *imports_in(ROOT / "api" / "client.py", "from service.cli.app import app\n"),
        *imports_in(ROOT / "service" / "server" / "host.py", "from ..pipeline import job\n"),
        *imports_in(ROOT / "service" / "bench" / "figures.py", "def f():\n    import typer\n"),
    ]
    assert len(wrong_arrows(fake)) == 2
    assert len(misplaced_third_party(fake)) == 1


def engine_part(name: str) -> str | None:
    parts = [part for part in ENGINE_ALLOWED if name == part or name.startswith(part + ".")]
    return max(parts, key=len) if parts else None


def wrong_engine_arrows(found: list[Import]) -> list[str]:
    wrong = []
    for imp in found:
        source, target = engine_part(imp.module), engine_part(imp.target)
        if source is None or target is None or source == target or target == "ecq":
            continue
        if target not in ENGINE_ALLOWED[source]:
            wrong.append(f"{imp.where}: {source} imports {imp.target}")
    return wrong


def test_every_engine_part_is_there_and_read(found: list[Import]) -> None:
    """Each part of the engine exists and is read: a part renamed or emptied would
    pass vacuously."""
    seen = {engine_part(imp.module) for imp in found}
    assert seen >= set(ENGINE_ALLOWED) - {"ecq.errors"}, set(ENGINE_ALLOWED) - seen
    assert all((ROOT / part.replace(".", "/")).is_dir() or (ROOT / (part.replace(".", "/") + ".py")).is_file()
               for part in ENGINE_ALLOWED)


def test_engine_parts_import_one_way(found: list[Import]) -> None:
    assert wrong_engine_arrows(found) == []


def test_a_wrong_engine_arrow_is_caught() -> None:
    fake = [
        *imports_in(ROOT / "ecq" / "structures" / "siq.py", "from ecq.matching.assembly import by_recency\n"),
        *imports_in(ROOT / "ecq" / "time" / "horizon.py", "from ..network import Network\n"),
        *imports_in(ROOT / "ecq" / "matching" / "composite.py", "from ecq.structures.siq import SIQ\n"),
    ]
    assert len(wrong_engine_arrows(fake)) == 2


def test_engine_imports_only_stdlib_and_sortedcontainers(found: list[Import]) -> None:
    allowed = set(sys.stdlib_module_names) | ENGINE_EXTRA | CYTHON | {"ecq"}
    foreign = [
        imp for imp in found if room_of(imp.module) == "ecq" and imp.target.split(".")[0] not in allowed
    ]
    assert foreign == []


def test_engine_has_no_import_circle(found: list[Import]) -> None:
    """Not even under ``TYPE_CHECKING``: a module that reads another's types and is read
    back by it is one module, or a third is missing."""
    # The compiled kernel's modules (.pyx) are modules too.
    modules = {module_name(path) for suffix in ("*.py", "*.pyx") for path in (ROOT / "ecq").rglob(suffix)}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for imp in found:
        owners = [m for m in modules if imp.target == m or imp.target.startswith(m + ".")]
        target = max(owners, key=len) if owners else "ecq"
        if imp.module in modules and target not in ("ecq", imp.module):
            graph[imp.module].add(target)
    assert sum(len(targets) for targets in graph.values()) > 50
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (circle := visit(nxt)) is not None:
                return circle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            circle = visit(start)
            assert circle is None, " -> ".join(circle)


# Importing the engine for real, too: catches what no import statement shows.
PROBE = """
import importlib, pkgutil, sys
package = importlib.import_module(sys.argv[1])
for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
    importlib.import_module(info.name)
print(" ".join(sorted({name.split(".")[0] for name in sys.modules})))
"""


def imported_by(package: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, package], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


def test_importing_the_engine_loads_only_stdlib_and_sortedcontainers() -> None:
    # Cython-built extensions register `cython_runtime` themselves.
    allowed = {"ecq", "__main__", "cython_runtime"} | ENGINE_EXTRA
    foreign = imported_by("ecq") - set(sys.stdlib_module_names) - allowed
    assert not {name for name in foreign if not name.startswith("_")}, foreign
    assert "service" not in imported_by("api")
