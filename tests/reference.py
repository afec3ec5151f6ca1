"""A naive reference evaluator of scemon's match semantics: the oracle the engine is
checked against.

It is written straight from the contract (docs/semantics.md §1–§10) and
``docs/semantics.md`` (the project's choices), and shares no code with ``ecq``: queries
arrive in their JSON form (``ecq.language.ast.to_json``) and are read here as plain
dicts. Clarity over speed: at every moment it enumerates every combination of the events
seen so far (``itertools.product``), then filters by every rule. Nothing is incremental
except what the semantics itself makes history-dependent (MODE RECENT choices feeding
sub-patterns, pending trailing negations, the drop horizon).

API::

    evaluate(ops) -> list[match dict]
    evaluate_queries(queries, events) -> list[match dict]

``ops`` items: ``("register", name, query_json)``, ``("unregister", name)``,
``("event", event_dict)``, ``("time", t)``. Events get arrival indexes 0, 1, 2, ... in
the order of their ``"event"`` ops. A match is ``{"query", "src", "start", "end",
"events", "attrs", "prob", "trigger"}`` where ``events`` holds arrival indexes in
component order (a Kleene component gives a list, a sub-pattern or ``@name`` component
gives the list of its own entries) and ``trigger`` is the arrival index of the event that
completed the match (see choice 9 for matches emitted by the clock).

Part 1 (sections "Part 1" below): single-class and ``ANY(...)`` components in sequences,
conjunctions and disjunctions, WHERE, MODE RECENT / ALL, windows, probability, the drop
horizon, registration and unregistration. Part 2 (sections "Part 2"): negation, Kleene
closure, nesting (sub-patterns and ``@name``).

Invalid queries raise ``ValueError``; valid queries this oracle does not cover raise
``NotImplementedError`` (listed at the end of the Choices).

Choices
=======

Where docs/semantics.md leaves room, this evaluator (and the engine)
does the following.

1. RETURN names. An item's output name is its ``name``; without one, an attribute
   reference ``ref.attr`` is named ``attr``; any other expression is named ``expr<i>``,
   ``i`` its 1-based position in RETURN. A later item overwrites an earlier one of the
   same name. An item whose value is missing (missing attribute, arithmetic on a
   non-number, division by zero, a plain reference to a Kleene or negated component) is
   left out of ``attrs``.
2. Values. Arithmetic whose result is not a finite number gives a missing value. The
   truth of a non-boolean operand of AND/OR/NOT is false, a missing one is false (true
   inside a negated component's conditions). ``[symbol]`` and ``[src]`` without a value
   are no-ops; with a value they are ordinary equivalence tests. An equivalence test
   reads every event of every bound component: each event of a Kleene group, and the
   events inside a sub-pattern instance (flattened); an ``@name`` instance is read as one
   event whose attributes are that query's RETURN attributes. Inside a negated
   component's conditions a missing value in an equivalence test is skipped.
   Aggregates: ``count`` is the group size; ``sum``/``avg``/``min``/``max`` need every
   element's attribute to be a number (else missing); ``sum`` adds in arrival order
   starting from integer 0, ``avg`` is ``sum / count``.
3. References. A reference is resolved as an alias, then ``$xN``, then a class name that
   exactly one component has as its single class. WHERE and RETURN name top-level
   components, and components inside sub-patterns by alias (unique in the query): a
   path, the top component then the position among the positive components at each
   level, read through the sub-pattern instance's parts (not a negated component, nor
   one of a disjunction). A sub-pattern has no conditions of its own.
4. Filters. A pattern with one component, positive and not Kleene, is a filter: every
   arriving instance of its class that passes WHERE is a match, whatever WITHIN says.
5. Drop horizon. It applies to every instance used by a match except the instances that
   arrive at the moment the match completes (the completing event; for a conjunction,
   the members arriving then): a late event can still complete a match with stored
   instances that are above their own class's horizon. It applies to Kleene elements and
   to blockers too. A class is "stored" by a sequence or conjunction node (at any depth)
   with two or more components (negated ones included), or by a Kleene component
   alone, with the query's window; a
   sub-pattern's instances form the derived class "sub-pattern + mode + window" and an
   ``@name`` component the class ``@name``. Filters and disjunctions store nothing.
6. Probability. The product, starting from 1.0, of the positive instances' ``prob`` in
   component order (a Kleene group's events in arrival order; a derived instance
   contributes its own ``prob``), then ``(1 - prob)`` of each blocker, negated
   components in component order, the blockers of one component in arrival order. The
   bound (``>= p``, or ``> 0`` without a PROBABILITY clause) is part of being a match:
   MODE RECENT chooses among the candidates that meet it. ``PROBABILITY >= 0`` keeps
   matches of probability 0.
7. Disjunction. An arriving instance binds the first component, in pattern order, whose
   classes contain its class and whose WHERE conjuncts pass; one match per instance.
   A conjunct that mentions no component applies to every component.
8. Conjunction. The assignment of a set of events to components is chosen by the
   same-class rule and the WHERE conjuncts that mention no negated component; negation
   is then checked on that assignment only (a blocked set is not retried with another
   assignment). RECENT groups candidates by their latest-arriving member.
9. Moments and the order of emission. Every op is a moment. An ``event`` op first
   advances the clock to ``max(clock, end)``, then (phase 0) emits every pending trailing
   negation match whose deadline the clock now exceeds -- checking blockers and the drop
   horizon as they were just before this op, i.e. against the events that arrived
   before it --, then updates the drop horizons, then (phase 1) processes the event. A
   ``time`` op does the first three steps. Matches of one op are emitted phase 0 first,
   then phase 1; within a phase by the query's registration order, then by ``events``
   compared component by component (an arrival index sorts before a list; lists compare
   lexicographically). A match emitted in phase 0 has ``trigger`` = the number of events
   that had arrived before the op (the index the next event gets), so it sorts before
   the matches completed by that next event.
10. Trailing negation. A candidate is complete when its last positive event arrives; it
    is then chosen (RECENT: among the candidates completed by that event that pass the
    conditions, the other negations and the probability bound computed without the
    trailing blockers) and becomes pending with deadline ``match.start + T``. A blocker
    must have arrived after the last positive event and before the moment the clock
    first exceeds the deadline (so a candidate completed when the clock is already past
    its deadline is emitted at once, unblocked). The probability bound is checked again
    with the trailing factors. Unregistering a query discards its pending matches.
11. Nesting. A sub-pattern instance arrives at the moment its match is made (the moment
    of its last event, or the clock moment for a sub-pattern with trailing negation) and
    is ordered by (moment, entries, class). Sequences need strictly increasing moments,
    so two instances made at the same moment are never in sequence. A sub-pattern's
    instances for a query are made only of events the query sees. ``@name`` refers to
    the matches emitted by the query registered under that name (any registration), and
    a query sees the ``@name`` instances emitted after its own registration, whatever the
    age of their events. The primitive events of one match (flattened through groups and
    sub-patterns) are pairwise distinct, and a blocker shares no primitive event with the
    match. A sub-pattern instance has no attributes, only the fields (``type`` is its
    derived class); an ``@name`` instance's attributes are that match's RETURN
    attributes, its ``type`` is ``@name`` and its ``prob`` the match's. A query that
    depends on itself through ``@name`` is rejected.
12. Kleene closure. A group's elements are the qualifying instances between the group's
    neighbours (each element after every event of the left neighbour and before every
    event of the right one, in time and arrival); they need no order among themselves. A
    leading group keeps the elements within the window of the last positive event; a
    trailing ``B^n`` keeps the elements within the window of the first positive event and
    its groups end with the completing event. A conjunct that reads ``b.attr`` of a
    Kleene ``b`` (or an equivalence test) decides which elements qualify; a conjunct with
    an aggregate is checked on the whole group. Next to a negated component, a Kleene
    group acts as a neighbour through all its events. Match ``start``/``end`` are the
    earliest start of the first positive component's events / the latest end of the last
    one's.
    ``B{m,n}`` is the whole qualifying group when it holds m to n events. A group with
    no right neighbour (last in a sequence, or alone) ends with the event arriving now:
    its elements arrived up to now (alone: with ``x.end <= e.end`` and ``e.end - x.start
    <= T``, ``e`` the arriving event), ``B^n`` the run of the n latest, the other forms
    all of them.
    Two groups side by side are each bounded by their nearest plain neighbours and must
    be in sequence order; only the last positive component's group ends now. Over a
    sub-pattern or an ``@name`` class a group is a chain built in arrival order (each
    instance joins when it follows the last joined). In a conjunction, a match is made
    for the instance ``e`` arriving now that is its latest instance: every instance in
    the window that ends with ``e``, groups made there as lone groups are (``B^n`` the
    run of the n latest); RECENT compares the plain instances other than ``e``.

13. Selection and consumption policies (docs/semantics.md §11-§12). A top-level query
    with ``MODE CHRONICLE``, a ``strategy``, ``consume: exclusive`` or a ``skip`` gets
    its candidates of an op as MODE ALL would, keeps those whose chain (positive
    events, Kleene elements included, by arrival) passes the strategy (the events
    between two chain events read from every event seen), orders them (RECENT: most
    recent first, ties in emission order; CHRONICLE and ALL: emission order) and takes
    each that avoids the query's consumed arrival indexes and its source's floor,
    consuming as it goes; RECENT and CHRONICLE stop at the first taken. Refused
    (``ValueError``): a policy with a trailing negation, a sub-pattern or an ``@name``
    component; ``TO FIRST``/``TO LAST`` in a disjunction, of a negated or unknown
    component, and ``TO FIRST`` of a sequence's first positive component.

13. Partitions. A query's key is its ``partition`` (a list of attribute names, ``[]`` for
    NONE); without one, the attributes of the WHERE conjuncts ``[attr]`` (no value,
    ``[symbol]``/``[src]`` left out) in the order written; without those, ``["src"]``.
    An event's partition value for a key is the tuple of its values of the key's
    attributes (looked up as conditions read them: ``attrs`` first, then the field);
    for one attribute the value itself, for NONE ``None``. An event lacking one of them
    is not seen by the query (not as a component, blocker or Kleene element). The
    instances of one match (and its blockers) have equal partition values, compared by
    type and value (``1``, ``1.0``, ``true`` and ``"1"`` differ); the match's ``src`` is
    that value (a tuple for several attributes). Sub-pattern and ``@name`` instances
    carry their match's value; a query reads ``@name`` only from a query with the same
    key (registration is refused otherwise; a query registered later under that name
    with another key feeds it nothing).

Not covered (``NotImplementedError``): a
leading and a trailing Kleene component in one sequence, a WHERE conjunct that reads two
Kleene components, or a Kleene and a negated component, or ``b.attr`` and an aggregate.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["evaluate", "evaluate_queries", "return_name"]

INF = math.inf
FALLBACK_FIELDS = ("start", "end", "src", "type", "prob")
Moment = tuple[int, int]  # (op index, phase 0 = clock / 1 = event)


class _Missing:
    """The value of an attribute an event lacks (and of arithmetic that fails)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


# ===================================================================== instances


def _norm(entry: Any) -> tuple[Any, ...]:
    """A total order on ``events`` entries: an arrival index sorts before a list; lists
    compare element by element."""
    if isinstance(entry, list):
        return (1, tuple(_norm(x) for x in entry))
    return (0, entry)


class Inst:
    """An event instance: a primitive event, a sub-pattern's match, or an ``@name``
    query's match. ``pos`` is the moment it arrived; ``entry`` its form in ``events``;
    ``prims`` the arrival indexes of the primitive events in it."""

    def __init__(
        self,
        src: Any,
        type: str,
        start: float,
        end: float,
        attrs: dict[str, Any],
        prob: float,
        pos: Moment,
        entry: Any,
        prims: frozenset[int],
        equiv_events: list[Inst] | None = None,
    ) -> None:
        self.src = src
        self.type = type
        self.start = start
        self.end = end
        self.attrs = attrs
        self.prob = prob
        self.pos = pos
        self.entry = entry
        self.prims = prims
        # The partition value the query reading this instance groups by (choice 13):
        # the source, a view's key value, a derived instance's match value.
        self.part: Any = src
        # Views of a primitive event for each non-default key (None: lacks an attribute).
        self.views: dict[tuple[str, ...], Inst | None] = {}
        # The key of the query whose match an ``@name`` instance is.
        self.producer_key: tuple[str, ...] | None = None
        # The events an equivalence test reads (choice 2).
        self.equiv_events: list[Inst] = equiv_events if equiv_events is not None else [self]
        # A sub-pattern instance: its positive components' bindings in component order
        # (what a reference to a component inside it reads, choice 3).
        self.parts: list[Bound] | None = None
        # Arrival order (choice 11); unique for primitive events.
        self.key = (pos, _norm(entry), type)

    def __repr__(self) -> str:
        return f"Inst({self.type}, {self.entry!r}, src={self.src!r}, [{self.start:g},{self.end:g}])"


Bound = Any  # an Inst, or a list of Inst for a Kleene group


def _as_list(bound: Bound) -> list[Inst]:
    return bound if isinstance(bound, list) else [bound]


def _entry(bound: Bound) -> Any:
    return [x.entry for x in bound] if isinstance(bound, list) else bound.entry


def _lookup(inst: Inst, attr: str) -> Any:
    """docs/semantics.md: ``attrs`` first, then the event's own field for the names
    ``start end src type prob``."""
    if attr in inst.attrs:
        return inst.attrs[attr]
    if attr in FALLBACK_FIELDS:
        return getattr(inst, attr)
    return MISSING


def _before(left: Bound, right: Bound) -> bool:
    """Sequence order: every event of ``left`` arrived before, and ends no later than the
    start of, every event of ``right`` (``<=`` in time, arrival breaks ties)."""
    return all(x.pos < y.pos and x.end <= y.start for x in _as_list(left) for y in _as_list(right))


# =================================================================== expressions


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _compare(op: str, left: Any, right: Any, negated: bool) -> bool:
    """docs/semantics.md "Conditions": missing -> false (true inside a negated
    component's conditions); numbers with numbers, strings with strings, booleans with
    booleans (= and != only); any other pairing false, except != true."""
    if left is MISSING or right is MISSING:
        return negated
    if (_is_num(left) and _is_num(right)) or (isinstance(left, str) and isinstance(right, str)):
        if op == "=":
            return bool(left == right)
        if op == "!=":
            return bool(left != right)
        if op == "<":
            return bool(left < right)
        if op == "<=":
            return bool(left <= right)
        if op == ">":
            return bool(left > right)
        if op == ">=":
            return bool(left >= right)
        raise ValueError(f"unknown comparison {op!r}")
    if isinstance(left, bool) and isinstance(right, bool):
        if op == "=":
            return left == right
        if op == "!=":
            return left != right
        return False
    return op == "!="


def _arith(op: str, left: Any, right: Any) -> Any:
    if not (_is_num(left) and _is_num(right)):
        return MISSING
    if op == "+":
        result = left + right
    elif op == "-":
        result = left - right
    elif op == "*":
        result = left * right
    elif op == "/":
        if right == 0:
            return MISSING
        result = left / right
    else:
        raise ValueError(f"unknown arithmetic operator {op!r}")
    if isinstance(result, float) and not math.isfinite(result):
        return MISSING
    return result


def _truth(v: Any, negated: bool) -> bool:
    if v is MISSING:
        return negated
    return v is True


def _aggregate(func: str, group: list[Inst], attr: str | None) -> Any:
    if func == "count":
        return len(group)
    if func in ("first", "last"):  # b[1].x / b[last].x: the group's first / last element's
        if not group or attr is None:
            return MISSING
        return _lookup(group[0] if func == "first" else group[-1], attr)
    values = [_lookup(x, attr) for x in group] if attr is not None else []
    if not values or not all(_is_num(v) for v in values):
        return MISSING
    if func == "sum" or func == "avg":
        total: Any = 0
        for v in values:
            total = _arith("+", total, v)
        return total if func == "sum" else _arith("/", total, len(values))
    if func == "min":
        return min(values)
    if func == "max":
        return max(values)
    raise ValueError(f"unknown aggregate {func!r}")


@dataclass
class Env:
    """What an expression sees: component bindings (index -> Inst or Kleene group), the
    name resolver, and whether it is a negated component's condition."""

    names: dict[str, int]
    binding: dict[int, Bound]
    negated: bool = False
    prev: Inst | None = None  # b[i-1] in an iteration condition: the run's previous element


def _resolve(names: dict[str, Any], ref: str) -> Any:
    if ref not in names:
        raise ValueError(f"unknown component reference {ref!r}")
    return names[ref]


def eval_expr(e: dict[str, Any], env: Env) -> Any:
    """The value of expression ``e`` (JSON form) under ``env``; MISSING when undefined."""
    kind = e["kind"]
    if kind == "lit":
        return e["value"]
    if kind == "attr":
        target = _resolve(env.names, e["ref"])
        if isinstance(target, tuple):  # a component inside a sub-pattern: follow its path
            bound = env.binding.get(target[0])
            for p in target[1:]:
                if not isinstance(bound, Inst) or bound.parts is None:
                    return MISSING
                bound = bound.parts[p]
        else:
            bound = env.binding.get(target)
        if bound is None or isinstance(bound, list):
            return MISSING
        return _lookup(bound, e["attr"])
    if kind == "prev":
        _resolve(env.names, e["ref"])
        return MISSING if env.prev is None else _lookup(env.prev, e["attr"])
    if kind == "agg":
        bound = env.binding.get(_resolve(env.names, e["ref"]))
        if not isinstance(bound, list):
            return MISSING
        return _aggregate(e["func"], bound, e.get("attr"))
    if kind == "arith":
        return _arith(e["op"], eval_expr(e["left"], env), eval_expr(e["right"], env))
    if kind == "neg":
        v = eval_expr(e["operand"], env)
        return -v if _is_num(v) else MISSING
    if kind == "cmp":
        return _compare(e["op"], eval_expr(e["left"], env), eval_expr(e["right"], env), env.negated)
    if kind == "bool":
        truths = [_truth(eval_expr(o, env), env.negated) for o in e["operands"]]
        return all(truths) if e["op"] == "and" else any(truths)
    if kind == "not":
        return not _truth(eval_expr(e["operand"], env), env.negated)
    if kind == "in":
        v = eval_expr(e["operand"], env)
        return any(_compare("=", v, eval_expr(x, env), env.negated) for x in e["values"])
    if kind == "func":
        if e["name"] not in _FUNCS or len(e["args"]) != 1:
            raise ValueError(f"unknown function {e['name']!r}")
        v = eval_expr(e["args"][0], env)
        if not _is_num(v) or not math.isfinite(v):
            return MISSING
        return _FUNCS[e["name"]](v)
    if kind == "equiv":
        return _equiv(e, env)
    raise ValueError(f"unknown expression kind {kind!r}")


def _round_half_away(v: float) -> int:
    """``round``: half away from zero, as SQL's ROUND (2.5 -> 3, -2.5 -> -3)."""
    return int(math.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1)


# docs/semantics.md "Conditions": one number in; all but abs give an integer.
_FUNCS: dict[str, Any] = {
    "abs": abs,
    "floor": lambda v: int(math.floor(v)),
    "ceil": lambda v: int(math.ceil(v)),
    "round": _round_half_away,
    "int": lambda v: int(v),  # towards zero
}


def _is_noop_equiv(e: dict[str, Any]) -> bool:
    return e["kind"] == "equiv" and e["attr"] in ("symbol", "src") and e.get("value") is None


def _equiv(e: dict[str, Any], env: Env) -> bool:
    """``[a]``: every bound event's ``a`` is equal; ``[a='v']``: every one equals ``v``.
    A missing value makes it false (skipped in a negated component's conditions)."""
    if _is_noop_equiv(e):
        return True
    values = []
    for idx in sorted(env.binding):
        for inst in _as_list(env.binding[idx]):
            for ev in inst.equiv_events:
                v = _lookup(ev, e["attr"])
                if v is MISSING:
                    if env.negated:
                        continue
                    return False
                values.append(v)
    if e.get("value") is not None:
        return all(_compare("=", v, e["value"], False) for v in values)
    return all(_compare("=", values[0], v, False) for v in values[1:]) if values else True


def _conds_ok(conds: list[dict[str, Any]], env: Env) -> bool:
    return all(_truth(eval_expr(c, env), env.negated) for c in conds)


def _conjuncts(where: dict[str, Any] | None) -> list[dict[str, Any]]:
    """WHERE split at its top-level ANDs."""
    if where is None:
        return []
    if where["kind"] == "bool" and where["op"] == "and":
        out: list[dict[str, Any]] = []
        for o in where["operands"]:
            out.extend(_conjuncts(o))
        return out
    return [where]


def _walk(e: dict[str, Any]) -> Iterable[dict[str, Any]]:
    yield e
    for key in ("left", "right", "operand"):
        if key in e and isinstance(e[key], dict):
            yield from _walk(e[key])
    for key in ("operands", "values", "args"):
        for sub in e.get(key, []) or []:
            yield from _walk(sub)


def _references(e: dict[str, Any], names: dict[str, int]) -> tuple[set[int], set[int], bool]:
    """(components read through ``ref.attr``, components aggregated, whether ``e``
    holds an equivalence test that is not a no-op)."""
    plain: set[int] = set()
    agg: set[int] = set()
    equiv = False
    for node in _walk(e):
        if node["kind"] == "attr":
            target: Any = _resolve(names, node["ref"])
            plain.add(target[0] if isinstance(target, tuple) else target)
        elif node["kind"] == "agg":
            target = _resolve(names, node["ref"])
            if isinstance(target, tuple):
                raise ValueError("an aggregate over a component inside a sub-pattern")
            agg.add(target)
        elif node["kind"] == "equiv" and not _is_noop_equiv(node):
            equiv = True
    return plain, agg, equiv


def return_name(item: dict[str, Any], i: int) -> str:
    """Choice 1: the output name of RETURN item ``i`` (1-based)."""
    if item.get("name") is not None:
        return str(item["name"])
    if item["expr"]["kind"] == "attr":
        return str(item["expr"]["attr"])
    return f"expr{i}"


# ================================================================ compiled queries


@dataclass
class Comp:
    idx: int
    classes: frozenset[str]  # class names; for a sub-pattern, its derived class key
    sub: Node | None
    negated: bool
    kleene: tuple[int, bool] | None  # (min, exact)
    alias: str | None
    kmax: int | None = None  # the upper bound of B{m,n} (docs/semantics.md §6)
    select: str | None = None  # first: / last: (docs/semantics.md §11)


@dataclass
class Node:
    """A pattern (the query's, or a sub-pattern) with the query's window and mode.
    Conditions live on the query's top node only."""

    kind: str  # "seq" | "and" | "or"
    comps: list[Comp]
    window: float | None
    mode: str
    key: str  # the class of this node's instances
    top: bool
    names: dict[str, int] = field(default_factory=dict)
    match_conds: list[dict[str, Any]] = field(default_factory=list)
    element_conds: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    # Iteration conditions (they read b[i-1]): per Kleene component, checked between an
    # element and the run's previous element (docs/semantics.md §6).
    iter_conds: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    blocker_conds: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    disj_conds: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    returns: list[dict[str, Any]] = field(default_factory=list)
    prob_bound: float | None = None
    # Selection and consumption policies (docs/semantics.md §11-§12); top node only.
    strategy: str = "skip-till-any-match"
    consume: str = "shared"
    skip: str | None = None  # "past-last-row" | "next-row" | "first" | "last"
    skip_comp: int | None = None
    own_conds: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def policy(self) -> bool:
        return (
            self.mode == "chronicle"
            or self.strategy != "skip-till-any-match"
            or self.consume != "shared"
            or self.skip is not None
            or any(c.select is not None for c in self.comps)
        )

    @property
    def positives(self) -> list[Comp]:
        return [c for c in self.comps if not c.negated]

    @property
    def is_filter(self) -> bool:
        return (
            self.kind != "or"
            and len(self.comps) == 1
            and not self.comps[0].negated
            and not self.comps[0].kleene
        )

    def trailing(self) -> list[Comp]:
        """Negated components after the last positive one (sequences only)."""
        if self.kind != "seq":
            return []
        last = max(c.idx for c in self.positives)
        return [c for c in self.comps if c.negated and c.idx > last]

    def neighbours(self, c: Comp) -> tuple[Comp | None, Comp | None]:
        """The nearest positive components before and after ``c``."""
        left = [p for p in self.positives if p.idx < c.idx]
        right = [p for p in self.positives if p.idx > c.idx]
        return (left[-1] if left else None, right[0] if right else None)

    def plain_neighbours(self, c: Comp) -> tuple[Comp | None, Comp | None]:
        """The nearest positive non-Kleene components before and after ``c``: a Kleene
        group's bounds (docs/semantics.md §6, two groups side by side)."""
        left = [p for p in self.positives if p.idx < c.idx and not p.kleene]
        right = [p for p in self.positives if p.idx > c.idx and not p.kleene]
        return (left[-1] if left else None, right[0] if right else None)


def _canon(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _compile_node(p: dict[str, Any], window: float | None, mode: str, key: str, top: bool) -> Node:
    kind = p.get("kind")
    if kind not in ("seq", "and", "or") or not p.get("items"):
        raise ValueError(f"bad pattern {p!r}")
    comps: list[Comp] = []
    for idx, item in enumerate(p["items"]):
        sub = None
        if item.get("sub") is not None:
            sub_key = f"({_canon(item['sub'])})~{mode}~{window!r}"
            sub = _compile_node(item["sub"], window, mode, sub_key, False)
            classes = frozenset([sub_key])
        else:
            classes = frozenset(item["classes"])
        k = item.get("kleene")
        kleene = (int(k["min"]), bool(k.get("exact", False))) if k is not None else None
        kmax = int(k["max"]) if k is not None and k.get("max") is not None else None
        if kmax is not None and (kleene is None or kleene[1] or kmax < kleene[0]):
            raise ValueError("a Kleene upper bound needs a non-exact group and max >= min")
        select = item.get("select")
        if select is not None and (select not in ("first", "last") or not top):
            raise ValueError("first:/last: selects a component of the query's own pattern")
        comps.append(
            Comp(idx, classes, sub, bool(item.get("negated", False)), kleene, item.get("alias"), kmax, select)
        )
    node = Node(kind, comps, window, mode, key, top)
    _validate(node)
    return node


def _validate(node: Node) -> None:
    comps = node.comps
    positives = node.positives
    if not positives:
        raise ValueError("a pattern needs a positive component")
    if node.kind == "or":
        if any(c.negated or c.kleene for c in comps):
            raise ValueError("a disjunction has no negated or Kleene components")
        return
    if (len(comps) >= 2 or any(c.kleene for c in comps)) and node.window is None:
        raise ValueError("WITHIN is required")
    for c in comps:
        if c.kleene and c.negated:
            raise ValueError("a negated component cannot be Kleene")
        if c.kleene and node.kind == "and" and any(o is not c and o.classes & c.classes for o in positives):
            raise ValueError("a Kleene component in a conjunction shares a class with another")
    if node.kind == "seq":
        for a, b in itertools.pairwise(comps):
            if a.negated and b.negated:
                raise ValueError("two adjacent negations")
        for a, b in itertools.pairwise(positives):
            if a.kleene and b.kleene and a.classes & b.classes:
                raise ValueError("two Kleene components side by side share a class")
        if len(positives) >= 2 and positives[0].kleene and positives[-1].kleene:
            raise NotImplementedError("a leading and a trailing Kleene component")


def _names(comps: list[Comp]) -> dict[str, int]:
    """Choice 3: alias, then $xN, then a class name held by exactly one component as its
    single class (later entries do not override earlier ones)."""
    names: dict[str, int] = {}
    for c in comps:
        if c.alias is not None:
            if c.alias in names:
                raise ValueError(f"duplicate alias {c.alias!r}")
            names[c.alias] = c.idx
    for c in comps:
        names.setdefault(f"$x{c.idx + 1}", c.idx)
    singles: dict[str, list[int]] = {}
    for c in comps:
        if c.sub is None and len(c.classes) == 1:
            singles.setdefault(next(iter(c.classes)), []).append(c.idx)
    for cls, idxs in singles.items():
        if len(idxs) == 1:
            names.setdefault(cls, idxs[0])
    return names


def _inner_names(pattern: dict[str, Any], top: dict[str, int]) -> dict[str, tuple[int, ...]]:
    """Choice 3: aliases inside sub-patterns, each to its path (the top component, then
    the position among the positive components at each level). A negated component or
    one of a disjunction is not readable (left out: referring to it is an error)."""
    out: dict[str, tuple[int, ...]] = {}
    # An alias that names components in several sub-patterns (the branches of a
    # disjunction, as Rizvi's ANYONE writes them) is not readable from outside them.
    seen: set[str] = set()

    def walk(p: dict[str, Any], path: tuple[int, ...]) -> None:
        positives = [it for it in p["items"] if not it.get("negated")]
        for it in p["items"]:
            alias = it.get("alias")
            if alias is not None and alias in top:
                raise ValueError(f"duplicate alias {alias!r}")
            if alias is not None and alias in seen:
                out.pop(alias, None)
                alias = None
            elif alias is not None:
                seen.add(alias)
            if it.get("negated") or p["kind"] == "or":
                continue
            here = (*path, next(k for k, x in enumerate(positives) if x is it))
            if alias is not None and not it.get("kleene"):
                out[alias] = here
            if it.get("sub") is not None:
                walk(it["sub"], here)

    for j, it in enumerate(pattern["items"]):
        if it.get("sub") is not None and not it.get("negated"):
            walk(it["sub"], (j,))
    return out


def _reads_inside(e: dict[str, Any], names: dict[str, Any]) -> bool:
    return any(n["kind"] == "attr" and isinstance(names.get(n["ref"]), tuple) for n in _walk(e))


def compile_query(name: str, q: dict[str, Any]) -> Node:
    """The query's top node, with its conditions classified (Part 1 and Part 2)."""
    if q.get("kind", "query") != "query":
        raise ValueError("not a query")
    window = float(q["within"]) if q.get("within") is not None else None
    mode = q.get("mode", "recent")
    if mode not in ("recent", "all", "chronicle"):
        raise ValueError(f"bad mode {mode!r}")
    node = _compile_node(q["pattern"], window, mode, f"@{name}", True)
    node.names = _names(node.comps)
    node.names.update(_inner_names(q["pattern"], node.names))  # type: ignore[arg-type] # paths too
    _read_policy(node, q)
    node.prob_bound = float(q["probability"]) if q.get("probability") is not None else None
    node.returns = list(q.get("return", []))
    neg = {c.idx for c in node.comps if c.negated}
    kle = {c.idx for c in node.comps if c.kleene}
    every = {c.idx for c in node.comps}
    for item in node.returns:
        plain, agg, _ = _references(item["expr"], node.names)
        if agg - kle:
            raise ValueError("aggregate over a non-Kleene component")
        if (plain | agg) & neg:
            raise ValueError("RETURN reads a negated component")  # the engine rejects it at registration
    for item in node.returns:
        if any(n["kind"] == "prev" for n in _walk(item["expr"])):
            raise ValueError("RETURN cannot read b[i-1]: it belongs to iteration conditions")
    for cj in _conjuncts(q.get("where")):
        plain, agg, equiv = _references(cj, node.names)
        prevs = {_resolve(node.names, n["ref"]) for n in _walk(cj) if n["kind"] == "prev"}
        if prevs:
            # An iteration condition: one Kleene component, its element and the element
            # before it, and plain positive components.
            if len(prevs) > 1 or not prevs <= kle or agg or equiv or plain & neg or len(plain & kle - prevs):
                raise ValueError(f"bad iteration condition {cj!r}")
            node.iter_conds.setdefault(next(iter(prevs)), []).append(cj)
            continue
        explicit = plain | agg
        mentions = explicit | (every if equiv else set())
        if agg - kle:
            raise ValueError("aggregate over a non-Kleene component")
        if node.kind == "or":
            if _reads_inside(cj, node.names):
                raise ValueError("a disjunction's condition reads inside a sub-pattern")
            if len(mentions) > 1:
                raise ValueError("a disjunction's WHERE conjunct must mention one component")
            for idx in mentions or every:
                node.disj_conds.setdefault(idx, []).append(cj)
            continue
        if len(plain & kle) > 1 or (explicit & kle and explicit & neg) or (plain & kle and agg):
            raise NotImplementedError(f"WHERE conjunct {cj!r}")
        if not (explicit & neg) and not (plain & kle):
            node.match_conds.append(cj)
        if not agg and not equiv and len(plain) == 1:
            # Own conditions of a component (docs/semantics.md §11, skip-till-next-match).
            node.own_conds.setdefault(next(iter(plain)), []).append(cj)
        if not agg:
            for k in kle & mentions:
                node.element_conds.setdefault(k, []).append(cj)
        for j in neg & mentions:
            node.blocker_conds.setdefault(j, []).append(cj)
    return node


_STRATEGIES = ("skip-till-any-match", "skip-till-next-match", "partition-contiguity", "strict-contiguity")
_SKIPS = ("past-last-row", "next-row", "first", "last")


def _read_policy(node: Node, q: dict[str, Any]) -> None:
    """docs/semantics.md §11-§12: the query's strategy, consumption and AFTER MATCH SKIP,
    and the combinations refused at registration."""
    node.strategy = q.get("strategy", "skip-till-any-match")
    if node.strategy not in _STRATEGIES:
        raise ValueError(f"bad strategy {node.strategy!r}")
    node.consume = q.get("consume", "shared")
    if node.consume not in ("shared", "exclusive"):
        raise ValueError(f"bad consumption {node.consume!r}")
    skip = q.get("skip")
    if skip is not None:
        node.skip = skip["to"]
        if node.skip not in _SKIPS:
            raise ValueError(f"bad AFTER MATCH SKIP {skip!r}")
        if node.skip in ("first", "last"):
            if node.kind == "or":
                raise ValueError("AFTER MATCH SKIP TO FIRST/LAST in a disjunction")
            var = skip.get("var")
            if var not in node.names:
                raise ValueError(f"AFTER MATCH SKIP names no component {var!r}")
            idx = node.names[var]
            if node.comps[idx].negated:
                raise ValueError("AFTER MATCH SKIP names a negated component")
            if node.skip == "first" and node.kind == "seq" and idx == node.positives[0].idx:
                raise ValueError("AFTER MATCH SKIP TO FIRST of the first component")
            node.skip_comp = idx
    if not node.policy:
        return
    for c in node.comps:
        if c.select is None:
            continue
        if node.kind == "or" or c.kleene or c.negated or node.mode == "all":
            raise ValueError("first:/last: on a disjunction, a Kleene or negated component, or in MODE ALL")
    if node.trailing():
        raise ValueError("a policy with a trailing negation")
    if any(c.sub is not None or any(cls.startswith("@") for cls in c.classes) for c in node.comps):
        raise ValueError("a policy with a sub-pattern or an @name component")


def _sub_nodes(node: Node) -> list[Node]:
    """The node's sub-patterns, deepest first, one per derived class."""
    out: list[Node] = []
    for c in node.comps:
        if c.sub is not None:
            for s in [*_sub_nodes(c.sub), c.sub]:
                if all(s.key != t.key for t in out):
                    out.append(s)
    return out


def _stored(node: Node, out: dict[str, float]) -> None:
    """Choice 5: the classes a node stores, with its window."""
    stores = node.kind != "or" and (len(node.comps) >= 2 or node.comps[0].kleene is not None)
    for c in node.comps:
        if stores:
            assert node.window is not None
            for cls in c.classes:
                out[cls] = max(out.get(cls, -INF), node.window)
        if c.sub is not None:
            _stored(c.sub, out)


def _depends(node: Node) -> set[str]:
    out: set[str] = set()
    for c in node.comps:
        out |= {cls[1:] for cls in c.classes if c.sub is None and cls.startswith("@")}
        if c.sub is not None:
            out |= _depends(c.sub)
    return out


# ===================================================================== candidates


@dataclass
class Cand:
    """A match before selection: bindings of the positive components and what is
    computed from them."""

    binding: dict[int, Bound]
    src: Any
    start: float
    end: float
    prob: float
    trigger: Inst  # the instance whose arrival completes it
    recent_key: tuple[Any, ...]
    entries: list[Any]
    prims: frozenset[int]


@dataclass
class Registered:
    name: str
    node: Node
    order: int  # registration order
    reg_op: int  # the op that registered it: it sees instances of later ops only
    subs: list[Node]
    stored: dict[str, float]
    deps: set[str]
    sub_insts: dict[str, list[Inst]] = field(default_factory=dict)
    pending: list[tuple[Node, Cand, float]] = field(default_factory=list)
    # Consumption (docs/semantics.md §12): consumed arrival indexes, floors per source.
    consumed: set[int] = field(default_factory=set)
    floors: dict[Any, int] = field(default_factory=dict)
    key: tuple[str, ...] = ("src",)


class Reference:
    """The evaluator's state between ops: the clock, every event seen, the registered
    queries, the drop horizons and the ``@name`` instances."""

    def __init__(self) -> None:
        self.clock = -INF
        self.op = -1
        self.n_events = 0
        self.by_type: dict[str, list[Inst]] = {}
        self.queries: dict[str, Registered] = {}
        self.order = 0
        # Drop horizons per (partition key, class): choice 13.
        self.horizon: dict[tuple[tuple[str, ...], str], float] = {}
        self.derived: dict[str, list[Inst]] = {}
        self.out: list[dict[str, Any]] = []
        self._emitted: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        # Every primitive event, by arrival index (strategies read what lies between).
        self.events: list[Inst] = []

    # ------------------------------------------------------------------ ops

    def run(self, ops: Iterable[tuple[Any, ...]]) -> list[dict[str, Any]]:
        for op in ops:
            self.op += 1
            self._emitted = []
            if op[0] == "register":
                self.register(op[1], op[2])
            elif op[0] == "unregister":
                self.unregister(op[1])
            elif op[0] == "event":
                self.event(op[1])
            elif op[0] == "time":
                self.tick(float(op[1]))
            else:
                raise ValueError(f"unknown op {op!r}")
            self._emitted.sort(key=lambda item: item[0])
            self.out.extend(m for _, m in self._emitted)
        return self.out

    def register(self, name: str, q: dict[str, Any]) -> None:
        if name in self.queries:
            raise ValueError(f"query {name!r} is already registered")
        node = compile_query(name, q)
        stored: dict[str, float] = {}
        _stored(node, stored)
        reg = Registered(name, node, self.order, self.op, _sub_nodes(node), stored, _depends(node))
        reg.key = partition_of(q)
        for dep in sorted(reg.deps):
            if dep in self.queries and self.queries[dep].key != reg.key:
                raise ValueError(f"@{dep} is partitioned by another key")
        self.order += 1
        for s in reg.subs:
            reg.sub_insts[s.key] = []
        if name in self._reachable(reg.deps):
            raise ValueError(f"query {name!r} depends on itself")
        self.queries[name] = reg
        for cls in stored:
            self.horizon.setdefault((reg.key, cls), -INF)  # a new queue starts afresh

    def unregister(self, name: str) -> None:
        if name not in self.queries:
            raise ValueError(f"no query {name!r}")
        del self.queries[name]
        live = self._windows()
        for cls in list(self.horizon):
            if cls not in live:
                del self.horizon[cls]

    def event(self, data: dict[str, Any]) -> None:
        start = float(data["start"])
        end = float(data["end"]) if data.get("end") is not None else start
        arrival = self.n_events
        inst = Inst(
            data["src"],
            data["type"],
            start,
            end,
            dict(data.get("attrs") or {}),
            float(data["prob"]) if data.get("prob") is not None else 1.0,
            (self.op, 1),
            arrival,
            frozenset([arrival]),
        )
        self.tick(max(self.clock, end))
        self.events.append(inst)
        self.by_type.setdefault(inst.type, []).append(inst)
        self.n_events += 1
        moment = (self.op, 1)
        for reg in self._topological():
            for node in [*reg.subs, reg.node]:
                self._complete(reg, node, moment)

    def tick(self, t: float) -> None:
        """Advance the clock; phase 0 (clock-driven emissions, Part 2); drop horizons."""
        self.clock = max(self.clock, t)
        moment = (self.op, 0)
        for reg in self._topological():
            for node in [*reg.subs, reg.node]:
                self._fire_pending(reg, node, moment)
                self._complete(reg, node, moment)
        for cls, w in self._windows().items():
            self.horizon[cls] = max(self.horizon[cls], self.clock - w)

    # ------------------------------------------------------------- helpers

    def _windows(self) -> dict[tuple[tuple[str, ...], str], float]:
        """W(X) of docs/semantics.md: the largest window of the queries storing X, per
        partition key (choice 13)."""
        out: dict[tuple[tuple[str, ...], str], float] = {}
        for reg in self.queries.values():
            for cls, w in reg.stored.items():
                out[reg.key, cls] = max(out.get((reg.key, cls), -INF), w)
        return out

    def _reachable(self, names: set[str]) -> set[str]:
        seen: set[str] = set()
        todo = list(names)
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                if n in self.queries:
                    todo.extend(self.queries[n].deps)
        return seen

    def _topological(self) -> list[Registered]:
        """Registered queries, each after the queries it reads through ``@name``
        (otherwise in registration order)."""
        out: list[Registered] = []
        placed: set[str] = set()
        remaining = sorted(self.queries.values(), key=lambda r: r.order)
        while remaining:
            for reg in remaining:
                if all(d in placed or d not in self.queries for d in reg.deps):
                    out.append(reg)
                    placed.add(reg.name)
                    remaining.remove(reg)
                    break
            else:  # pragma: no cover - cycles are rejected at registration
                raise ValueError("cyclic @name references")
        return out

    def _instances(self, reg: Registered, comp: Comp, moment: Moment) -> list[Inst]:
        """The instances of ``comp``'s classes that ``reg`` sees and that have arrived by
        ``moment``, in arrival order."""
        pool: list[Inst] = []
        if comp.sub is not None:
            pool = reg.sub_insts[comp.sub.key]
        else:
            for cls in sorted(comp.classes):
                if cls.startswith("@"):
                    pool = pool + [x for x in self.derived.get(cls[1:], []) if x.producer_key == reg.key]
                else:
                    pool = pool + [v for x in self.by_type.get(cls, []) if (v := _view(x, reg.key)) is not None]
        return sorted((x for x in pool if x.pos[0] > reg.reg_op and x.pos <= moment), key=lambda x: x.key)

    def _usable(self, inst: Inst, moment: Moment, key: tuple[str, ...]) -> bool:
        """The drop horizon (choice 5) of the reading query's key: an instance arriving
        now is always usable."""
        return inst.pos == moment or inst.start >= self.horizon.get((key, inst.type), -INF)

    def _bound_ok(self, node: Node, prob: float) -> bool:
        if node.top and node.prob_bound is not None:
            return prob >= node.prob_bound
        return prob > 0

    # ------------------------------------------------------- completion

    def _complete(self, reg: Registered, node: Node, moment: Moment) -> None:
        """Every match of ``node`` completed at ``moment``: enumerate, select by mode,
        then emit (or hold until the trailing negation's deadline)."""
        if node.kind == "or":
            cands = self._disj_candidates(reg, node, moment)
        elif node.is_filter:
            cands = self._filter_candidates(reg, node, moment)
        elif node.kind == "seq":
            cands = self._seq_candidates(reg, node, moment)
        elif any(c.kleene for c in node.comps):
            cands = self._conj_kleene_candidates(reg, node, moment)
        else:
            cands = self._conj_candidates(reg, node, moment)
        cands = [c for c in cands if self._bound_ok(node, c.prob)]
        if node.top and node.policy:
            cands = self._apply_policy(reg, node, cands)
        elif node.mode == "recent":
            best: dict[int, Cand] = {}
            for c in cands:
                other = best.get(id(c.trigger))
                if other is None or c.recent_key > other.recent_key:
                    best[id(c.trigger)] = c
            cands = list(best.values())
        for c in cands:
            if node.trailing():
                self._hold_trailing(reg, node, c, moment)
            else:
                self._finish(reg, node, c, c.prob, moment)

    # ------------------------------------------ policies (docs/semantics.md §11-§12)

    @staticmethod
    def _chain(node: Node, cand: Cand) -> list[tuple[Inst, int]]:
        """The candidate's positive primitive events with the component each fills, in
        arrival order."""
        pairs = [
            (x, c.idx) for c in node.positives if c.idx in cand.binding for x in _as_list(cand.binding[c.idx])
        ]
        return sorted(pairs, key=lambda p: p[0].key)

    def _could_fill(self, node: Node, k: int, z: Inst, x: Inst) -> bool:
        comp = node.comps[k]
        if z.type not in comp.classes:
            return False
        if node.kind == "seq" and not x.end <= z.start:
            return False
        return _conds_ok(node.own_conds.get(k, []), Env(node.names, {k: z}))

    def _strategy_ok(self, node: Node, cand: Cand) -> bool:
        chain = self._chain(node, cand)
        src = _src_key(cand.src)
        order = [c.idx for c in node.positives]
        for i, ((x, j), (y, _)) in enumerate(itertools.pairwise(chain)):
            ax, ay = x.entry, y.entry
            between = self.events[ax + 1 : ay]
            if node.strategy == "strict-contiguity":
                if ay != ax + 1:
                    return False
            elif node.strategy == "partition-contiguity":
                if any(_src_key(z.src) == src for z in between):
                    return False
            elif node.strategy == "skip-till-next-match":
                if node.kind == "seq":
                    p = order.index(j)
                    waiting = order[p + 1 : p + 2] + ([j] if node.comps[j].kleene else [])
                else:
                    waiting = sorted({k for _, k in chain[i + 1 :]})
                for z in between:
                    if _src_key(z.src) == src and any(self._could_fill(node, k, z, x) for k in waiting):
                        return False
        return True

    def _apply_policy(self, reg: Registered, node: Node, cands: list[Cand]) -> list[Cand]:
        """The candidates of one op that pass the strategy, taken in the mode's order of
        preference, each checked against (and then adding to) what is consumed."""
        kept = sorted((c for c in cands if self._strategy_ok(node, c)), key=lambda c: _norm(c.entries))
        if any(c.select is not None for c in node.comps):
            kept.sort(key=lambda c: self._select_key(node, c))
        elif node.mode == "recent":
            kept.sort(key=lambda c: c.recent_key, reverse=True)
        out = []
        for c in kept:
            chain = self._chain(node, c)
            arrs = [x.entry for x, _ in chain]
            src = _src_key(c.src)
            if node.consume == "exclusive" and reg.consumed.intersection(arrs):
                continue
            if src in reg.floors and min(arrs) < reg.floors[src]:
                continue
            out.append(c)
            if node.consume == "exclusive":
                reg.consumed.update(arrs)
            if node.skip is not None:
                if node.skip == "past-last-row":
                    floor = max(arrs) + 1
                elif node.skip == "next-row":
                    floor = min(arrs) + 1
                else:
                    own = [x.entry for x, k in chain if k == node.skip_comp]
                    floor = min(own) if node.skip == "first" else max(own)
                reg.floors[src] = max(reg.floors.get(src, floor), floor)
            if node.mode != "all":
                break
        return out

    @staticmethod
    def _select_key(node: Node, cand: Cand) -> tuple[Any, ...]:
        """docs/semantics.md §11, per-component selection: component by component in the
        pattern's order, ``first`` preferring the earlier arrival, ``last`` the later (an
        unmarked component as the mode says: CHRONICLE first, RECENT last); a Kleene group
        by its elements (first) or its latest element (last). Smallest is preferred."""
        unmarked = "first" if node.mode == "chronicle" else "last"
        out: list[Any] = []
        for c in node.positives:
            how = c.select or unmarked
            entry = _entry(cand.binding[c.idx])
            if isinstance(entry, list):
                out.append(entry if how == "first" else -max(entry))
            else:
                out.append(entry if how == "first" else -entry)
        return tuple(out)

    def _finish(self, reg: Registered, node: Node, cand: Cand, prob: float, moment: Moment) -> None:
        """A selected match with its final probability: emit it (and make it an ``@name``
        instance), or make it an instance of its sub-pattern's derived class."""
        if not self._bound_ok(node, prob):
            return
        if not node.top:
            flat = [
                ev
                for idx in sorted(cand.binding)
                for x in _as_list(cand.binding[idx])
                for ev in x.equiv_events
            ]
            inst = Inst(
                cand.src, node.key, cand.start, cand.end, {}, prob, moment, cand.entries, cand.prims, flat
            )
            inst.parts = [cand.binding[c.idx] for c in node.positives if c.idx in cand.binding]
            reg.sub_insts[node.key].append(inst)
            return
        attrs: dict[str, Any] = {}
        env = Env(node.names, cand.binding)
        for i, item in enumerate(node.returns, 1):
            value = eval_expr(item["expr"], env)
            if value is not MISSING:
                attrs[return_name(item, i)] = value
        match = {
            "query": reg.name,
            "src": cand.src,
            "start": cand.start,
            "end": cand.end,
            "events": cand.entries,
            "attrs": attrs,
            "prob": prob,
            "trigger": self.n_events - 1 if moment[1] == 1 else self.n_events,
        }
        self._emitted.append(((moment[1], reg.order, _norm(cand.entries)), match))
        derived = Inst(
            cand.src, node.key, cand.start, cand.end, dict(attrs), prob, moment, cand.entries, cand.prims
        )
        derived.producer_key = reg.key
        self.derived.setdefault(reg.name, []).append(derived)

    def _make_cand(self, node: Node, binding: dict[int, Bound], moment: Moment) -> Cand:
        """Fill in a candidate's derived fields from its positive bindings (a
        disjunction's candidate binds one component)."""
        positives = [c for c in node.positives if c.idx in binding]
        insts = [x for c in positives for x in _as_list(binding[c.idx])]
        at_moment = [x for x in insts if x.pos == moment]
        trigger = max(at_moment, key=lambda x: x.key)
        if node.kind == "seq":
            start = min(x.start for x in _as_list(binding[positives[0].idx]))
            end = max(x.end for x in _as_list(binding[positives[-1].idx]))
            # docs/semantics.md §3, §6: e(n-1) back to e1, a Kleene group by its latest element.
            recent_key = tuple(max(x.key for x in _as_list(binding[c.idx])) for c in reversed(positives[:-1]))
        else:
            start = min(x.start for x in insts)
            end = max(x.end for x in insts)
            # docs/semantics.md §4: the other events, latest to earliest.
            recent_key = tuple(sorted((x.key for x in insts if x is not trigger), reverse=True))
        prob = 1.0
        for x in insts:
            prob *= x.prob
        return Cand(
            binding=binding,
            src=insts[0].part,
            start=start,
            end=end,
            prob=prob,
            trigger=trigger,
            recent_key=recent_key,
            entries=[_entry(binding[c.idx]) for c in positives],
            prims=frozenset().union(*(x.prims for x in insts)),
        )

    def _common_ok(
        self, node: Node, binding: dict[int, Bound], moment: Moment, key: tuple[str, ...]
    ) -> bool:
        """Rules every multi-event match obeys: one source, distinct primitive events,
        the window, the drop horizon."""
        insts = [x for c in node.positives for x in _as_list(binding[c.idx])]
        if len({_src_key(x.part) for x in insts}) != 1:
            return False
        if sum(len(x.prims) for x in insts) != len(frozenset().union(*(x.prims for x in insts))):
            return False
        if node.kind == "seq":
            first, last = node.positives[0], node.positives[-1]
            span = max(x.end for x in _as_list(binding[last.idx])) - min(
                x.start for x in _as_list(binding[first.idx])
            )
        else:
            span = max(x.end for x in insts) - min(x.start for x in insts)
        assert node.window is not None
        if span > node.window:
            return False
        return all(self._usable(x, moment, key) for x in insts)

    # ================================================================== Part 1

    def _filter_candidates(self, reg: Registered, node: Node, moment: Moment) -> list[Cand]:
        """docs/semantics.md: a single positive component is a filter."""
        comp = node.comps[0]
        out = []
        for x in self._instances(reg, comp, moment):
            if x.pos != moment:
                continue
            binding: dict[int, Bound] = {comp.idx: x}
            if _conds_ok(node.match_conds, Env(node.names, binding)):
                out.append(self._make_cand(node, binding, moment))
        return out

    def _disj_candidates(self, reg: Registered, node: Node, moment: Moment) -> list[Cand]:
        """docs/semantics.md §4 and choice 7: each arriving instance binds the first component
        that takes it."""
        arriving: dict[int, Inst] = {}
        for c in node.comps:
            for x in self._instances(reg, c, moment):
                if x.pos == moment:
                    arriving[id(x)] = x
        out = []
        for x in sorted(arriving.values(), key=lambda x: x.key):
            for c in node.comps:
                binding: dict[int, Bound] = {c.idx: x}
                if x.type in c.classes and _conds_ok(
                    node.disj_conds.get(c.idx, []), Env(node.names, binding)
                ):
                    cand = self._make_cand(node, binding, moment)
                    out.append(cand)
                    break
        return out

    def _seq_candidates(self, reg: Registered, node: Node, moment: Moment) -> list[Cand]:
        """docs/semantics.md §3: every tuple in sequence order whose last positive event
        arrives now (Kleene groups and negation: Part 2)."""
        positives = node.positives
        last = positives[-1]
        plain = [c for c in positives if c.kleene is None]
        kleene = [c for c in positives if c.kleene is not None]
        out = []
        for src in self._sources_now(reg, node, moment):
            lists = []
            for c in plain:
                insts = [x for x in self._instances(reg, c, moment) if _src_key(x.part) == src]
                if c is last:
                    insts = [x for x in insts if x.pos == moment]
                lists.append(insts)
            for combo in itertools.product(*lists):
                partial: dict[int, Bound] = {c.idx: x for c, x in zip(plain, combo, strict=True)}
                group_options = [self._kleene_groups(reg, node, k, partial, moment, src) for k in kleene]
                for groups in itertools.product(*group_options):
                    binding = dict(partial)
                    binding.update({k.idx: g for k, g in zip(kleene, groups, strict=True)})
                    if not all(
                        _before(binding[a.idx], binding[b.idx]) for a, b in itertools.pairwise(positives)
                    ):
                        continue
                    if not self._common_ok(node, binding, moment, reg.key):
                        continue
                    if not _conds_ok(node.match_conds, Env(node.names, binding)):
                        continue
                    cand = self._make_cand(node, binding, moment)
                    cand.prob *= self._seq_negation_factor(reg, node, cand, moment)
                    out.append(cand)
        return out

    def _conj_candidates(self, reg: Registered, node: Node, moment: Moment) -> list[Cand]:
        """docs/semantics.md §4 and docs/semantics.md "Conjunction roles": each set of events
        is one match, with the first assignment (lexicographic by arrival, component by
        component) that respects the same-class rule and passes WHERE."""
        positives = node.positives
        out = []
        for src in self._sources_now(reg, node, moment):
            lists = [
                [x for x in self._instances(reg, c, moment) if _src_key(x.part) == src] for c in positives
            ]
            decided: dict[frozenset[int], dict[int, Bound] | None] = {}
            for combo in itertools.product(*lists):
                members = frozenset(id(x) for x in combo)
                if len(members) < len(combo) or members in decided:
                    continue
                if max(x.pos for x in combo) != moment:
                    continue
                if not _roles_in_order(positives, combo):
                    continue
                binding: dict[int, Bound] = {c.idx: x for c, x in zip(positives, combo, strict=True)}
                if not self._common_ok(node, binding, moment, reg.key):
                    decided[members] = None
                    continue
                if _conds_ok(node.match_conds, Env(node.names, binding)):
                    decided[members] = binding
            for chosen in decided.values():
                if chosen is not None:
                    cand = self._make_cand(node, chosen, moment)
                    cand.prob *= self._conj_negation_factor(reg, node, cand, moment)
                    out.append(cand)
        return out

    def _conj_kleene_candidates(self, reg: Registered, node: Node, moment: Moment) -> list[Cand]:
        """docs/semantics.md §6, Kleene inside a conjunction: for each instance ``e``
        arriving now, every assignment of the plain components to distinct instances of
        the window that ends with ``e`` (arrived by now, ``x.end <= e.end``, ``e.end -
        x.start <= T``), each group made of that window's qualifying instances as a lone
        group is, ``e`` among the match's instances; per set of plain instances the first
        assignment (lexicographic by arrival) that passes."""
        assert node.window is not None
        window = node.window
        positives = node.positives
        plain = [c for c in positives if not c.kleene]
        kleene = [c for c in positives if c.kleene]
        out = []
        for src in self._sources_now(reg, node, moment):
            mine = {
                c.idx: [
                    x
                    for x in self._instances(reg, c, moment)
                    if _src_key(x.part) == src and self._usable(x, moment, reg.key)
                ]
                for c in positives
            }
            arriving = sorted(
                {id(x): x for c in positives for x in mine[c.idx] if x.pos == moment}.values(),
                key=lambda x: x.key,
            )
            for e in arriving:

                def inside(x: Inst, e: Inst = e) -> bool:
                    return x.key <= e.key and x.end <= e.end and e.end - x.start <= window

                lists = [[x for x in mine[c.idx] if inside(x)] for c in plain]
                decided: set[frozenset[int]] = set()
                for combo in itertools.product(*lists):
                    members = frozenset(id(x) for x in combo)
                    if len(members) < len(combo) or members in decided:
                        continue
                    if not _roles_in_order(plain, combo):
                        continue
                    partial: dict[int, Bound] = {c.idx: x for c, x in zip(plain, combo, strict=True)}
                    used = frozenset().union(*(x.prims for x in combo))
                    groups = []
                    for k in kleene:
                        qualifying = [
                            x
                            for x in mine[k.idx]
                            if inside(x)
                            and not x.prims & used
                            and _conds_ok(node.element_conds.get(k.idx, []), Env(node.names, {**partial, k.idx: x}))
                        ]
                        groups.append(
                            self._group_forms(node, k, partial, qualifying, moment, latest=True)
                        )
                    for chosen in itertools.product(*groups):
                        binding = dict(partial)
                        binding.update({k.idx: g for k, g in zip(kleene, chosen, strict=True)})
                        insts = [x for c in positives for x in _as_list(binding[c.idx])]
                        if not any(x is e for x in insts):
                            continue
                        if not self._common_ok(node, binding, moment, reg.key):
                            continue
                        if not _conds_ok(node.match_conds, Env(node.names, binding)):
                            continue
                        decided.add(members)
                        cand = self._make_cand(node, binding, moment)
                        cand.trigger = e
                        # RECENT: the plain instances other than e, latest to earliest.
                        cand.recent_key = tuple(sorted((x.key for x in combo if x is not e), reverse=True))
                        cand.prob *= self._conj_negation_factor(reg, node, cand, moment)
                        out.append(cand)
                        break
        return out

    def _sources_now(self, reg: Registered, node: Node, moment: Moment) -> list[Any]:
        """The sources of the instances arriving now that ``node`` could use (every match
        completed now has one of them)."""
        srcs = {
            _src_key(x.part) for c in node.comps for x in self._instances(reg, c, moment) if x.pos == moment
        }
        return sorted(srcs, key=repr)

    # ================================================================== Part 2

    def _kleene_groups(
        self,
        reg: Registered,
        node: Node,
        comp: Comp,
        partial: dict[int, Bound],
        moment: Moment,
        src: Any = None,
    ) -> list[list[Inst]]:
        """docs/semantics.md §6 and choice 12: the groups a Kleene component can take, given
        the other positive components' events. ``B+``/``B{m,}``/``B{m,n}``: all qualifying
        events (m to n of them); ``B^n``: every run of n successive qualifying events. A
        group with no right neighbour (trailing, or alone) ends with the event arriving
        now; alone, its elements are the events in the window that ends with it."""
        assert comp.kleene is not None and node.window is not None
        minimum, exact = comp.kleene
        left, right = node.plain_neighbours(comp)
        positives = node.positives
        last_one = comp is positives[-1]
        plain_insts = [
            x for c in positives if c.idx in partial and not c.kleene for x in _as_list(partial[c.idx])
        ]
        if plain_insts:
            src = _src_key(plain_insts[0].part)
        used = frozenset().union(*(x.prims for x in plain_insts))
        if len(positives) == 1:
            # Alone: for each instance e arriving now, the group of the window that ends
            # with e, ending with e.
            out = []
            for e in self._instances(reg, comp, moment):
                if e.pos != moment or _src_key(e.part) != src:
                    continue
                qualifying = [
                    x
                    for x in self._instances(reg, comp, moment)
                    if _src_key(x.part) == src
                    and x.key <= e.key
                    and self._usable(x, moment, reg.key)
                    and x.end <= e.end
                    and e.end - x.start <= node.window
                    and _conds_ok(node.element_conds.get(comp.idx, []), Env(node.names, {comp.idx: x}))
                ]
                out.extend(self._group_forms(node, comp, partial, qualifying, moment, ends_with=e))
            return out
        qualifying = []
        for x in self._instances(reg, comp, moment):
            if _src_key(x.part) != src or x.prims & used or not self._usable(x, moment, reg.key):
                continue
            if left is not None and not _before(partial[left.idx], x):
                continue
            if right is not None and not _before(x, partial[right.idx]):
                continue
            if (
                left is None
                and max(y.end for y in _as_list(partial[positives[-1].idx])) - x.start > node.window
            ):
                continue
            if (
                right is None
                and x.end - min(y.start for y in _as_list(partial[positives[0].idx])) > node.window
            ):
                continue
            env = Env(node.names, {**partial, comp.idx: x})
            if _conds_ok(node.element_conds.get(comp.idx, []), env):
                qualifying.append(x)
        return self._group_forms(node, comp, partial, qualifying, moment, ends_now=last_one)

    def _group_forms(
        self,
        node: Node,
        comp: Comp,
        partial: dict[int, Bound],
        qualifying: list[Inst],
        moment: Moment,
        ends_now: bool = False,
        ends_with: Inst | None = None,
        latest: bool = False,
    ) -> list[list[Inst]]:
        """docs/semantics.md §6: the groups of Kleene ``comp`` from its qualifying
        instances (in arrival order): a run (iteration conditions) or a chain (a
        sub-pattern or ``@name``) built in arrival order, then ``B^n``'s runs of n or the
        whole group of m to n; ``ends_now``: the group must end with an instance arriving
        now (``ends_with``: with that one); ``latest``: ``B^n`` is only the run of the n
        latest (in a conjunction)."""
        assert comp.kleene is not None
        minimum, exact = comp.kleene
        iters = node.iter_conds.get(comp.idx, [])
        chained = comp.sub is not None or any(cls.startswith("@") for cls in comp.classes)

        def follows(prev: Inst, x: Inst) -> bool:
            if chained and not _before(prev, x):
                return False
            return _conds_ok(iters, Env(node.names, {**partial, comp.idx: x}, prev=prev))

        if (chained or (iters and not exact)) and qualifying:
            # A run with an iteration condition, or a chain of instances, is built in
            # arrival order: from the first qualifying one, each next one joins when it
            # passes against (follows) the last joined.
            run = [qualifying[0]]
            for x in qualifying[1:]:
                if follows(run[-1], x):
                    run.append(x)
            qualifying = run
        if not exact:
            if ends_now and (not qualifying or qualifying[-1].pos != moment):
                return []  # a group without a right neighbour ends with the event arriving now
            if ends_with is not None and (not qualifying or qualifying[-1] is not ends_with):
                return []
            size = len(qualifying)
            if size < minimum or (comp.kmax is not None and size > comp.kmax):
                return []
            return [qualifying]
        runs = [qualifying[s : s + minimum] for s in range(len(qualifying) - minimum + 1)]
        if iters and not chained:  # B^n: n successive qualifying events, each passing against the one before
            runs = [r for r in runs if all(follows(p, x) for p, x in itertools.pairwise(r))]
        if ends_now:  # a B^n without a right neighbour: its groups end with the completing event
            runs = [r for r in runs if r[-1].pos == moment]
        if ends_with is not None:
            runs = [r for r in runs if r[-1] is ends_with]
        if latest:
            runs = [r for r in runs if r[-1] is qualifying[-1]]
        return runs

    def _blockers(
        self,
        reg: Registered,
        node: Node,
        comp: Comp,
        cand: Cand,
        moment: Moment,
        where: Any,
    ) -> list[Inst]:
        """The events of negated ``comp`` that block ``cand``: same source, usable, no
        shared primitive event, placed as ``where(x)`` says, passing the conditions that
        mention ``comp`` (missing -> true)."""
        out = []
        for x in self._instances(reg, comp, moment):
            if x.pos >= moment or _src_key(x.part) != _src_key(cand.src) or x.prims & cand.prims:
                continue
            if not self._usable(x, moment, reg.key) or not where(x):
                continue
            env = Env(node.names, {**cand.binding, comp.idx: x}, negated=True)
            if _conds_ok(node.blocker_conds.get(comp.idx, []), env):
                out.append(x)
        return out

    def _seq_negation_factor(self, reg: Registered, node: Node, cand: Cand, moment: Moment) -> float:
        """docs/semantics.md §5, middle and leading negation: the product of (1 - prob) of the
        blockers (0 when a certain one exists)."""
        factor = 1.0
        assert node.window is not None
        window = node.window
        for comp in node.comps:
            if not comp.negated:
                continue
            left, right = node.neighbours(comp)
            if right is None:
                continue  # trailing: at the deadline
            left_bound = cand.binding[left.idx] if left is not None else None
            right_bound = cand.binding[right.idx]

            def where(x: Inst, lb: Bound = left_bound, rb: Bound = right_bound) -> bool:
                if lb is None:  # leading: within the window of the last positive event
                    return _before(x, rb) and cand.end - window <= x.start
                return _before(lb, x) and _before(x, rb)

            for x in self._blockers(reg, node, comp, cand, moment, where):
                factor *= 1.0 - x.prob
        return factor

    def _conj_negation_factor(self, reg: Registered, node: Node, cand: Cand, moment: Moment) -> float:
        """docs/semantics.md §5: in a conjunction, ``!X`` forbids an x with ``min(start) <=
        x.start`` and ``x.end <= max(end)`` that arrived before the match's last event."""
        factor = 1.0
        for comp in node.comps:
            if comp.negated:
                for x in self._blockers(
                    reg, node, comp, cand, moment, lambda x: cand.start <= x.start and x.end <= cand.end
                ):
                    factor *= 1.0 - x.prob
        return factor

    def _trailing_factor(self, reg: Registered, node: Node, cand: Cand, moment: Moment) -> float:
        """docs/semantics.md §5 and choice 10: trailing blockers arrived after the last positive
        event and before ``moment``, with ``last.end <= x.start`` and ``x.end <= start +
        T``."""
        assert node.window is not None
        deadline = cand.start + node.window
        factor = 1.0
        for comp in node.trailing():
            left, _ = node.neighbours(comp)
            assert left is not None
            left_bound = cand.binding[left.idx]
            for x in self._blockers(
                reg, node, comp, cand, moment, lambda x, lb=left_bound: _before(lb, x) and x.end <= deadline
            ):
                factor *= 1.0 - x.prob
        return factor

    def _hold_trailing(self, reg: Registered, node: Node, cand: Cand, moment: Moment) -> None:
        """A candidate with a trailing negation waits until the clock exceeds its
        deadline; if it already does, it is emitted now (choice 10)."""
        assert node.window is not None
        deadline = cand.start + node.window
        if self.clock > deadline:
            self._finish(reg, node, cand, cand.prob * self._trailing_factor(reg, node, cand, moment), moment)
        else:
            reg.pending.append((node, cand, deadline))

    def _fire_pending(self, reg: Registered, node: Node, moment: Moment) -> None:
        """Phase 0 of an op: emit the pending candidates whose deadline the clock now
        exceeds."""
        due = [(n, c, d) for n, c, d in reg.pending if n is node and self.clock > d]
        reg.pending = [p for p in reg.pending if not (p[0] is node and self.clock > p[2])]
        for n, cand, _ in due:
            self._finish(reg, n, cand, cand.prob * self._trailing_factor(reg, n, cand, moment), moment)


def _roles_in_order(comps: list[Comp], combo: tuple[Inst, ...]) -> bool:
    """docs/semantics.md §4: components with the same classes take their instances in
    arrival order (each set of instances is one match)."""
    return not any(
        comps[i].classes == comps[j].classes and not combo[i].key < combo[j].key
        for i in range(len(combo))
        for j in range(i + 1, len(combo))
    )


def _src_key(src: Any) -> Any:
    """Sources and partition values compare by type and value (``1`` and ``"1"``
    differ; a tuple value element by element)."""
    if isinstance(src, tuple):
        return ("tuple", tuple(_src_key(v) for v in src))
    return (type(src).__name__, src)


def partition_of(q: dict[str, Any]) -> tuple[str, ...]:
    """Choice 13: the query's partition key."""
    if q.get("partition") is not None:
        return tuple(q["partition"])
    attrs: list[str] = []
    for cj in _conjuncts(q.get("where")):
        if cj["kind"] == "equiv" and cj.get("value") is None and cj["attr"] not in ("symbol", "src"):
            if cj["attr"] not in attrs:
                attrs.append(cj["attr"])
    return tuple(attrs) if attrs else ("src",)


def _view(x: Inst, key: tuple[str, ...]) -> Inst | None:
    """Choice 13: a primitive event as a query with ``key`` sees it (its ``part`` the
    key's value), or None when it lacks an attribute of the key."""
    if key == ("src",):
        return x
    if key in x.views:
        return x.views[key]
    values = [_lookup(x, a) for a in key]
    view: Inst | None = None
    if not any(v is MISSING for v in values):
        view = Inst(x.src, x.type, x.start, x.end, x.attrs, x.prob, x.pos, x.entry, x.prims)
        view.part = None if not key else values[0] if len(key) == 1 else tuple(values)
    x.views[key] = view
    return view


# ============================================================================= API


def evaluate(ops: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Run ``ops`` and return the matches in emission order."""
    return Reference().run(ops)


def evaluate_queries(
    queries: list[tuple[str, dict[str, Any]]], events: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Register ``queries``, feed ``events``, then flush the clock to +inf."""
    ops: list[tuple[Any, ...]] = [("register", name, q) for name, q in queries]
    ops += [("event", e) for e in events]
    ops.append(("time", INF))
    return evaluate(ops)
