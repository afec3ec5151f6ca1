"""The windows a class's horizon follows (``ecq.time.horizon``): the largest window of
its storing queries, however they come and go."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from ecq.time.horizon import NEG_INF, Horizon


@given(st.lists(st.tuples(st.booleans(), st.sampled_from([1.0, 2.5, 5.0, 10.0, 60.0])), max_size=40))
def test_the_window_is_the_largest_of_the_storing_queries(ops: list[tuple[bool, float]]) -> None:
    """Adding and removing windows (a removal only of one added): ``window`` is the
    largest still there, -inf when none is."""
    horizon = Horizon()
    there: Counter[float] = Counter()
    clock = 0.0
    for add, window in ops:
        clock += 1.0
        if add:
            horizon.set_windows(clock, add=window)
            there[window] += 1
        elif there[window] > 0:
            horizon.set_windows(clock, remove=window)
            there[window] -= 1
        else:
            continue
        left = [w for w, n in there.items() if n > 0]
        assert horizon.window == (max(left) if left else NEG_INF)


WINDOWS = st.sampled_from([1.0, 2.5, 5.0, 10.0, 60.0])


@given(
    st.lists(st.tuples(st.booleans(), WINDOWS), max_size=10),
    st.lists(WINDOWS, max_size=10),
    st.sampled_from([NEG_INF, 0.0, 3.0, 100.0]),
)
def test_adding_windows_at_once_is_adding_them_one_by_one(
    before: list[tuple[bool, float]], adds: list[float], at: float
) -> None:
    """``add_windows`` (a bulk registration's) leaves the horizon as ``set_windows``
    with each window in turn does, at one clock, whatever came before."""
    one, many = Horizon(), Horizon()
    there: Counter[float] = Counter()
    clock = 0.0
    for add, window in before:
        clock += 1.0
        if add:
            there[window] += 1
        elif there[window] > 0:
            there[window] -= 1
        else:
            continue
        for h in (one, many):
            h.set_windows(clock, **{"add" if add else "remove": window})
    if before:  # the clock never goes back (-inf: an engine before its first event)
        at = max(at, clock)
    for window in adds:
        one.set_windows(at, add=window)
    many.add_windows(at, adds)
    assert (many.window, many.frozen, list(many.windows.items())) == (
        one.window,
        one.frozen,
        list(one.windows.items()),
    )
