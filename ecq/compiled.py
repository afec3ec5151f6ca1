"""Whether the compiled extension (``ecq._speedups``) is to be used: the one switch
that ``ecq.accel`` (the engine's functions) and ``ecq.match`` (the ``Match`` class)
both read, so that they never disagree."""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["load"]


def load() -> ModuleType | None:
    """``ecq._speedups``, or None when ``SCEMON_PURE`` is set (and not "0") or the
    extension is not built. It imports no ``ecq`` module that needs ``Match``."""
    if os.environ.get("SCEMON_PURE", "") not in ("", "0"):
        return None
    try:
        from ecq import _speedups  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _speedups  # type: ignore[no-any-return]
