# The compiled conjunctions (ecq/kernel/_conjunction.pyx), for mypy.
from typing import Any

from ecq.event import Event
from ecq.kernel.interface import NetworkView
from ecq.matching.candidate import Cand
from ecq.structures.ecq import ECQ
from ecq.structures.qstate import QState

class Conjunctions:
    assembled: int
    handed: int
    evaluated: int
    shared: int
    def __init__(self, network: NetworkView, classes: object) -> None: ...
    def queries_changed(self) -> None: ...
    def sources(self) -> dict[Any, dict[str, tuple[float, int]]]: ...
    def note(self, e: Event, cls: str, own: int) -> None: ...
    def prune(self, clock: float) -> None: ...
    def complete(
        self, ecq: ECQ, e: Event, own: int, hclock: float, completed: list[tuple[QState, Cand]]
    ) -> int: ...
