"""The optional compiled part of the shared engine, and the switch between it and the
pure-Python code.

``ecq/_speedups.pyx`` (built by ``make install`` for CPython 3.11; see setup.py) holds
the compiled event loop and test and insert phases of the summary level: extending
partial matches from a source's summary, assembling sequence matches, folding an
instance into the summary. Each gives exactly what its Python twin gives, so results
never depend on which one runs; the tests run the engine both ways
(docs/architecture.md, "The compiled part").

``SCEMON_PURE=1`` in the environment, or ``Engine(compiled=False)``, uses the Python code.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from ecq.compiled import load
from ecq.event import Event
from ecq.match import Match

__all__ = ["speedups", "available", "event_reader", "match_writer"]


speedups: ModuleType | None = load()


def available() -> bool:
    """Whether the compiled functions are built and in use by default."""
    return speedups is not None


def event_reader() -> Callable[[Any, str | None], Event]:
    """``Event.from_dict``, or its compiled twin when built (well-formed dicts are
    checked and built natively; anything else goes to ``Event.from_dict``)."""
    if speedups is not None:
        reader: Callable[[Any, str | None], Event] = speedups.event_from_dict
        return reader
    return Event.from_dict


def match_writer() -> Callable[[Match], dict[str, Any]]:
    """``Match.to_dict``, or its compiled twin when built."""
    if speedups is not None:
        writer: Callable[[Match], dict[str, Any]] = speedups.match_dict
        return writer
    return Match.to_dict
