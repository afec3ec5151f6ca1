"""The kernel of a network, and the event reader and match writer: compiled when
``ecq.kernel.select`` loads the compiled kernel, else pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ecq.event import Event
from ecq.kernel.select import SUMMARY, compiled_module, status
from ecq.match import Match, write_block, write_lines

if TYPE_CHECKING:
    from ecq.kernel._events import EventReader
    from ecq.kernel._kernel import CompiledKernel
    from ecq.kernel.interface import Kernel, NetworkView
    from ecq.kernel.pure import PureKernel

__all__ = [
    "make_kernel",
    "event_reader",
    "column_reader",
    "jsonl_reader",
    "key_views",
    "match_writer",
    "block_writer",
    "lines_writer",
]

# Matches a compiled block writer writes in one call (~1-3 ms here).
BLOCK_CHUNK = 2048

# (matches, first seq, dumps) -> (the JSON array text, where each match starts in it).
BlockWriter = Callable[[list[Match], int, Callable[[Any], str]], tuple[str, list[int]]]

# (matches, dumps) -> their JSON Lines, UTF-8: see ``ecq.match.write_lines``.
LinesWriter = Callable[[list[Match], Callable[[Any], str]], bytes]

# (srcs, types, starts, ends, attrs texts, probs, ids, loads) -> the events, or None at
# the first row that is not plainly valid: see ``EventReader.columns``.
ColumnReader = Callable[
    [
        list[Any],
        list[Any],
        list[Any],
        list[Any] | None,
        list[Any] | None,
        list[Any] | None,
        list[Any] | None,
        Callable[[str], Any],
    ],
    list[Event] | None,
]


def make_kernel(network: NetworkView, level: str, compiled: bool | None) -> Kernel:
    """The kernel of one network: compiled by default when built and ``level`` is
    "summary"; ``compiled=False`` forces the pure one, ``compiled=True`` fails with the
    reason when the compiled one cannot run."""
    if compiled is False:
        return _pure()(network, level)
    module = compiled_module("_kernel")
    reason = status().reason
    if level != SUMMARY:
        reason = f"the compiled kernel implements level {SUMMARY!r} only, not {level!r}"
        module = None
    if module is None:
        if compiled:
            raise ValueError(f"the compiled kernel cannot run: {reason}")
        return _pure()(network, level)
    # Typed through _kernel.pyi: mypy holds the compiled kernel to the interface too.
    compiled_kernel: type[CompiledKernel] = module.CompiledKernel
    kernel: Kernel = compiled_kernel(network)
    return kernel


def _pure() -> type[PureKernel]:
    # Imported when a network takes it: where the compiled kernel runs, the pure one
    # (and the structures only it uses) is start-up time no run needs.
    from ecq.kernel.pure import PureKernel

    return PureKernel


def event_reader() -> Callable[[Any, str | None], Event]:
    """``Event.from_dict``, or its compiled twin (one per reader: it shares class names
    among the events it reads). Well-formed dicts are checked and built natively,
    anything else goes to ``Event.from_dict``, which names the mistake."""
    module = compiled_module("_events")
    if module is None:
        return Event.from_dict
    reader: Callable[[Any, str | None], Event] = module.EventReader(Event)
    return reader


def column_reader() -> ColumnReader | None:
    """The compiled reader of a batch's columns (one per batch: it shares class names
    among the events it reads), or None when the kernel is not compiled."""
    module = compiled_module("_events")
    if module is None:
        return None
    reader: ColumnReader = module.EventReader(Event).columns
    return reader


def jsonl_reader() -> EventReader | None:
    """The compiled reader whose ``jsonl`` reads JSON Lines text (one per file: it
    shares class names and sources among the events it reads), or None when the kernel
    is not compiled."""
    module = compiled_module("_events")
    if module is None:
        return None
    reader: EventReader = module.EventReader(Event)
    return reader


# (events, per keyed network (its key, its classes, keep src), which values this engine
# owns or None) -> per network each event's view for its key, or the event itself where
# the network does not see it, and those marks: see ``KeyViews.seen``.
KeyViewer = Callable[
    [list[Event], list[tuple[tuple[str, ...], Any, bool]], Callable[[tuple[str, ...], Any], bool] | None],
    list[tuple[list[Event], bytes]],
]


def key_views() -> KeyViewer | None:
    """The compiled maker of a batch's views for partition keys (what
    ``ecq.partitions.key_value`` and ``view`` make per event and key, an event a key's
    network does not see given as itself and marked), or None when the kernel is not
    compiled."""
    module = compiled_module("_events")
    if module is None:
        return None
    from ecq.partitions import FIELDS, Typed

    viewer: KeyViewer = module.KeyViews(Event, Typed, FIELDS).seen
    return viewer


def match_writer() -> Callable[[Match], dict[str, Any]]:
    """``Match.to_dict``, or its compiled twin."""
    module = compiled_module("_events")
    if module is None:
        return Match.to_dict
    writer: Callable[[Match], dict[str, Any]] = module.write_match
    return writer


def block_writer() -> BlockWriter:
    """``ecq.match.write_block``, or its compiled twin (the same text, written natively)."""
    module = compiled_module("_events")
    if module is None:
        return write_block
    text_of: Callable[[Callable[[Any], str], int], Any] = module.BlockText

    def write(matches: list[Match], first: int, dumps: Callable[[Any], str]) -> tuple[str, list[int]]:
        text = text_of(dumps, len(matches))
        # In chunks, from here: between two calls the interpreter may hand its lock to
        # another thread (a server's HTTP loop), which one long native call would keep
        # waiting for the whole block (100,000s of matches: a few 100 ms).
        for lo in range(0, len(matches), BLOCK_CHUNK):
            text.add(matches, lo, min(lo + BLOCK_CHUNK, len(matches)), first + lo)
        written: tuple[str, list[int]] = text.finish()
        return written

    return write


def lines_writer() -> LinesWriter:
    """``ecq.match.write_lines`` (what ``scemon replay`` writes), or its compiled twin:
    ``BlockText`` writing JSON Lines natively, no dict per match."""
    module = compiled_module("_events")
    if module is None:
        return write_lines
    text_of: Callable[..., Any] = module.BlockText

    def native(matches: list[Match], dumps: Callable[[Any], str]) -> bytes:
        text = text_of(dumps, len(matches), lines=True)
        text.add(matches, 0, len(matches), 0)
        written: bytes = text.finish_lines()
        return written

    return native
