"""Hypothesis strategies for the property tests: event streams and sets of queries in
their JSON form (``ecq.language.ast.to_json``), written by hand so that they share no
code with the engine.

- :func:`streams` -- event dicts with small integer / half-integer times (many equal
  timestamps), some interval events, a few sources, attributes ``x`` (0-4) and ``y``
  (0-2) that are sometimes missing, occasional ``prob < 1`` and occasional late (out-of-order) events.
- :func:`planted_streams` -- the same events, with some of the given queries' patterns
  acted out in them (negated components now and then, Kleene groups of several
  events), so that most examples produce matches.
- :func:`query_sets` -- Part 1 features only: sequences of 1-4 components, conjunctions
  of 2-3, disjunctions, ``ANY`` components, duplicate classes, RECENT and ALL, windows
  from 0 to large, WHERE (one-component filters, cross-component conditions,
  equivalence tests, arithmetic, NOT / IN / abs / unary minus / OR), RETURN and
  PROBABILITY.
- :func:`conditioned_sets` -- many plain sequences with conditions on single components
  of every kind the filter index takes (bounds, bound pairs, ``=``/``!=``, ``IN``, a bare
  attribute; numbers, strings and booleans), and now and then one it does not.
- :func:`query_sets_full` -- adds Part 2: negation (leading, middle, trailing, in
  conjunctions, with conditions), Kleene closure (``+``, ``^n``, ``{m,}``, aggregates),
  sub-patterns and ``@name`` references to earlier queries of the set.

Every query is valid for ``ecq.language.ast.from_json`` and for the engine's semantic
checks, and avoids the cases ``tests/reference.py`` does not cover.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "acted_out",
    "streams",
    "planted_streams",
    "query_sets",
    "query_sets_full",
    "conditioned_sets",
    "operator_sets",
    "kleene_form_sets",
    "kleene_composed_sets",
    "KLEENE_COMPOSED",
    "inner_alias_sets",
    "KLEENE_SHAPES",
    "partitioned_sets",
    "CLASSES",
    "FAMILIES",
]

J = dict[str, Any]
CLASSES = ("A", "B", "C")
WINDOWS = (0, 0.5, 1, 2, 3, 5, 5, 8, 8, 20, 20, 100)
CMP_OPS = ("=", "!=", "<", "<=", ">", ">=")
ATTRS = ("x", "y")


# ===================================================================== events


@st.composite
def _event(draw: st.DrawFn, now: float, src: int, cls: str, calm: bool = False, mixed: bool = False) -> J:
    """One event dict of class ``cls`` at source ``src`` around time ``now``: about one
    in ten late (its start before ``now``), some intervals, attributes ``x`` (0-4) and
    ``y`` (0-2) sometimes missing, now and then ``prob < 1``. ``calm``: late or
    longer than an instant a few times less often (an acted-out pattern). ``mixed``:
    also an attribute ``z`` of every kind (numbers, strings, booleans: ``1``, ``1.0``
    and ``true`` among them), sometimes missing, and ``x`` now and then a float between
    the integers."""
    start = now
    if draw(st.integers(0, 29 if calm else 9)) == 0:
        start = max(0.0, now - draw(st.sampled_from((1, 2, 5, 10))))
    durations = (0,) * 12 + (0.5, 1, 3) if calm else (0, 0, 0, 0, 0.5, 1, 3)
    duration = draw(st.sampled_from(durations))
    event: J = {"src": src, "type": cls, "start": start}
    if duration:
        event["end"] = start + duration
    attrs = {}
    for name, top in (("x", 4), ("y", 2)):
        value = draw(st.sampled_from((None, *range(top + 1))))
        if value is not None:
            attrs[name] = value
    if mixed:
        z = draw(st.sampled_from((None, 0, 1, 1.0, 1.5, 2, "a", "b", True, False)))
        if z is not None:
            attrs["z"] = z
        if "x" in attrs and draw(st.integers(0, 3)) == 0:
            attrs["x"] = attrs["x"] + 0.5
    if attrs:
        event["attrs"] = attrs
    if draw(st.integers(0, 7)) == 0:
        event["prob"] = draw(st.sampled_from((0.25, 0.5, 0.9)))
    return event


def _timed(
    draw: st.DrawFn,
    tokens: list[tuple[int, str, bool]],
    in_order: bool,
    mixed: bool = False,
    ties: bool = False,
) -> list[J]:
    """Events for ``(source, class, calm)`` tokens, times moving forward in steps of 0,
    0.5, 1 or 2 (so many timestamps are equal; ``ties``: an acted-out event, a calm
    one, as often as not at the time of the event before it, so that a blocker meets
    its neighbours' bounds exactly)."""
    now = 0.0
    out: list[J] = []
    for src, cls, calm in tokens:
        steps = (0, 0, 0, 0.5, 1, 2) if ties and calm else (0, 0.5, 0.5, 1, 1, 2)
        now += draw(st.sampled_from(steps))
        out.append(draw(_event(now, src, cls, calm, mixed)))
    if in_order:
        out.sort(key=lambda e: (e.get("end", e["start"]), e["start"]))
    return out


@st.composite
def streams(
    draw: st.DrawFn,
    classes: tuple[str, ...] = CLASSES,
    n_sources: int = 2,
    max_len: int = 12,
    in_order: bool = False,
    min_len: int = 0,
    mixed: bool = False,
) -> list[J]:
    """A list of event dicts (see ``_event`` and ``_timed``); ``in_order`` sorts the
    stream by ``(end, start)`` as the service does; ``mixed`` adds attributes of every
    kind (``_event``)."""
    n = draw(st.integers(min_len, max_len))
    tokens = [(draw(st.integers(0, n_sources - 1)), draw(st.sampled_from(classes)), False) for _ in range(n)]
    return _timed(draw, tokens, in_order, mixed)


def _acted(draw: st.DrawFn, pattern: J, named: dict[str, J], depth: int = 0, blockers: int = 4) -> list[str]:
    """The classes of events that act out ``pattern`` once, in an order that matches it:
    a sequence's positive components in order (a Kleene component one to three times
    over its minimum), one time in ``blockers`` an event of a negated component where
    it blocks, a conjunction's in any order, one component of a disjunction;
    sub-patterns and ``@name`` classes acted out in place."""
    items = pattern["items"]
    if pattern["kind"] == "or":
        return _acted_item(draw, draw(st.sampled_from(items)), named, depth)
    parts: list[list[str]] = []
    for item in items:
        if item.get("negated"):
            if draw(st.integers(0, blockers - 1)) == 0:
                parts.append(_acted_item(draw, item, named, depth))
            continue
        times = 1
        if item.get("kleene"):
            least = item["kleene"]["min"]
            most = item["kleene"].get("max")
            times = draw(st.integers(least, least + 2 if most is None else min(most, least + 2)))
        parts.extend(_acted_item(draw, item, named, depth) for _ in range(times))
    if pattern["kind"] == "and":
        parts = draw(st.permutations(parts))
    return [cls for part in parts for cls in part]


def _acted_item(draw: st.DrawFn, item: J, named: dict[str, J], depth: int) -> list[str]:
    if "sub" in item:
        return _acted(draw, item["sub"], named, depth)
    cls = draw(st.sampled_from(item["classes"]))
    if not cls.startswith("@"):
        return [cls]
    query = named.get(cls[1:])
    if query is None or depth > 3:
        return []
    return _acted(draw, query["pattern"], named, depth + 1)


@st.composite
def planted_streams(
    draw: st.DrawFn,
    queries: list[tuple[str, J]],
    classes: tuple[str, ...] = CLASSES,
    n_sources: int = 2,
    max_len: int = 14,
    in_order: bool = False,
    mixed: bool = False,
    blockers: int = 4,
    ties: bool = False,
) -> list[J]:
    """A stream in which one to three of ``queries`` are acted out (``_acted``: one time
    in ``blockers`` with a blocker where a negated component is) at one source each,
    interleaved with random events: random streams rarely hold a negation or a Kleene
    closure with its neighbours in order, and a property test is only as good as the
    share of its examples that produce matches. ``ties``: see ``_timed``."""
    named = dict(queries)
    noise = [
        (draw(st.integers(0, n_sources - 1)), draw(st.sampled_from(classes)), False)
        for _ in range(draw(st.integers(0, max_len // 2)))
    ]
    tokens = list(noise)
    for _ in range(draw(st.integers(1, 3))):
        _, query = draw(st.sampled_from(queries))
        src = draw(st.integers(0, n_sources - 1))
        at = draw(st.integers(0, len(tokens)))
        for cls in _acted(draw, query["pattern"], named, blockers=blockers):
            # Acted-out events go in order, with noise between them now and then.
            at += draw(st.sampled_from((0, 0, 1)))
            at = min(at, len(tokens))
            tokens.insert(at, (src, cls, True))
            at += 1
    return _timed(draw, tokens[: max_len + 6], in_order, mixed, ties)


# ================================================================ expressions


def _lit(value: Any) -> J:
    return {"kind": "lit", "value": value}


def _attr(ref: str, name: str) -> J:
    return {"kind": "attr", "ref": ref, "attr": name}


def _cmp(op: str, left: J, right: J) -> J:
    return {"kind": "cmp", "op": op, "left": left, "right": right}


def _refs(items: list[J], i: int) -> list[str]:
    """Every way to name component ``i``: alias, ``$xN``, unique single class."""
    out = [f"$x{i + 1}"]
    item = items[i]
    if item.get("alias"):
        out.append(item["alias"])
    classes = item.get("classes") or []
    if len(classes) == 1 and not classes[0].startswith("@"):
        holders = [j for j, it in enumerate(items) if (it.get("classes") or []) == classes]
        if holders == [i] and not any(it.get("alias") == classes[0] for it in items):
            out.append(classes[0])
    return out


@st.composite
def _ref(draw: st.DrawFn, items: list[J], i: int) -> str:
    return draw(st.sampled_from(_refs(items, i)))


@st.composite
def _one_component_condition(draw: st.DrawFn, items: list[J], i: int) -> J:
    """A condition that mentions component ``i`` only."""
    ref = draw(_ref(items, i))
    a = draw(st.sampled_from(ATTRS))
    value = draw(st.integers(0, 4))
    simple = _cmp(draw(st.sampled_from(CMP_OPS)), _attr(ref, a), _lit(value))
    kind = draw(st.integers(0, 7))
    if kind == 0:
        return {"kind": "not", "operand": simple}
    if kind == 1:
        values = draw(st.lists(st.integers(0, 4), min_size=1, max_size=3))
        return {"kind": "in", "operand": _attr(ref, a), "values": [_lit(v) for v in values]}
    if kind == 2:
        diff = {"kind": "arith", "op": "-", "left": _attr(ref, a), "right": _lit(2)}
        return _cmp("<=", {"kind": "func", "name": "abs", "args": [diff]}, _lit(value % 3))
    if kind == 3:
        return _cmp(">", {"kind": "neg", "operand": _attr(ref, a)}, _lit(-value))
    if kind == 4:
        other = _cmp(draw(st.sampled_from(CMP_OPS)), _attr(ref, "y" if a == "x" else "x"), _lit(value))
        return {"kind": "bool", "op": "or", "operands": [simple, other]}
    return simple


@st.composite
def _cross_condition(draw: st.DrawFn, items: list[J], i: int, j: int) -> J:
    """A condition that mentions components ``i`` and ``j``."""
    left = _attr(draw(_ref(items, i)), draw(st.sampled_from(ATTRS)))
    right = _attr(draw(_ref(items, j)), draw(st.sampled_from(ATTRS)))
    kind = draw(st.integers(0, 3))
    if kind == 0:
        op = draw(st.sampled_from(("+", "-", "*", "/")))
        left = {"kind": "arith", "op": op, "left": left, "right": right}
        return _cmp(draw(st.sampled_from(CMP_OPS)), left, _lit(draw(st.integers(0, 4))))
    if kind == 1:
        left = {"kind": "arith", "op": "+", "left": left, "right": _lit(draw(st.integers(-2, 2)))}
    return _cmp(draw(st.sampled_from(CMP_OPS)), left, right)


@st.composite
def _equiv(draw: st.DrawFn) -> J:
    out: J = {"kind": "equiv", "attr": draw(st.sampled_from(("x", "y", "y")))}
    if draw(st.booleans()):
        out["value"] = draw(st.integers(0, 2))
    return out


def _and(conjuncts: list[J]) -> J | None:
    if not conjuncts:
        return None
    if len(conjuncts) == 1:
        return conjuncts[0]
    return {"kind": "bool", "op": "and", "operands": conjuncts}


# ================================================================== components


@st.composite
def _class_component(draw: st.DrawFn, classes: tuple[str, ...]) -> J:
    if len(classes) >= 2 and draw(st.integers(0, 4)) == 0:
        chosen = draw(
            st.lists(st.sampled_from(classes), min_size=2, max_size=min(3, len(classes)), unique=True)
        )
        return {"kind": "component", "classes": chosen, "any": True}
    return {"kind": "component", "classes": [draw(st.sampled_from(classes))]}


def _with_aliases(draw: st.DrawFn, items: list[J]) -> list[J]:
    out = []
    for i, item in enumerate(items):
        item = dict(item)
        item.pop("alias", None)
        if draw(st.integers(0, 2)) == 0:
            item["alias"] = f"c{i}"
        out.append(item)
    return out


@st.composite
def _part1_query(draw: st.DrawFn, pool: list[J], classes: tuple[str, ...]) -> J:
    kind = draw(st.sampled_from(("seq", "seq", "seq", "and", "or")))
    n = {"seq": draw(st.integers(1, 4)), "and": draw(st.integers(2, 3)), "or": draw(st.integers(1, 3))}[kind]
    if draw(st.booleans()):
        items = pool[:n]  # a shared prefix
    else:
        items = [
            draw(st.sampled_from(pool)) if draw(st.booleans()) else draw(_class_component(classes))
            for _ in range(n)
        ]
    items = _with_aliases(draw, items)
    where = draw(_where(items, kind, negated=set(), kleene=set()))
    return draw(_finish_query(kind, items, where, kleene=set()))


@st.composite
def _where(draw: st.DrawFn, items: list[J], kind: str, negated: set[int], kleene: set[int]) -> J | None:
    """WHERE for ``items``. ``negated`` and ``kleene`` are the indexes of negated and
    Kleene components: Kleene components get per-element conditions (comparing with a
    plain positive component) and aggregates; negated ones conditions with a plain
    positive component."""
    n = len(items)
    plain = [i for i in range(n) if i not in negated and i not in kleene]
    conjuncts: list[J] = []
    for _ in range(draw(st.sampled_from((0, 0, 1, 1, 2, 3)))):
        choice = draw(st.integers(0, 5))
        if kind == "or" or choice <= 1:
            conjuncts.append(draw(_one_component_condition(items, draw(st.sampled_from(range(n))))))
        elif choice <= 3 and len(plain) >= 2:
            i, j = draw(st.lists(st.sampled_from(plain), min_size=2, max_size=2, unique=True))
            conjuncts.append(draw(_cross_condition(items, i, j)))
        elif choice == 4 and n >= 2:
            conjuncts.append(draw(_equiv()))
        elif choice == 5 and plain and (negated or kleene):
            special = draw(st.sampled_from(sorted(negated | kleene)))
            conjuncts.append(draw(_cross_condition(items, special, draw(st.sampled_from(plain)))))
        if kleene and draw(st.integers(0, 3)) == 0:
            k = draw(st.sampled_from(sorted(kleene)))
            ref = draw(_ref(items, k))
            func = draw(st.sampled_from(("count", "sum", "avg", "min", "max")))
            agg: J = {"kind": "agg", "func": func, "ref": ref}
            if func != "count":
                agg["attr"] = draw(st.sampled_from(ATTRS))
            conjuncts.append(_cmp(draw(st.sampled_from(CMP_OPS)), agg, _lit(draw(st.integers(1, 6)))))
    return _and(conjuncts)


@st.composite
def _finish_query(
    draw: st.DrawFn,
    kind: str,
    items: list[J],
    where: J | None,
    kleene: set[int],
    windows: tuple[float, ...] = WINDOWS,
) -> J:
    q: J = {
        "kind": "query",
        "pattern": {"kind": kind, "items": items},
        "mode": draw(st.sampled_from(("recent", "all"))),
    }
    needs_window = kind != "or" and len(items) >= 2
    if needs_window or draw(st.booleans()):
        q["within"] = draw(st.sampled_from(windows))
    if where is not None:
        q["where"] = where
    positives = [i for i, it in enumerate(items) if not it.get("negated")]
    if draw(st.integers(0, 3)) == 0:
        returns = []
        for _ in range(draw(st.integers(1, 3))):
            i = draw(st.sampled_from(positives))
            ref = draw(_ref(items, i))
            if i in kleene:
                expr: J = {"kind": "agg", "func": draw(st.sampled_from(("count", "sum", "max"))), "ref": ref}
                if expr["func"] != "count":
                    expr["attr"] = "x"
            elif draw(st.booleans()):
                expr = _attr(ref, draw(st.sampled_from(ATTRS)))
            else:
                expr = {"kind": "arith", "op": "*", "left": _attr(ref, "x"), "right": _lit(2)}
            item: J = {"expr": expr}
            if draw(st.booleans()):
                item["name"] = draw(st.sampled_from(("u", "v", "w")))
            returns.append(item)
        q["return"] = returns
    if draw(st.integers(0, 5)) == 0:
        q["probability"] = draw(st.sampled_from((0.0, 0.3, 0.5, 1.0)))
    return q


@st.composite
def query_sets(
    draw: st.DrawFn, classes: tuple[str, ...] = CLASSES, max_queries: int = 4
) -> list[tuple[str, J]]:
    """Part 1 queries ``q0, q1, ...`` that share classes and component prefixes."""
    pool = [draw(_class_component(classes)) for _ in range(4)]
    n = draw(st.integers(1, max_queries))
    return [(f"q{i}", draw(_part1_query(pool, classes))) for i in range(n)]


# ====================================================================== Part 2


@st.composite
def _sub_component(draw: st.DrawFn, classes: tuple[str, ...]) -> J:
    kind = draw(st.sampled_from(("seq", "and", "or")))
    n = draw(st.integers(1, 2))
    items = [draw(_class_component(classes)) for _ in range(n)]
    if kind == "seq" and n == 2 and draw(st.integers(0, 3)) == 0:
        # (A; !B; C) or (A; B; !C) inside
        neg = {"kind": "component", "classes": [draw(st.sampled_from(classes))], "negated": True}
        items.insert(draw(st.sampled_from((1, 2))), neg)
    return {"kind": "component", "sub": {"kind": kind, "items": items}}


@st.composite
def _part2_seq(draw: st.DrawFn, pool: list[J], classes: tuple[str, ...], earlier: list[str]) -> J:
    n = draw(st.sampled_from((1, 2, 2, 3, 3, 4)))
    items: list[J] = []
    for _ in range(n):
        choice = draw(st.integers(0, 9))
        if choice == 0:
            items.append(draw(_sub_component(classes)))
        elif choice == 1 and earlier:
            items.append({"kind": "component", "classes": [f"@{draw(st.sampled_from(earlier))}"]})
        elif choice <= 5:
            items.append(dict(draw(st.sampled_from(pool))))
        else:
            items.append(draw(_class_component(classes)))
    # Kleene: at most one, on a class component, never alone.
    kleene: set[int] = set()
    class_idx = [i for i, it in enumerate(items) if "classes" in it and not it["classes"][0].startswith("@")]
    if n >= 2 and class_idx and draw(st.booleans()):
        k = draw(st.sampled_from(class_idx))
        last = k == n - 1
        form = draw(st.sampled_from(("plus", "plus", "exact", "atleast")))
        if last or form == "exact":
            items[k] = {**items[k], "kleene": {"min": draw(st.sampled_from((1, 2, 2, 3))), "exact": True}}
        elif form == "plus":
            items[k] = {**items[k], "kleene": {"min": 1, "exact": False}}
        else:
            items[k] = {**items[k], "kleene": {"min": 2, "exact": False}}
        kleene.add(k)
    # Negation: insert 1-2 negated class components, never adjacent, never Kleene.
    negated: set[int] = set()
    for _ in range(draw(st.sampled_from((0, 1, 1, 2)))):
        slots = [
            p
            for p in range(len(items) + 1)
            if not (p > 0 and items[p - 1].get("negated"))
            and not (p < len(items) and items[p].get("negated"))
        ]
        if not slots:
            break
        p = draw(st.sampled_from(slots))
        comp = draw(_class_component(classes))
        comp["negated"] = True
        items.insert(p, comp)
        kleene = {i + 1 if i >= p else i for i in kleene}
    negated = {i for i, it in enumerate(items) if it.get("negated")}
    items = _with_aliases(draw, items)
    where = draw(_where(items, "seq", negated=negated, kleene=kleene))
    return draw(_finish_query("seq", items, where, kleene=kleene))


@st.composite
def _part2_query(draw: st.DrawFn, pool: list[J], classes: tuple[str, ...], earlier: list[str]) -> J:
    choice = draw(st.integers(0, 5))
    if choice == 0:
        return draw(_part1_query(pool, classes))
    if choice == 1:
        # A conjunction with a negated component, maybe a sub-pattern.
        items = [draw(_class_component(classes)) for _ in range(draw(st.integers(1, 2)))]
        if draw(st.booleans()):
            items.append(draw(_sub_component(classes)))
        neg = draw(_class_component(classes))
        neg["negated"] = True
        items.insert(draw(st.integers(0, len(items))), neg)
        items = _with_aliases(draw, items)
        negated = {i for i, it in enumerate(items) if it.get("negated")}
        where = draw(_where(items, "and", negated=negated, kleene=set()))
        return draw(_finish_query("and", items, where, kleene=set()))
    if choice == 2:
        # A disjunction over sub-patterns and classes.
        items = [draw(_sub_component(classes)), draw(_class_component(classes))]
        items = _with_aliases(draw, items)
        where = draw(_where(items, "or", negated=set(), kleene=set()))
        q = draw(_finish_query("or", items, where, kleene=set()))
        q["within"] = draw(st.sampled_from(WINDOWS))  # the sub-pattern needs one
        return q
    return draw(_part2_seq(pool, classes, earlier))


def _valid_for_reference(q: J) -> bool:
    """Sub-patterns inherit the query's window: a query without WITHIN may not hold a
    sub-pattern of two or more components."""
    if q.get("within") is not None:
        return True
    return not any("sub" in it and len(it["sub"]["items"]) >= 2 for it in q["pattern"]["items"])


@st.composite
def query_sets_full(
    draw: st.DrawFn, classes: tuple[str, ...] = CLASSES, max_queries: int = 4
) -> list[tuple[str, J]]:
    """Part 1 and Part 2 queries ``q0, q1, ...``; a query may read an earlier one's
    matches through ``@q<i>``."""
    pool = [draw(_class_component(classes)) for _ in range(4)]
    out: list[tuple[str, J]] = []
    for i in range(draw(st.integers(1, max_queries))):
        q = draw(_part2_query(pool, classes, [name for name, _ in out]).filter(_valid_for_reference))
        out.append((f"q{i}", q))
    return out


# ============================================================ conditioned sequences

# Values that collide on purpose (1, 1.0 and true; 0 and false) and equal thresholds.
BOUNDS = (-1, 0, 1, 1.0, 1.5, 2, 3, 4)
MIXED = (0, 1, 1.0, 2, "a", "b", True, False)


@st.composite
def _indexable_condition(draw: st.DrawFn, ref: str) -> list[J]:
    """Conjuncts on one component of the kinds the filter index takes: a bound on
    either side, a bound pair, ``=`` / ``!=`` on numbers, strings or booleans, ``IN``, a
    bare attribute; now and then one it cannot take (a residual)."""
    a = _attr(ref, draw(st.sampled_from(("x", "y", "z"))))
    choice = draw(st.integers(0, 9))
    if choice <= 2:
        op = draw(st.sampled_from(("<", "<=", ">", ">=")))
        value = _lit(draw(st.sampled_from(BOUNDS)))
        return [_cmp(op, a, value) if draw(st.booleans()) else _cmp(op, value, a)]
    if choice <= 4:
        lo, hi = sorted(draw(st.lists(st.sampled_from(BOUNDS), min_size=2, max_size=2)))
        first, second = draw(st.sampled_from((("<", "<"), ("<=", "<"), ("<", "<="), ("<=", "<="))))
        return [_cmp(first, _lit(lo), a), _cmp(second, a, _lit(hi))]
    if choice <= 6:
        return [_cmp(draw(st.sampled_from(("=", "!="))), a, _lit(draw(st.sampled_from(MIXED))))]
    if choice == 7:
        values = draw(st.lists(st.sampled_from(MIXED), min_size=1, max_size=3))
        return [{"kind": "in", "operand": a, "values": [_lit(v) for v in values]}]
    if choice == 8:
        return [_attr(ref, "z")]
    other = _cmp("<", _attr(ref, "y"), _lit(draw(st.sampled_from(BOUNDS))))
    return [{"kind": "bool", "op": "or", "operands": [_cmp(">", a, _lit(1)), other]}]


@st.composite
def conditioned_sets(
    draw: st.DrawFn, classes: tuple[str, ...] = CLASSES, max_queries: int = 10
) -> list[tuple[str, J]]:
    """Many plain sequences (1-3 components over few classes, so their filters share
    the classes' positions) with conditions on single components, of the kinds
    :func:`_indexable_condition` draws; RECENT and ALL."""
    out: list[tuple[str, J]] = []
    for i in range(draw(st.integers(1, max_queries))):
        n = draw(st.sampled_from((1, 2, 2, 3)))
        items = _with_aliases(draw, [draw(_class_component(classes)) for _ in range(n)])
        conjuncts: list[J] = []
        for k in range(n):
            for _ in range(draw(st.sampled_from((0, 1, 1, 2)))):
                conjuncts += draw(_indexable_condition(draw(_ref(items, k))))
        q: J = {
            "kind": "query",
            "pattern": {"kind": "seq", "items": items},
            "mode": draw(st.sampled_from(("recent", "all"))),
            "within": draw(st.sampled_from((3, 5, 8, 20, 100))),
        }
        where = _and(conjuncts)
        if where is not None:
            q["where"] = where
        out.append((f"q{i}", q))
    return out


# ============================================================ operator families

# Windows of the operator families: mostly wide enough for an acted-out pattern (a few
# events, a step of up to 2 between them), now and then too narrow.
FAMILY_WINDOWS = (1, 3, 5, 8, 8, 12, 20, 20, 100)
FAMILIES = ("conjunction", "negation-leading", "negation-middle", "negation-trailing", "kleene", "nested")


def _negated(draw: st.DrawFn, classes: tuple[str, ...]) -> J:
    comp = draw(_class_component(classes))
    comp["negated"] = True
    return comp


def _kleene_of(draw: st.DrawFn, item: J, trailing: bool) -> J:
    form = "exact" if trailing else draw(st.sampled_from(("plus", "plus", "exact", "atleast")))
    if form == "plus":
        spec = {"min": 1, "exact": False}
    elif form == "atleast":
        spec = {"min": draw(st.sampled_from((2, 3))), "exact": False}
    else:
        spec = {"min": draw(st.sampled_from((1, 2, 2, 3))), "exact": True}
    return {**item, "kleene": spec}


@st.composite
def _family_query(draw: st.DrawFn, family: str, pool: list[J], classes: tuple[str, ...]) -> J:
    """One query of an operator family (see :func:`operator_sets`)."""

    def comp() -> J:
        # Components come from a small pool, so queries share classes and prefixes
        # and a conjunction often has two components of one class.
        return dict(draw(st.sampled_from(pool))) if draw(st.booleans()) else draw(_class_component(classes))

    kind = "seq"
    kleene: set[int] = set()
    if family == "conjunction":
        kind = "and"
        items = [comp() for _ in range(draw(st.integers(2, 3)))]
        if draw(st.booleans()):
            items.insert(draw(st.integers(0, len(items))), _negated(draw, classes))
    elif family == "negation-leading":
        items = [_negated(draw, classes), *[comp() for _ in range(draw(st.integers(1, 3)))]]
    elif family == "negation-middle":
        items = [comp() for _ in range(draw(st.integers(2, 3)))]
        items.insert(draw(st.integers(1, len(items) - 1)), _negated(draw, classes))
    elif family == "negation-trailing":
        items = [*[comp() for _ in range(draw(st.integers(1, 3)))], _negated(draw, classes)]
        if len(items) >= 3 and draw(st.integers(0, 3)) == 0:
            items.insert(draw(st.integers(1, len(items) - 2)), _negated(draw, classes))
    elif family == "kleene":
        shape = draw(st.sampled_from(("middle", "middle", "leading", "trailing")))
        n = draw(st.integers(3, 4) if shape == "middle" else st.integers(2, 3))
        items = [comp() for _ in range(n)]
        k = draw(st.integers(1, n - 2)) if shape == "middle" else 0 if shape == "leading" else n - 1
        if "classes" not in items[k] or items[k]["classes"][0].startswith("@"):
            items[k] = draw(_class_component(classes))
        items[k] = _kleene_of(draw, items[k], trailing=k == n - 1)
        kleene.add(k)
        if draw(st.integers(0, 3)) == 0:
            # A negation next to the group.
            at = draw(st.sampled_from([p for p in (k, k + 1) if 0 < p < len(items) + 1]))
            items.insert(at, _negated(draw, classes))
            kleene = {i + 1 if i >= at else i for i in kleene}
    else:  # nested
        kind = draw(st.sampled_from(("seq", "seq", "and")))
        items = [comp() for _ in range(draw(st.integers(1, 2)))]
        for _ in range(draw(st.integers(1, 2))):
            items.insert(draw(st.integers(0, len(items))), draw(_sub_component(classes)))
    items = _with_aliases(draw, items)
    negated = {i for i, it in enumerate(items) if it.get("negated")}
    where = draw(_where(items, kind, negated=negated, kleene=kleene))
    return draw(_finish_query(kind, items, where, kleene=kleene, windows=FAMILY_WINDOWS))


@st.composite
def operator_sets(
    draw: st.DrawFn, family: str, classes: tuple[str, ...] = CLASSES, max_queries: int = 3
) -> list[tuple[str, J]]:
    """Queries ``q0, q1, ...`` of one operator family (:data:`FAMILIES`): conjunctions
    (same-class components, ``ANY``, a negated component; now and then a variant of an
    earlier one, :func:`_conjunction_variant`), leading, middle or trailing
    negation, Kleene closure (``+``, ``^n``, ``{m,}``; in the middle, leading or
    trailing, now and then next to a negation) or nested patterns, each with WHERE
    (one-component filters, cross-component, equivalence, blocker and element
    conditions, aggregates), RECENT or ALL, RETURN and PROBABILITY now and then."""
    pool = [draw(_class_component(classes)) for _ in range(3)]
    out: list[tuple[str, J]] = []
    for i in range(draw(st.integers(1, max_queries))):
        if family == "conjunction" and out and draw(st.booleans()):
            # Another query with the same components and conditions (the kernel shares
            # the evaluation of equal conditions across events between them).
            q = draw(_conjunction_variant(draw(st.sampled_from(out))[1]))
        else:
            q = draw(_family_query(family, pool, classes))
        out.append((f"q{i}", q))
    return out


@st.composite
def _conjunction_variant(draw: st.DrawFn, q: J) -> J:
    """``q`` (a conjunction) with its components in another order, ``$xN`` references
    renumbered to match, and another mode, window or probability clause."""
    items = q["pattern"]["items"]
    order = draw(st.permutations(range(len(items))))
    new_index = {old: new for new, old in enumerate(order)}

    def renumber(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: renumber(v) for k, v in node.items()}
            ref = out.get("ref")
            if isinstance(ref, str) and ref.startswith("$x"):
                out["ref"] = f"$x{new_index[int(ref[2:]) - 1] + 1}"
            return out
        if isinstance(node, list):
            return [renumber(x) for x in node]
        return node

    variant = renumber(q)
    variant["pattern"] = {**q["pattern"], "items": [items[k] for k in order]}
    variant["mode"] = draw(st.sampled_from(("recent", "all")))
    variant["within"] = draw(st.sampled_from(FAMILY_WINDOWS))
    if draw(st.booleans()):
        variant.pop("probability", None)
    return variant


# ====================================================== Kleene closure as users write it

# Where the Kleene component stands (docs/semantics.md §6): alone (``FAIL{5}``), last
# (``SEQ(LOGIN, FAIL{3,})``), in the middle or first with an upper bound (``B{2,4}``).
KLEENE_SHAPES = ("alone", "trailing", "middle", "leading")


def _kleene_form(draw: st.DrawFn, bounded: bool) -> J:
    """A Kleene spec: ``B^n``, ``B+``, ``B{m,}``, ``B{m,n}`` or ``B{,n}`` (``bounded``:
    one with an upper bound)."""
    form = "bounded" if bounded else draw(st.sampled_from(("exact", "plus", "atleast", "bounded", "bounded")))
    if form == "exact":
        return {"min": draw(st.sampled_from((1, 2, 3))), "exact": True}
    if form == "plus":
        return {"min": 1, "exact": False}
    if form == "atleast":
        return {"min": draw(st.sampled_from((2, 3))), "exact": False}
    least = draw(st.sampled_from((1, 1, 2, 3)))
    return {"min": least, "exact": False, "max": least + draw(st.sampled_from((1, 2)))}


@st.composite
def _kleene_form_query(draw: st.DrawFn, shape: str, classes: tuple[str, ...]) -> J:
    """One query of ``shape`` (:data:`KLEENE_SHAPES`) with its Kleene component's form,
    now and then a negation next to the group (a trailing ``!B`` of the group's own
    class among them: the maximal group once its window closes)."""
    kleene_item = {**draw(_class_component(classes)), "kleene": {}}
    if shape == "alone":
        items = [kleene_item]
        k = 0
    elif shape == "trailing":
        items = [draw(_class_component(classes)) for _ in range(draw(st.integers(1, 2)))] + [kleene_item]
        k = len(items) - 1
    elif shape == "middle":
        items = [draw(_class_component(classes)), kleene_item, draw(_class_component(classes))]
        k = 1
    else:
        items = [kleene_item, *[draw(_class_component(classes)) for _ in range(draw(st.integers(1, 2)))]]
        k = 0
    items[k]["kleene"] = _kleene_form(draw, bounded=shape in ("middle", "leading"))
    kleene = {k}
    if shape in ("alone", "trailing") and draw(st.integers(0, 2)) == 0:
        # A trailing negation: of the group's own class now and then.
        neg = _negated(draw, classes)
        if draw(st.booleans()):
            neg["classes"] = list(items[k]["classes"])
        items.append(neg)
    elif shape in ("middle", "alone") and draw(st.integers(0, 4)) == 0:
        items.insert(k, _negated(draw, classes))
        kleene = {k + 1}
    items = _with_aliases(draw, items)
    negated = {i for i, it in enumerate(items) if it.get("negated")}
    where = draw(_where(items, "seq", negated=negated, kleene=kleene))
    extra = draw(_run_conditions(items, next(iter(kleene)), negated))
    if extra:
        where = _and(([where] if where is not None else []) + extra)
    q = draw(_finish_query("seq", items, where, kleene=kleene, windows=FAMILY_WINDOWS))
    q["within"] = draw(st.sampled_from(FAMILY_WINDOWS))
    if draw(st.integers(0, 3)) == 0:
        ref = draw(_ref(items, next(iter(kleene))))
        q.setdefault("return", []).append(
            {
                "expr": {
                    "kind": "agg",
                    "func": draw(st.sampled_from(("first", "last"))),
                    "ref": ref,
                    "attr": "x",
                }
            }
        )
    return q


@st.composite
def _run_conditions(draw: st.DrawFn, items: list[J], k: int, negated: set[int]) -> list[J]:
    """Conditions on a Kleene run: an iteration condition (``b[i].x > b[i-1].x``, now and
    then against a plain component too), the first / last element (``b[1].x``,
    ``b[last].x``) and the numeric functions ``floor ceil round int``."""
    out: list[J] = []
    ref = draw(_ref(items, k))
    plain = [i for i in range(len(items)) if i != k and i not in negated]
    if draw(st.integers(0, 2)) == 0:
        attr = draw(st.sampled_from(ATTRS))
        here, prev = _attr(ref, attr), {"kind": "prev", "ref": ref, "attr": attr}
        op = draw(st.sampled_from(("<", "<=", ">", ">=", "!=")))
        if plain and draw(st.integers(0, 2)) == 0:
            other = _attr(draw(_ref(items, draw(st.sampled_from(plain)))), "x")
            diff = {"kind": "arith", "op": "-", "left": here, "right": prev}
            out.append(_cmp(op, diff, other))
        else:
            out.append(_cmp(op, here, prev))
    if draw(st.integers(0, 4)) == 0:
        func = draw(st.sampled_from(("first", "last")))
        agg = {"kind": "agg", "func": func, "ref": ref, "attr": draw(st.sampled_from(ATTRS))}
        right = _attr(draw(_ref(items, draw(st.sampled_from(plain)))), "x") if plain else _lit(2)
        out.append(_cmp(draw(st.sampled_from(CMP_OPS)), agg, right))
    if draw(st.integers(0, 4)) == 0:
        i = draw(st.sampled_from(plain)) if plain else k
        arg = {"kind": "arith", "op": "/", "left": _attr(draw(_ref(items, i)), "x"), "right": _lit(2)}
        if i == k:
            arg = {"kind": "agg", "func": "avg", "ref": ref, "attr": "x"}
        call: J = {
            "kind": "func",
            "name": draw(st.sampled_from(("floor", "ceil", "round", "int"))),
            "args": [arg],
        }
        out.append(_cmp(draw(st.sampled_from(CMP_OPS)), call, _lit(draw(st.integers(0, 2)))))
    return out


@st.composite
def kleene_form_sets(
    draw: st.DrawFn, classes: tuple[str, ...] = CLASSES, max_queries: int = 3
) -> list[tuple[str, J]]:
    """Queries ``q0, q1, ...`` with a Kleene component alone, last, in the middle or
    first, in every form (``B^n``, ``B+``, ``B{m,}``, ``B{m,n}``, ``B{,n}``; middle and
    leading ones with an upper bound, the other forms there being covered by
    :func:`operator_sets`), with WHERE (element conditions, aggregates, conditions with
    the neighbours), RECENT or ALL, RETURN and PROBABILITY now and then."""
    out: list[tuple[str, J]] = []
    for i in range(draw(st.integers(1, max_queries))):
        shape = draw(st.sampled_from(KLEENE_SHAPES))
        out.append((f"q{i}", draw(_kleene_form_query(shape, classes))))
    return out


# Kleene closure composed (docs/semantics.md §6): two groups side by side, a group over a
# sub-pattern (a chain), groups inside a conjunction.
KLEENE_COMPOSED = ("side", "chain", "conjunction")


@st.composite
def _composed_query(draw: st.DrawFn, shape: str, classes: tuple[str, ...]) -> J:
    """One query of ``shape`` (:data:`KLEENE_COMPOSED`), its groups in every form, with
    WHERE (element conditions, aggregates, a run condition on one group), RECENT or ALL."""
    if shape == "side":
        first, second = draw(st.lists(st.sampled_from(classes), min_size=2, max_size=2, unique=True))
        groups = [
            {"kind": "component", "classes": [first], "kleene": _kleene_form(draw, bounded=False)},
            {"kind": "component", "classes": [second], "kleene": _kleene_form(draw, bounded=False)},
        ]
        where_at = draw(st.sampled_from(("middle", "leading", "trailing")))
        plain = [draw(_class_component(classes)) for _ in range(2 if where_at == "middle" else 1)]
        if where_at == "middle":
            items = [plain[0], *groups, plain[1]]
        elif where_at == "leading":
            items = [*groups, plain[0]]
        else:
            items = [plain[0], *groups]
        kind = "seq"
    elif shape == "chain":
        sub = draw(_sub_component(classes))
        sub["kleene"] = _kleene_form(draw, bounded=False)
        where_at = draw(st.sampled_from(("middle", "trailing", "alone")))
        if where_at == "middle":
            items = [draw(_class_component(classes)), sub, draw(_class_component(classes))]
        elif where_at == "trailing":
            items = [draw(_class_component(classes)), sub]
        else:
            items = [sub]
        kind = "seq"
    else:
        n_groups = draw(st.sampled_from((1, 1, 2)))
        group_classes = draw(
            st.lists(st.sampled_from(classes), min_size=n_groups, max_size=n_groups, unique=True)
        )
        rest = tuple(c for c in classes if c not in group_classes)
        items = [
            {"kind": "component", "classes": [c], "kleene": _kleene_form(draw, bounded=False)}
            for c in group_classes
        ]
        for _ in range(draw(st.sampled_from((2 - n_groups, 2 - n_groups, 1)))):
            items.insert(draw(st.integers(0, len(items))), draw(_class_component(rest)))
        if draw(st.integers(0, 4)) == 0:
            items.append(_negated(draw, classes))
        kind = "and"
    items = _with_aliases(draw, items)
    negated = {i for i, it in enumerate(items) if it.get("negated")}
    kleene = {i for i, it in enumerate(items) if it.get("kleene")}
    # Conditions on a third of the queries, so that most acted-out streams match.
    where = (
        draw(_where(items, kind, negated=negated, kleene=kleene)) if draw(st.integers(0, 2)) == 0 else None
    )
    k = draw(st.sampled_from(sorted(kleene)))
    if shape != "chain" and draw(st.integers(0, 2)) == 0:
        extra = draw(_run_conditions(items, k, negated | (kleene - {k})))
        if extra:
            where = _and(([where] if where is not None else []) + extra)
    q = draw(_finish_query(kind, items, where, kleene=kleene, windows=FAMILY_WINDOWS))
    # Wide enough, mostly, for a stream acting out several groups.
    q["within"] = draw(st.sampled_from((3, 8, 12, 20, 20, 100)))
    return q


@st.composite
def kleene_composed_sets(
    draw: st.DrawFn,
    classes: tuple[str, ...] = CLASSES,
    max_queries: int = 3,
    shapes: tuple[str, ...] = KLEENE_COMPOSED,
) -> list[tuple[str, J]]:
    """Queries ``q0, q1, ...`` of ``shapes`` (:data:`KLEENE_COMPOSED`)."""
    return [
        (f"q{i}", draw(_composed_query(draw(st.sampled_from(shapes)), classes)))
        for i in range(draw(st.integers(1, max_queries)))
    ]


# ==================================================== conditions inside sub-patterns


@st.composite
def _inner_alias_query(draw: st.DrawFn, classes: tuple[str, ...], n: int) -> J:
    """``SEQ(A a, AND(B b, C c))``-like queries whose WHERE and RETURN read the
    components inside the sub-pattern by alias (docs/semantics.md §8)."""
    inner_kind = draw(st.sampled_from(("seq", "and")))
    inner = [{**draw(_class_component(classes)), "alias": f"i{n}{k}"} for k in range(2)]
    if inner_kind == "seq" and draw(st.integers(0, 3)) == 0:
        inner.insert(1, _negated(draw, classes))
    outer = [{**draw(_class_component(classes)), "alias": f"o{n}"}]
    sub = {"kind": "component", "sub": {"kind": inner_kind, "items": inner}}
    items = [sub, *outer] if draw(st.booleans()) else [*outer, sub]
    kind = draw(st.sampled_from(("seq", "seq", "and")))
    conjuncts = []
    for _ in range(draw(st.integers(1, 2))):
        left = _attr(f"i{n}{draw(st.integers(0, 1))}", draw(st.sampled_from(ATTRS)))
        right = _attr(f"o{n}", "x") if draw(st.booleans()) else _lit(draw(st.integers(0, 3)))
        if draw(st.integers(0, 3)) == 0:
            left = {"kind": "func", "name": draw(st.sampled_from(("floor", "round"))), "args": [left]}
        conjuncts.append(_cmp(draw(st.sampled_from(CMP_OPS)), left, right))
    q: J = {
        "kind": "query",
        "pattern": {"kind": kind, "items": items},
        "mode": draw(st.sampled_from(("recent", "all"))),
        "within": draw(st.sampled_from(FAMILY_WINDOWS)),
        "where": _and(conjuncts),
    }
    if draw(st.booleans()):
        q["return"] = [{"expr": _attr(f"i{n}{draw(st.integers(0, 1))}", "x"), "name": "inner"}]
    return q


@st.composite
def inner_alias_sets(
    draw: st.DrawFn, classes: tuple[str, ...] = CLASSES, max_queries: int = 3
) -> list[tuple[str, J]]:
    """Queries whose conditions read components inside their sub-patterns by alias."""
    return [(f"q{i}", draw(_inner_alias_query(classes, i))) for i in range(draw(st.integers(1, max_queries)))]


# ============================================================ selection and consumption

# One policy element per entry: the test of each family is run with each of them (and
# other elements drawn at random beside it): docs/semantics.md §11-§12.
POLICIES = (
    "chronicle",
    "skip-till-next-match",
    "partition-contiguity",
    "strict-contiguity",
    "exclusive",
    "past-last-row",
    "next-row",
    "first",
    "last",
    "select",
)
# The AFTER MATCH SKIP forms among them.
_SKIP_POLICIES = ("past-last-row", "next-row", "first", "last")


def policy_allowed(q: J) -> bool:
    """Whether a policy may go on ``q`` (no trailing negation, sub-pattern or ``@name``)."""
    items = q["pattern"]["items"]
    if any("sub" in it or any(c.startswith("@") for c in it.get("classes", ())) for it in items):
        return False
    return not (q["pattern"]["kind"] == "seq" and items[-1].get("negated"))


def _partitions_by_equiv(q: J) -> bool:
    """Whether ``q``'s WHERE has an ``[attr]`` conjunct that partitions it (no PARTITION
    BY clause, an attribute other than src or symbol, no value)."""
    if q.get("partition") is not None:
        return False
    todo, conjuncts = [q.get("where")], []
    while todo:
        e = todo.pop()
        if e is None:
            continue
        if e.get("kind") == "bool" and e.get("op") == "and":
            todo.extend(e["operands"])
        else:
            conjuncts.append(e)
    return any(
        c.get("kind") == "equiv" and c.get("value") is None and c.get("attr") not in ("src", "symbol")
        for c in conjuncts
    )


@st.composite
def with_policy(draw: st.DrawFn, q: J, policy: str) -> J:
    """``q`` with ``policy`` and, now and then, other policy elements beside it; ``q``
    unchanged when it cannot have one (:func:`policy_allowed`)."""
    if not policy_allowed(q):
        return q
    out = dict(q)
    if _partitions_by_equiv(q):
        # A policy needs the partition by src (docs/semantics.md §11): written out, the
        # query's [attr] tests stay conditions, as they were before partitions.
        out["partition"] = ["src"]
    out["mode"] = (
        "chronicle" if policy == "chronicle" else draw(st.sampled_from(("recent", "all", "chronicle")))
    )
    strategies = POLICIES[1:4]
    if policy in strategies:
        out["strategy"] = policy
    elif draw(st.integers(0, 3)) == 0:
        out["strategy"] = draw(st.sampled_from(strategies))
    if policy == "exclusive" or draw(st.integers(0, 3)) == 0:
        out["consume"] = "exclusive"
    items = q["pattern"]["items"]
    positives = [i for i, it in enumerate(items) if not it.get("negated")]
    skip = policy if policy in _SKIP_POLICIES else draw(st.sampled_from((None, None, None, *_SKIP_POLICIES)))
    if skip in ("first", "last") and q["pattern"]["kind"] == "or":
        skip = "past-last-row"  # refused on a disjunction (its match binds one component)
    if skip in ("first", "last"):
        allowed = positives[1:] if skip == "first" and q["pattern"]["kind"] == "seq" else positives
        if not allowed:
            skip = "last"
            allowed = positives
        out["skip"] = {"to": skip, "var": f"$x{draw(st.sampled_from(allowed)) + 1}"}
    elif skip is not None:
        out["skip"] = {"to": skip}
    markable = [i for i in positives if not items[i].get("kleene")]
    if q["pattern"]["kind"] != "or" and markable and (policy == "select" or draw(st.integers(0, 4)) == 0):
        # Per-component selection (docs/semantics.md §11): first: / last: on some plain
        # positive components; MODE ALL is refused with it.
        marked = draw(st.lists(st.sampled_from(markable), min_size=1, max_size=len(markable), unique=True))
        new_items = list(items)
        for i in marked:
            new_items[i] = {**items[i], "select": draw(st.sampled_from(("first", "last")))}
        out["pattern"] = {**q["pattern"], "items": new_items}
        if out["mode"] == "all":
            out["mode"] = draw(st.sampled_from(("recent", "chronicle")))
    return out


# ================================================================ partitions

# Keys a query may be partitioned by: the default (no clause), the source written out,
# an attribute (x, y), two of them, and NONE. Events lack x or y now and then.
PARTITIONS: tuple[list[str] | None, ...] = (None, None, ["src"], ["x"], ["y"], ["y"], ["x", "y"], [], [])


@st.composite
def partitioned_sets(draw: st.DrawFn, base: Any) -> list[tuple[str, J]]:
    """The query sets of ``base`` with a ``partition`` drawn for each query (a query
    reading ``@q<i>`` mostly takes ``q<i>``'s, as it must to be registered)."""
    queries = draw(base)
    out: list[tuple[str, J]] = []
    keys: dict[str, Any] = {}
    for name, q in queries:
        q = dict(q)
        reads = [cls[1:] for cls in _classes_of(q["pattern"]) if cls.startswith("@")]
        key = draw(st.sampled_from(PARTITIONS))
        if reads and reads[0] in keys and draw(st.integers(0, 5)):
            key = keys[reads[0]]
        if key is not None:
            q["partition"] = list(key)
        keys[name] = key
        out.append((name, q))
    return out


def _classes_of(pattern: J) -> list[str]:
    out: list[str] = []
    for item in pattern["items"]:
        if "sub" in item:
            out.extend(_classes_of(item["sub"]))
        else:
            out.extend(item["classes"])
    return out


@st.composite
def acted_out(
    draw: st.DrawFn, queries: list[tuple[str, J]], events: list[J], unregister_odds: int = 4
) -> list[tuple[Any, ...]]:
    """The ops of a scenario: most of ``queries`` registered up front and the rest
    mid-stream, ``events`` acted out, clock advances now and then, an unregistration
    once in a while (one chance in ``unregister_odds`` where one is drawn), then the
    clock flushed."""
    split = draw(st.integers(max(1, len(queries) - 1), len(queries)))
    ops: list[tuple[Any, ...]] = [("register", name, q) for name, q in queries[:split]]
    late = list(queries[split:])
    for ev in events:
        action = draw(st.sampled_from(["event"] * 8 + ["register", "time", "unregister"]))
        if action == "register" and late:
            name, q = late.pop(0)
            ops.append(("register", name, q))
        elif action == "time":
            ops.append(("time", ev["start"] + draw(st.sampled_from([0.5, 2, 10]))))
        elif action == "unregister" and draw(st.integers(0, unregister_odds - 1)) == 0:
            names = [op[1] for op in ops if op[0] == "register"]
            gone = {op[1] for op in ops if op[0] == "unregister"}
            left = [n for n in names if n not in gone]
            if left:
                ops.append(("unregister", draw(st.sampled_from(left))))
        ops.append(("event", ev))
    ops.append(("time", math.inf))
    return ops
