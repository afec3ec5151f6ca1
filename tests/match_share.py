"""Property tests that cannot pass vacuously.

A property such as "the engine's matches equal the reference's" holds trivially on an
example where neither finds a match, and a generator that drifts into producing no
matches at all would leave every such test green. So each property test says, with
:func:`min_share`, which share of its examples must produce matches, and its body
reports each example with :func:`record`; after the run (every example hypothesis
tried) the share is checked.

:func:`record` also makes the number of matches hypothesis's ``target``: after its
first random examples, hypothesis steers towards examples with more matches. Measured
on the engine's scenarios, that lifts the share of examples with matches from about a
fifth to a half or more, without narrowing what the generators can produce.

    @min_share(0.3)
    @settings(...)
    @given(scenarios())
    def test_engine_equals_reference(ops):
        expected = reference.evaluate(ops)
        record(expected)
        assert engine_run(ops) == expected

``record`` also tells hypothesis (``event``), so ``pytest --hypothesis-show-statistics``
shows the share of each run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sized
from dataclasses import dataclass
from typing import Any, TypeVar

from hypothesis import event, target

__all__ = ["Share", "min_share", "record"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Share:
    """Examples seen and examples that produced matches, over one test's run."""

    name: str
    minimum: float
    examples: int = 0
    matched: int = 0

    def check(self) -> None:
        assert self.examples, f"{self.name}: no example recorded a result"
        share = self.matched / self.examples
        assert share >= self.minimum, (
            f"{self.name}: {self.matched} of {self.examples} examples produced matches "
            f"({share:.0%}), fewer than {self.minimum:.0%}: the generator has drifted"
        )


_running: list[Share] = []


def record(matches: Sized) -> None:
    """Count this example; it produced matches when ``matches`` is non-empty."""
    assert _running, "record() outside a test decorated with min_share()"
    produced = bool(matches)
    target(float(len(matches)), label="matches")
    share = _running[-1]
    share.examples += 1
    share.matched += produced
    event("produced matches" if produced else "produced no match")


def min_share(minimum: float) -> Callable[[F], F]:
    """Fail the test when fewer than ``minimum`` of its examples produced matches (put
    it above ``@settings`` and ``@given``)."""

    def decorate(test: F) -> F:
        @functools.wraps(test)
        def run(*args: Any, **kwargs: Any) -> None:
            share = Share(test.__name__, minimum)
            _running.append(share)
            try:
                test(*args, **kwargs)
            finally:
                _running.pop()
            share.check()

        return run  # type: ignore[return-value]

    return decorate
