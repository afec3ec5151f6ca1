"""The compiled kernel's views of a batch for one partition key (``KeyViews``) are the
views ``ecq.partitions.key_value`` and ``view`` make in Python, field by field; an event
the network does not see is given as itself and marked, standing for its placeholder."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ecq.engine import Engine
from ecq.event import Event
from ecq.kernel.make import key_views
from ecq.kernel.select import status
from ecq.partitions import UNSEEN, Typed, placeholder

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


def _short(key: tuple[str, ...], value: Any) -> bool:
    return len(repr(value)) < 4


@settings(max_examples=300, deadline=None)
@given(
    batch=events(),
    key=st.lists(st.sampled_from(NAMES), max_size=2, unique=True).map(tuple),
    classes=st.sets(st.sampled_from(CLASSES)),
    keep=st.booleans(),
    sharded=st.booleans(),
)
def test_native_views_are_the_python_views(
    batch: list[Event], key: tuple[str, ...], classes: set[str], keep: bool, sharded: bool
) -> None:
    native = key_views()
    assert native is not None
    ecqs = dict.fromkeys(classes)
    engine = Engine()
    # A shard's engine owns some values of the key (here: those whose text is short).
    engine.owns = _short if sharded else None
    # Made with another key's views in the same pass (the NONE key's, of every class).
    ((made, unseen), (every, none_unseen)) = native(
        batch, [(key, ecqs, keep), ((), dict.fromkeys(CLASSES), False)], engine.owns
    )
    python = engine._key_views(batch, key, ecqs, keep)  # type: ignore[arg-type]
    assert [v is e for v, e in zip(every, batch, strict=True)] == [bool(mark) for mark in none_unseen]
    assert type(unseen) is bytes and len(unseen) == len(made) == len(batch)
    # Where the network does not see the event (Python's placeholder), the event itself.
    assert [bool(mark) for mark in unseen] == [v.type == UNSEEN for v in python]
    assert [_fields(placeholder(v) if mark else v) for v, mark in zip(made, unseen, strict=True)] == [
        _fields(v) for v in python
    ]
    for v, e, mark in zip(made, batch, unseen, strict=True):
        if mark:
            assert v is e
            continue
        assert type(v) is Event and v is not e
        assert v.parts is None and v.prev is None
        # The attributes are shared, not copied, unless the source is added to them.
        assert v.attrs is e.attrs or "src" in v.attrs


def test_a_value_of_another_type_stays_apart() -> None:
    """``1``, ``1.0`` and ``True`` are three partitions (docs/semantics.md, Partitions)."""
    native = key_views()
    assert native is not None
    batch = [Event("s", "A", 0.0, 0.0, {"k": value}) for value in (1, 1.0, True)]
    ((made, unseen),) = native(batch, [(("k",), {"A": None}, False)], None)
    assert unseen == bytes(3)
    assert made[0].src == 1 and type(made[0].src) is int
    sources: list[Any] = [v.src for v in made]  # the key's values, of any type
    assert type(sources[1]) is Typed and type(sources[2]) is Typed
    assert len({v.src for v in made}) == 3


# Trailing negation: a plain sequence's matches wait in the kernel, a Kleene closure's in
# the network; both are released by the clock alone.
WAITING = {
    "plain": "SEQ(A a, B b, !C c) WITHIN 10 PARTITION BY k",
    "kleene": "SEQ(A a, B+ b[], !C c) WITHIN 10 PARTITION BY k",
}


def _run(keyed: str, compiled: bool, batched: bool) -> list[tuple[Any, ...]]:
    engine = Engine(compiled=compiled)
    engine.register(keyed, WAITING[keyed])
    engine.register("source", "SEQ(D d, D e) WITHIN 100")
    stream = [
        Event("s1", "A", 0.0, 0.0, {"k": 1}),
        Event("s1", "B", 1.0, 1.0, {"k": 1}),
        Event("s2", "C", 2.0, 2.0, {"j": 1}),  # no key: not seen, does not block
        Event("s2", "D", 5.0, 5.0, {}),  # another network's class: not seen
        Event("s2", "D", 30.0, 30.0, {}),  # passes the deadline while not seen
        Event("s1", "A", 31.0, 31.0, {"k": 2}),
        Event("s1", "B", 32.0, 32.0, {"k": 2}),
        Event("s2", "D", 50.0, 50.0, {}),
    ]
    for n, e in enumerate(stream):
        e.id = f"e{n}"
    out = engine.process(stream) if batched else [m for e in stream for m in engine.process([e])]
    return [(m.query, m.src, m.seq, m.trigger, m.event_ids()) for m in out]


@pytest.mark.parametrize("keyed", sorted(WAITING))
def test_events_a_network_does_not_see_release_its_matches_as_placeholders_do(keyed: str) -> None:
    """An event given to a keyed network as itself (marked unseen) moves its clock: the
    kernel's waiting matches and the network's own are released at that op, as the
    pure kernel's placeholder views release them, in one batch or event by event."""
    want = _run(keyed, compiled=False, batched=False)
    assert [(q, src, trigger) for q, src, _, trigger, _ in want if q == keyed] == [
        (keyed, 1, 4),
        (keyed, 2, 7),
    ]
    assert _run(keyed, compiled=True, batched=True) == want
    assert _run(keyed, compiled=False, batched=True) == want
    assert _run(keyed, compiled=True, batched=False) == want
