"""Compile WHERE / RETURN expressions to closures (no ``eval``/``exec``, ever).

A compiled expression takes an *environment*: for a multi-component condition, a list
indexed by component position whose entries are an event, a Kleene group (a list of
events) or ``None`` (not bound); for a single-component filter, the event itself
(``single=True`` avoids building a list per test on the hot path).

Values follow ``docs/semantics.md``: a missing attribute, or arithmetic on something that
is not a number (or whose result is not finite), gives :data:`MISSING`; a comparison that
reads :data:`MISSING` is false — true inside a negated component's conditions
(``negated=True``); mismatched kinds compare false except ``!=``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

from ecq.language.ast import (
    Agg,
    Arith,
    AttrRef,
    BoolOp,
    Compare,
    Equiv,
    Expr,
    Func,
    InList,
    Lit,
    Neg,
    Not,
    Prev,
)

__all__ = [
    "MISSING",
    "ValueFn",
    "PredFn",
    "compile_value",
    "compile_predicate",
    "compare_values",
    "lookup",
    "FALLBACK_FIELDS",
    "PredMaker",
    "predicate_maker",
]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

ValueFn = Callable[[Any], Any]
PredFn = Callable[[Any], bool]
# A reference to its component's index, or, for a component inside a sub-pattern, to its
# path: the top component, then its position among the positive components at each level
# (what a sub-pattern instance's ``parts`` hold).
Resolver = Callable[[str], Any]

# Event fields a condition may read when ``attrs`` lacks the name.
FALLBACK_FIELDS = frozenset({"start", "end", "src", "type", "prob"})

_CMP: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _is_number(value: Any) -> bool:
    t = type(value)
    return t is int or t is float


def lookup(event: Any, name: str) -> Any:
    """An event's attribute, falling back to its own field for ``start end src type
    prob``; :data:`MISSING` otherwise."""
    v = event.attrs.get(name, MISSING)
    if v is MISSING and name in FALLBACK_FIELDS:
        return getattr(event, name)
    return v


# An order comparison with its sides swapped: ``a op b`` is ``b FLIPPED[op] a``.
FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}


def compare_values(op: str, left: Any, right: Any, missing: bool = False) -> bool:
    """``left op right`` under the comparison rules of docs/semantics.md."""
    if left is MISSING or right is MISSING:
        return missing
    tl, tr = type(left), type(right)
    if ((tl is float or tl is int) and (tr is float or tr is int)) or (tl is str and tr is str):
        return _CMP[op](left, right)
    if tl is bool and tr is bool:
        return _CMP[op](left, right) if op in ("=", "!=") else False
    return op == "!="


def _finite(value: Any) -> Any:
    if type(value) is float and not math.isfinite(value):
        return MISSING
    return value


def _arith_op(op: str, a: Any, b: Any) -> Any:
    if not (_is_number(a) and _is_number(b)):
        return MISSING
    if op == "+":
        return _finite(a + b)
    if op == "-":
        return _finite(a - b)
    if op == "*":
        return _finite(a * b)
    if b == 0:
        return MISSING
    return _finite(a / b)


def _round_half_away(v: float) -> int:
    """``round``: half away from zero, as SQL's ROUND (2.5 -> 3, -2.5 -> -3)."""
    return int(math.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1)


# Scalar functions of one number (docs/semantics.md "Conditions"); all but abs give an int.
_FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "abs": abs,
    "floor": lambda v: int(math.floor(v)),
    "ceil": lambda v: int(math.ceil(v)),
    "round": _round_half_away,
    "int": int,  # towards zero
}


class _Compiler:
    """Compiles one expression tree; ``single`` and ``negated`` as in the module doc."""

    def __init__(self, resolve: Resolver, single: bool, negated: bool, n_components: int) -> None:
        self.resolve = resolve
        self.single = single
        self.negated = negated
        self.n = n_components

    def value(self, expr: Expr) -> ValueFn:
        if isinstance(expr, Lit):
            constant = expr.value
            return lambda env: constant
        if isinstance(expr, AttrRef):
            return self._attr(expr)
        if isinstance(expr, Agg):
            return self._aggregate(expr)
        if isinstance(expr, Prev):
            return self._previous(expr)
        if isinstance(expr, Arith):
            lf, rf, op = self.value(expr.left), self.value(expr.right), expr.op
            return lambda env: _arith_op(op, lf(env), rf(env))
        if isinstance(expr, Neg):
            inner = self.value(expr.operand)

            def neg(env: Any) -> Any:
                v = inner(env)
                return -v if _is_number(v) else MISSING

            return neg
        if isinstance(expr, Func):
            func = _FUNCTIONS.get(expr.name)
            if func is None or len(expr.args) != 1:
                raise ValueError(f"unknown function {expr.name}/{len(expr.args)}")
            arg = self.value(expr.args[0])

            def call(env: Any) -> Any:
                v = arg(env)
                if not _is_number(v) or (type(v) is float and not math.isfinite(v)):
                    return MISSING
                return func(v)

            return call
        # A condition used as a value is a boolean.
        return self.predicate(expr)

    def truth(self, expr: Expr) -> PredFn:
        """The truth of ``expr`` as an operand of AND/OR/NOT: a boolean ``True`` is true,
        a missing value is ``negated``, anything else false."""
        if isinstance(expr, (Compare, BoolOp, Not, InList, Equiv)):
            return self.predicate(expr)
        val = self.value(expr)
        negated = self.negated

        def truth(env: Any) -> bool:
            v = val(env)
            return negated if v is MISSING else v is True

        return truth

    def predicate(self, expr: Expr) -> PredFn:
        if isinstance(expr, Compare):
            if self.single:
                simple = _attr_literal(expr)
                if simple is not None:
                    return _attr_against(simple[0], simple[1], simple[2].value, self.negated)
            lf, rf, op, missing = self.value(expr.left), self.value(expr.right), expr.op, self.negated
            fn = _CMP[op]

            def compare(env: Any) -> bool:
                a = lf(env)
                b = rf(env)
                ta, tb = type(a), type(b)
                if (ta is float or ta is int) and (tb is float or tb is int):
                    return fn(a, b)
                return compare_values(op, a, b, missing)

            return compare
        if isinstance(expr, BoolOp):
            parts = tuple([self.truth(o) for o in expr.operands])
            return _every(parts) if expr.op == "and" else _some(parts)
        if isinstance(expr, Not):
            inner = self.truth(expr.operand)
            return lambda env: not inner(env)
        if isinstance(expr, InList):
            val = self.value(expr.operand)
            options = [self.value(v) for v in expr.values]
            missing = self.negated

            def member(env: Any) -> bool:
                v = val(env)
                return any(compare_values("=", v, o(env), missing) for o in options)

            return member
        if isinstance(expr, Equiv):
            return self._equiv(expr)
        return self.truth(expr)

    def _attr(self, expr: AttrRef) -> ValueFn:
        name = expr.attr
        if self.single:
            return lambda ev: lookup(ev, name)
        index = self.resolve(expr.ref)
        if type(index) is tuple:
            top, path = index[0], index[1:]

            def read_inside(env: Any) -> Any:
                ev = env[top]
                for p in path:
                    if ev is None or type(ev) is list or ev.parts is None or p >= len(ev.parts):
                        return MISSING
                    ev = ev.parts[p]
                if ev is None or type(ev) is list:
                    return MISSING
                return lookup(ev, name)

            return read_inside

        def read(env: Any) -> Any:
            ev = env[index]
            if ev is None or type(ev) is list:
                return MISSING
            return lookup(ev, name)

        return read

    def _aggregate(self, expr: Agg) -> ValueFn:
        if self.single:
            raise ValueError("an aggregate reads a Kleene group, not one event")
        index = self.resolve(expr.ref)
        func, name = expr.func, expr.attr

        def aggregate(env: Any) -> Any:
            group = env[index]
            if type(group) is not list:
                return MISSING
            if func == "count":
                return len(group)
            if name is None:
                return MISSING
            if func == "first":
                return lookup(group[0], name) if group else MISSING
            if func == "last":
                return lookup(group[-1], name) if group else MISSING
            values = [lookup(ev, name) for ev in group]
            if not values or not all(_is_number(v) for v in values):
                return MISSING
            if func == "min":
                return min(values)
            if func == "max":
                return max(values)
            total: Any = 0
            for v in values:
                total = _arith_op("+", total, v)
            return total if func == "sum" else _arith_op("/", total, len(values))

        return aggregate

    def _previous(self, expr: Prev) -> ValueFn:
        """``b[i-1].attr`` in an iteration condition: the environment then holds, after
        the components, the run's previous element (``ecq.matching.composite``)."""
        if self.single:
            raise ValueError("b[i-1] reads a Kleene run's previous element, not one event")
        self.resolve(expr.ref)
        name = expr.attr

        def previous(env: Any) -> Any:
            ev = env[-1]
            if ev is None or type(ev) is list:
                return MISSING
            return lookup(ev, name)

        return previous

    def _equiv(self, expr: Equiv) -> PredFn:
        """``[a]``: every bound event's ``a`` is equal; ``[a='v']``: every one equals
        ``v``. Kleene groups count each element; a sub-pattern instance counts its
        primitive events. Missing: false, or skipped inside a negated component's
        conditions."""
        name = expr.attr
        if name in ("symbol", "src") and expr.value is None:
            return lambda env: True
        target = expr.value.value if expr.value is not None else MISSING
        negated = self.negated
        single = self.single

        def equiv(env: Any) -> bool:
            values = []
            bound = [env] if single else env
            for b in bound:
                if b is None:
                    continue
                for inst in b if type(b) is list else (b,):
                    for ev in inst.flat or (inst,):
                        v = lookup(ev, name)
                        if v is MISSING:
                            if negated:
                                continue
                            return False
                        values.append(v)
            if target is not MISSING:
                return all(compare_values("=", v, target) for v in values)
            return all(compare_values("=", values[0], v) for v in values[1:]) if values else True

        return equiv


# A one-event filter's comparison of an attribute with a constant (``A.x > 5``, and ``$20
# < A.payment`` as ``A.payment > 20``: nearly every filter a workload of many queries
# writes) is one function, not a comparison calling two value functions: the value read
# and compared as the general comparison does (``lookup``, then ``compare_values`` unless both are numbers).
# What it reads is bound as default arguments, not closed over: one tuple per function
# rather than a cell per name, so that registering many queries makes fewer objects for
# the cyclic collector to walk. Called with the event alone.


def _attr_literal(expr: Compare) -> tuple[str, str, Lit] | None:
    """``attr op literal`` either way round, as (attribute, operator, literal) with the
    attribute on the left: ``const op attr`` is ``attr flipped-op const``
    (compare_values is symmetric so: numbers and strings by order, the rest by = and
    !=). None for any other comparison."""
    left, right = expr.left, expr.right
    if type(left) is AttrRef and type(right) is Lit:
        return left.attr, expr.op, right
    if type(left) is Lit and type(right) is AttrRef:
        return right.attr, FLIPPED[expr.op], left
    return None


def _attr_against(name: str, op: str, const: Any, missing: bool) -> PredFn:
    """``event.name op const``."""

    def compare(
        ev: Any,
        name: str = name,
        const: Any = const,
        op: str = op,
        fn: Callable[[Any, Any], bool] = _CMP[op],
        missing: bool = missing,
    ) -> bool:
        a = ev.attrs.get(name, MISSING)
        if a is MISSING and name in FALLBACK_FIELDS:
            a = getattr(ev, name)
        ta, tb = type(a), type(const)
        if (ta is float or ta is int) and (tb is float or tb is int):
            return fn(a, const)
        return compare_values(op, a, const, missing)

    return compare


def _every(parts: tuple[PredFn, ...]) -> PredFn:
    """True when every one of ``parts`` is (``AND``), tried in order until one is not.
    Bound as a default argument, as above."""

    def every(env: Any, parts: tuple[PredFn, ...] = parts) -> bool:
        for part in parts:
            if not part(env):
                return False
        return True

    return every


def _some(parts: tuple[PredFn, ...]) -> PredFn:
    """True when one of ``parts`` is (``OR``), tried in order until one is."""

    def some(env: Any, parts: tuple[PredFn, ...] = parts) -> bool:
        for part in parts:
            if part(env):
                return True
        return False

    return some


def compile_value(expr: Expr, resolve: Resolver, single: bool = False, negated: bool = False) -> ValueFn:
    """A closure computing ``expr``'s value from an environment (see module doc)."""
    return _Compiler(resolve, single, negated, 0).value(expr)


def compile_predicate(expr: Expr, resolve: Resolver, single: bool = False, negated: bool = False) -> PredFn:
    """A closure deciding ``expr`` on an environment (see module doc)."""
    return _Compiler(resolve, single, negated, 0).predicate(expr)


# A function of a query's literal values making one of its filters (predicate_maker).
PredMaker = Callable[[Sequence[Any]], PredFn]


def predicate_maker(expr: Expr, places: dict[int, int], negated: bool = False) -> PredMaker | None:
    """A function of the values of a query's literals making what
    ``compile_predicate(e, resolve, single=True, negated=negated)`` makes of ``e``:
    ``expr`` with the value ``values[places[id(lit)]]`` in each literal ``lit`` whose id
    is in ``places`` (any other literal as it is). For ``attr op literal`` and AND / OR
    of such (nearly every filter a workload of many queries writes); None for any other
    expression. Compiling queries of one shape with other constants then makes each
    filter without rebuilding its expression and compiling that (ecq.compiler.query)."""
    if type(expr) is Compare:
        simple = _attr_literal(expr)
        if simple is None:
            return None
        name, op, lit = simple
        j = places.get(id(lit))
        if j is None:
            const = lit.value
            return lambda values: _attr_against(name, op, const, negated)
        return lambda values: _attr_against(name, op, values[j], negated)
    if type(expr) is BoolOp:
        # The operands as predicate() compiles them: truth() of a comparison or an
        # AND / OR is its predicate.
        parts = [predicate_maker(o, places, negated) for o in expr.operands]
        if any(part is None for part in parts):
            return None
        combine = _every if expr.op == "and" else _some
        makers = tuple(parts)
        return lambda values: combine(tuple([make(values) for make in makers]))  # type: ignore[misc]
    return None
