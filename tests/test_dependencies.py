"""The dependency rules of DESIGN.md: the engine needs only the standard library and
sortedcontainers, and neither ``ecq`` nor ``api`` reaches into ``service``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Print the top-level packages that importing every module of `package` pulls in.
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


# Every Cython-built extension (ecq._speedups) registers this module itself: Cython is
# needed to build the extension, not to run it.
CYTHON_RUNTIME = {"cython_runtime"}


def test_engine_imports_only_stdlib_and_sortedcontainers() -> None:
    allowed = {"ecq", "sortedcontainers", "__main__"} | CYTHON_RUNTIME
    foreign = imported_by("ecq") - set(sys.stdlib_module_names) - allowed
    assert not {name for name in foreign if not name.startswith("_")}, foreign


def test_engine_and_api_never_import_service() -> None:
    assert "service" not in imported_by("ecq")
    assert "service" not in imported_by("api")
