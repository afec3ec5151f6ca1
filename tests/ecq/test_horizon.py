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
