"""The compiled kernel's views of a batch for one partition key (``KeyViews``) are the
views ``ecq.partitions.key_value`` and ``view`` make in Python, field by field."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ecq.engine import _NO_ATTRS, _UNSEEN, Engine
from ecq.event import Event
from ecq.kernel.make import key_views
from ecq.kernel.select import status
from ecq.partitions import Typed

pytestmark = pytest.mark.skipif(not status().compiled, reason=f"{status().reason}")

FIELDS_OF_A_VIEW = ("src", "type", "start", "end", "attrs", "prob", "id", "arrival", "moment")
CLASSES = ("A", "B", "C")
# Attribute names, and the event fields a key may name when the attributes lack them.
NAMES = ("k", "j", "src", "type", "start")
VALUES = st.one_of(
    st.integers(-3, 3),
    st.sampled_from(["x", "y", "1"]),
    st.sampled_from([1.0, 2.5, -0.0]),
    st.booleans(),
)


@st.composite
def events(draw: Any) -> list[Event]:
    out = []
    for n in range(draw(st.integers(0, 12))):
        attrs = draw(st.dictionaries(st.sampled_from(NAMES[:3]), VALUES, max_size=3))
        start = float(draw(st.integers(0, 5)))
        src = draw(st.sampled_from(["s1", "s2", 7]))
        etype = draw(st.sampled_from((*CLASSES, "D")))
        out.append(Event(src, etype, start, start, attrs, draw(st.sampled_from([1.0, 0.5])), f"e{n}"))
    return out


def _fields(e: Event) -> tuple[Any, ...]:
    src: Any = e.src  # a view's source is the key's value, of any type
    shown = (type(src), src.value) if type(src) is Typed else src
    if type(src) is tuple:
        shown = tuple((type(v), v.value) if type(v) is Typed else v for v in src)
    return (shown, *(getattr(e, name) for name in FIELDS_OF_A_VIEW[1:]))


@settings(max_examples=300, deadline=None)
@given(
    batch=events(),
    key=st.lists(st.sampled_from(NAMES), max_size=2, unique=True).map(tuple),
    classes=st.sets(st.sampled_from(CLASSES)),
    keep=st.booleans(),
)
def test_native_views_are_the_python_views(
    batch: list[Event], key: tuple[str, ...], classes: set[str], keep: bool
) -> None:
    native = key_views()
    assert native is not None
    ecqs = dict.fromkeys(classes)
    made = native(batch, key, ecqs, keep, _UNSEEN, _NO_ATTRS)
    python = Engine()._key_views(batch, key, ecqs, keep)  # type: ignore[arg-type]
    assert [_fields(v) for v in made] == [_fields(v) for v in python]
    for v, e in zip(made, batch, strict=True):
        assert type(v) is Event and v is not e
        assert v.parts is None and v.prev is None
        # The attributes are shared, not copied, unless the source is added to them.
        assert v.attrs is e.attrs or v.attrs is _NO_ATTRS or "src" in v.attrs


def test_a_value_of_another_type_stays_apart() -> None:
    """``1``, ``1.0`` and ``True`` are three partitions (docs/semantics.md, Partitions)."""
    native = key_views()
    assert native is not None
    batch = [Event("s", "A", 0.0, 0.0, {"k": value}) for value in (1, 1.0, True)]
    made = native(batch, ("k",), {"A": None}, False, _UNSEEN, _NO_ATTRS)
    assert made[0].src == 1 and type(made[0].src) is int
    sources: list[Any] = [v.src for v in made]  # the key's values, of any type
    assert type(sources[1]) is Typed and type(sources[2]) is Typed
    assert len({v.src for v in made}) == 3
