"""scemon's engine: many pattern queries evaluated at once in one shared network of
event-centric composable queues (SCEMon, DEBS'11). Pure, synchronous, deterministic."""

from ecq.engine import Engine
from ecq.errors import (
    DuplicateQueryError,
    EventError,
    ParseError,
    QueryError,
    ScemonError,
    SemanticError,
    UnknownQueryError,
)
from ecq.event import Event
from ecq.match import Match

__all__ = [
    "Engine",
    "Event",
    "Match",
    "ScemonError",
    "QueryError",
    "ParseError",
    "SemanticError",
    "DuplicateQueryError",
    "UnknownQueryError",
    "EventError",
]
