# Events and matches of the compiled kernel (ecq/kernel/_events.pyx), for mypy.
from collections.abc import Callable
from typing import Any

from ecq.event import Event
from ecq.match import EventRef

class EventBase:
    """The event struct; ecq.event.Event declares its fields."""

class EventReader:
    def __init__(self, cls: type[Event]) -> None: ...
    def __call__(self, data: Any, where: str | None = None) -> Event: ...
    def columns(
        self,
        srcs: list[Any],
        types: list[Any],
        starts: list[Any],
        ends: list[Any] | None,
        texts: list[Any] | None,
        probs: list[Any] | None,
        ids: list[Any] | None,
        loads: Callable[[str], Any],
    ) -> list[Event] | None: ...
    def jsonl(
        self,
        data: bytes,
        at: int,
        index: int,
        loads: Callable[[bytes], Any],
        out: list[Event],
        progress: Callable[[int], object] | None,
        indexes: list[int] | None = None,
    ) -> tuple[int, int]: ...

class KeyViews:
    def __init__(self, cls: type[Event], typed: Callable[[Any], Any], fields: frozenset[str]) -> None: ...
    def seen(
        self,
        events: list[Event],
        keys: list[tuple[tuple[str, ...], Any, bool]],
        owns: Callable[[tuple[str, ...], Any], bool] | None = None,
    ) -> list[tuple[list[Event], bytes]]: ...

class Match:
    query: str
    src: str | int
    start: float
    end: float
    events: list[EventRef]
    attrs: dict[str, Any]
    prob: float
    seq: int
    trigger: int
    def __init__(
        self,
        query: str,
        src: str | int,
        start: float,
        end: float,
        events: list[EventRef],
        attrs: dict[str, Any] | None = None,
        prob: float = 1.0,
        seq: int = -1,
        trigger: int = -1,
    ) -> None: ...
    def event_ids(self, name: Callable[[Event], Any] | None = None) -> list[Any]: ...
    def arrivals(self) -> list[Any]: ...
    def to_dict(self, name: Callable[[Event], Any] | None = None) -> dict[str, Any]: ...

def write_match(m: Any) -> dict[str, Any]: ...

class BlockText:
    def __init__(self, dumps: Callable[[Any], str], expected: int = 0, lines: bool = False) -> None: ...
    def add(self, matches: list[Any], lo: int, hi: int, first: int) -> None: ...
    def finish(self) -> tuple[str, list[int]]: ...
    def finish_lines(self) -> bytes: ...
