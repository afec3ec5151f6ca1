"""The guard against vacuous property tests fails when it should."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.match_share import min_share, record


def test_a_property_whose_examples_never_match_fails() -> None:
    @min_share(0.25)
    @settings(max_examples=20, database=None)
    @given(st.integers())
    def prop(n: int) -> None:
        record([])

    with pytest.raises(AssertionError, match=r"0 of 20 examples produced matches \(0%\)"):
        prop()


def test_a_property_with_enough_matching_examples_passes() -> None:
    seen: list[int] = []

    @min_share(0.25)
    @settings(max_examples=40, database=None)
    @given(st.integers(0, 3))
    def prop(n: int) -> None:
        seen.append(n)
        record(["match"] * n)

    prop()
    assert seen and any(seen)


def test_record_outside_a_guarded_test_is_a_mistake() -> None:
    with pytest.raises(AssertionError, match="outside a test decorated"):
        record([1])
