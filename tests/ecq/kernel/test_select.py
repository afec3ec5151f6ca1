"""Which kernel runs, and that it never runs the slow one silently: ``status()`` and
``python -m ecq.kernel`` say why the kernel is pure (turned off, or not built), the
tests of the compiled kernel skip with that reason, and ``SCEMON_PURE=1`` gives the pure
kernel, events and matches."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ecq.engine import Engine
from ecq.kernel.select import status

ROOT = Path(__file__).resolve().parents[3]

# Installed as sitecustomize in a child process: the compiled modules do not load, as
# where their build failed (the reason then names the failure, as a real one does:
# "... its build failed: CompileError: ...").
BLOCK = """
import sys

class _NotBuilt:
    def find_spec(self, name, path=None, target=None):
        if name.startswith("ecq.kernel._") and not name.endswith("__"):
            raise ImportError(f"No module named {name!r}; its build failed: CompileError: no compiler")
        return None

sys.meta_path.insert(0, _NotBuilt())
"""


def _run(args: list[str], env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def _not_built(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "sitecustomize.py").write_text(BLOCK)
    env = {k: v for k, v in os.environ.items() if k != "SCEMON_PURE"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    return env


def _turned_off() -> dict[str, str]:
    return dict(os.environ, SCEMON_PURE="1")


def test_the_compiled_kernel_is_built() -> None:
    """Where the compiled kernel cannot be built this skips, saying why; CI sets
    SCEMON_REQUIRE_COMPILED=1, and then it fails instead."""
    found = status()
    if not found.compiled:
        if os.environ.get("SCEMON_REQUIRE_COMPILED", "") not in ("", "0"):
            pytest.fail(f"the compiled kernel is required here: {found.reason}")
        pytest.skip(f"{found.reason}")
    assert found.reason is None and found.warning() is None
    assert Engine().network.kernel.name == "compiled"


STATUS = (
    "from ecq.kernel.select import status; from ecq.engine import Engine; import ecq.match as m, ecq.event as e; "
    "s = status(); print(s.kind); print(s.reason); print(s.warning()); print(Engine().network.kernel.name); "
    "print(m.Match is m.PyMatch, e.Event.__bases__ == (e.SlotFields,))\n"
    "try:\n    Engine(compiled=True)\nexcept ValueError as err:\n    print('refused:', err)"
)


@pytest.mark.parametrize(
    ("setting", "why"),
    [("turned_off", "SCEMON_PURE is set"), ("not_built", "the compiled kernel is not built")],
)
def test_the_pure_kernel_says_why(tmp_path: Path, setting: str, why: str) -> None:
    env = _turned_off() if setting == "turned_off" else _not_built(tmp_path)
    out = _run([sys.executable, "-c", STATUS], env)
    assert out.returncode == 0, out.stderr
    kind, reason, warning, running, classes, refused = out.stdout.splitlines()
    assert (kind, running, classes) == ("pure", "pure", "True True")
    assert reason.startswith(why)
    assert warning.startswith("warning: running the pure-Python kernel") and why in warning
    assert refused.startswith("refused: the compiled kernel cannot run: " + why)
    # What `make install` prints after installing: loud, on stderr, and not a failure.
    shown = _run([sys.executable, "-m", "ecq.kernel"], env)
    assert shown.returncode == 0
    assert "WARNING" in shown.stderr and why in shown.stderr and not shown.stdout


@pytest.mark.parametrize(
    ("setting", "why"), [("turned_off", "SCEMON_PURE is set"), ("not_built", "is not built")]
)
def test_tests_of_the_compiled_kernel_skip_with_the_reason(tmp_path: Path, setting: str, why: str) -> None:
    env = _turned_off() if setting == "turned_off" else _not_built(tmp_path)
    env.pop("SCEMON_REQUIRE_COMPILED", None)
    files = ["tests/ecq/test_accel.py", "tests/ecq/kernel/test_bitset.py", "tests/ecq/kernel/test_select.py"]
    only = "not says_why and not skip_with"  # not these tests themselves
    out = _run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-k", only, *files], env
    )
    assert out.returncode == 0, out.stdout + out.stderr
    skipped = [line for line in out.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skipped and all(why in line for line in skipped), out.stdout
    # From the summary line: the reason itself may say "build failed: CompileError".
    summary = out.stdout.strip().splitlines()[-1]
    assert " skipped" in summary and not re.search(r"\d+ (failed|errors?)\b", summary), out.stdout
