"""The compiled kernel's query bitsets (64-bit words in its own memory) against the
Python ints the network describes queries with: conversions both ways through public
API only, at any width, and the operations the kernel uses."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ecq.kernel.select import compiled_module, status

pytestmark = pytest.mark.skipif(not status().compiled, reason=f"{status().reason}")


def _bits() -> Any:
    module = compiled_module("_bitset")
    assert module is not None
    return module.Bits


# Widths around word boundaries, and beyond 10,000 queries.
WIDTHS = [0, 1, 2, 63, 64, 65, 127, 128, 129, 1000, 4095, 4096, 4097, 10_000, 10_001, 20_031, 65_536]


@pytest.mark.parametrize("width", WIDTHS)
def test_round_trip_at_every_width(width: int) -> None:
    bits = _bits()
    rng = random.Random(width)
    values = {0, (1 << width) - 1 if width else 0, 1 << max(width - 1, 0)}
    values |= {rng.getrandbits(width) for _ in range(5)} if width else set()
    # Sparse sets, as most of the engine's are: a few queries out of thousands.
    values.add(sum(1 << rng.randrange(width) for _ in range(3)) if width else 0)
    for x in values:
        b = bits.from_int(x)
        assert b.to_int() == x
        assert b.words == (x.bit_length() + 63) // 64  # trailing zero words trimmed
        assert all((k in b) == bool(x >> k & 1) for k in range(0, max(width, 1) + 70, 7))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**12_000), st.integers(0, 2**12_000))
def test_operations_are_the_ints_operations(a: int, b: int) -> None:
    bits = _bits()
    x, y = bits.from_int(a), bits.from_int(b)
    assert (x & y).to_int() == a & b
    assert (x | y).to_int() == a | b
    assert (x & y) == bits.from_int(a & b) and (x | y) != bits.from_int((a | b) + 1)


def test_only_non_negative_ints_are_bitsets() -> None:
    bits = _bits()
    with pytest.raises(ValueError):
        bits.from_int(-1)
    with pytest.raises(ValueError):
        bits.from_int(-(1 << 200))
    with pytest.raises(TypeError):
        bits.from_int(1.0)
    with pytest.raises(TypeError):
        bits.from_int("1")
