"""Which kernel runs, and why: the one place that imports the compiled modules
(ecq/kernel/_*.pyx). It imports nothing else of the engine: ``ecq.event`` and
``ecq.match`` ask it for their base classes while they are being imported, and
``ecq.language.lexer`` for the compiled lexer (``ecq.kernel.make`` makes kernels,
readers and writers from what it loads).

The compiled kernel is used when it is built and loads, unless ``SCEMON_PURE`` is set
(to anything but "0") or a network asks for the pure one (``Engine(compiled=False)``,
or an ablation level other than "summary", which only the pure kernel has). When it
is not used, ``status()`` says why: ``make install``, ``scemon replay`` and ``scemon
serve`` print it, and ``/v1/stats`` shows the kernel in use.

The event and match classes follow the same switch for the whole process
(``ecq.event.Event`` is a subclass of the compiled event struct, ``ecq.match.Match`` the
compiled class), so that an event or a match is one class whichever kernel a network
runs; the pure kernel works on them as on the pure classes.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from pathlib import Path
from types import ModuleType

__all__ = ["KernelStatus", "status", "event_base", "compiled_match", "compiled_module", "PURE_ENV", "SUMMARY"]

PURE_ENV = "SCEMON_PURE"
# The only ablation level the compiled kernel implements (ecq.network.LEVELS).
SUMMARY = "summary"
# What setup.py writes when it could not build the compiled kernel for this interpreter.
_BUILD_REPORT = (
    Path(__file__).resolve().parents[2] / "build" / f"compiled-kernel-{sys.implementation.cache_tag}.txt"
)


@dataclass(frozen=True)
class KernelStatus:
    """The kernel networks run by default: ``kind`` is ``"compiled"`` or ``"pure"``,
    ``reason`` says why it is pure (None when compiled)."""

    kind: str
    reason: str | None = None

    @property
    def compiled(self) -> bool:
        return self.kind == "compiled"

    def warning(self) -> str | None:
        """The one line a command prints when it runs the pure kernel, else None."""
        if self.compiled:
            return None
        return f"warning: running the pure-Python kernel of the engine, several times slower ({self.reason})"


def _turned_off() -> bool:
    return os.environ.get(PURE_ENV, "") not in ("", "0")


@cache
def _load(name: str) -> tuple[ModuleType | None, str | None]:
    """``ecq.kernel.<name>`` and None, or None and why it did not load."""
    if _turned_off():
        return None, f"{PURE_ENV} is set"
    try:
        return import_module(f"ecq.kernel.{name}"), None
    except ImportError as err:
        reason = f"the compiled kernel is not built ({err})"
        if _BUILD_REPORT.exists():
            reason += "; its build failed: " + _BUILD_REPORT.read_text().strip().splitlines()[0]
        else:
            reason += "; run make install"
        return None, reason


def status() -> KernelStatus:
    """The kernel networks run by default, and why."""
    module, reason = _load("_kernel")
    return KernelStatus("compiled") if module is not None else KernelStatus("pure", reason)


def compiled_module(name: str) -> ModuleType | None:
    """A compiled module of the kernel (``_bitset``, ``_events``, ...), or None when the
    compiled kernel is off or not built: what tests of its parts use."""
    return _load(name)[0]


def event_base() -> type | None:
    """The compiled event struct that ``ecq.event.Event`` derives from, or None (then it
    derives from a pure class with the same slots). Reads only ``_events``: it is asked
    while ``ecq.event`` is being imported."""
    module = _load("_events")[0]
    return None if module is None else module.EventBase  # type: ignore[no-any-return]


def compiled_match() -> type | None:
    """The compiled ``Match`` class, or None (then ``ecq.match.Match`` is pure)."""
    module = _load("_events")[0]
    return None if module is None else module.Match  # type: ignore[no-any-return]
