"""Compile WHERE / RETURN expressions to closures (no ``eval``/``exec``, ever).

A compiled expression takes an *environment*: for a multi-component condition, a list
indexed by component position whose entries are events (or, for a Kleene component, the
list of its events); for a single-component filter, the event itself (``single=True``
avoids building a list per test on the hot path).

Values follow ``docs/semantics.md``: a missing attribute, or arithmetic on something that
is not a number, gives :data:`MISSING`; a comparison that reads :data:`MISSING` is false
(true inside a negated component's conditions); mismatched kinds compare false except
``!=``.
"""

from __future__ import annotations

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
)

__all__ = ["MISSING", "ValueFn", "PredFn", "compile_value", "compile_predicate", "FALLBACK_FIELDS"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

ValueFn = Callable[[Any], Any]
PredFn = Callable[[Any], bool]

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

_NUM = (int, float)


def _kind(value: Any) -> int:
    # 0 number, 1 string, 2 boolean; bool first because bool is an int subclass.
    if value is True or value is False:
        return 2
    if isinstance(value, str):
        return 1
    return 0


def compare_values(op: str, left: Any, right: Any, missing: bool = False) -> bool:
    """``left op right`` under the comparison rules of docs/semantics.md."""
    if left is MISSING or right is MISSING:
        return missing
    tl, tr = type(left), type(right)
    if (tl is float or tl is int) and (tr is float or tr is int):
        return _CMP[op](left, right)
    kl, kr = _kind(left), _kind(right)
    if kl != kr:
        return op == "!="
    if kl == 2 and op not in ("=", "!="):
        return False
    return _CMP[op](left, right)


def _is_number(value: Any) -> bool:
    return isinstance(value, _NUM) and value is not True and value is not False


Resolver = Callable[[str], int]
AggReader = Callable[[Agg], ValueFn]


def compile_value(
    expr: Expr,
    resolve: Resolver,
    single: bool = False,
    aggregate: AggReader | None = None,
    missing: bool = False,
) -> ValueFn:
    """A closure computing ``expr``'s value from an environment.

    ``resolve`` maps a component reference as written to its position. With
    ``single=True`` the environment is one event and every reference reads it.
    ``aggregate`` compiles aggregate nodes (Kleene groups); ``missing`` is the truth value
    of a comparison that reads a missing value (used when a predicate is nested inside).
    """
    if isinstance(expr, Lit):
        value = expr.value
        return lambda env: value
    if isinstance(expr, AttrRef):
        return _attr_reader(None if single else resolve(expr.ref), expr.attr)
    if isinstance(expr, Agg):
        if aggregate is None:
            raise ValueError("aggregate outside a Kleene context")
        return aggregate(expr)
    if isinstance(expr, Arith):
        lf = compile_value(expr.left, resolve, single, aggregate, missing)
        rf = compile_value(expr.right, resolve, single, aggregate, missing)
        return _arith(expr.op, lf, rf)
    if isinstance(expr, Neg):
        inner = compile_value(expr.operand, resolve, single, aggregate, missing)

        def neg(env: Any) -> Any:
            v = inner(env)
            return -v if _is_number(v) else MISSING

        return neg
    if isinstance(expr, Func):
        if expr.name == "abs" and len(expr.args) == 1:
            arg = compile_value(expr.args[0], resolve, single, aggregate, missing)

            def absolute(env: Any) -> Any:
                v = arg(env)
                return abs(v) if _is_number(v) else MISSING

            return absolute
        raise ValueError(f"unknown function {expr.name}/{len(expr.args)}")
    # A boolean expression used as a value.
    pred = compile_predicate(expr, resolve, single, aggregate, missing)
    return pred


def compile_predicate(
    expr: Expr,
    resolve: Resolver,
    single: bool = False,
    aggregate: AggReader | None = None,
    missing: bool = False,
) -> PredFn:
    """A closure deciding ``expr`` on an environment (see :func:`compile_value`)."""
    if isinstance(expr, Compare):
        lf = compile_value(expr.left, resolve, single, aggregate, missing)
        rf = compile_value(expr.right, resolve, single, aggregate, missing)
        op = expr.op
        fn = _CMP[op]

        def compare(env: Any) -> bool:
            a = lf(env)
            b = rf(env)
            ta, tb = type(a), type(b)
            if (ta is float or ta is int) and (tb is float or tb is int):
                return fn(a, b)  # type: ignore[no-any-return]
            return compare_values(op, a, b, missing)

        return compare
    if isinstance(expr, BoolOp):
        parts = [compile_predicate(o, resolve, single, aggregate, missing) for o in expr.operands]
        if expr.op == "and":
            return lambda env: all(p(env) for p in parts)
        return lambda env: any(p(env) for p in parts)
    if isinstance(expr, Not):
        inner = compile_predicate(expr.operand, resolve, single, aggregate, missing)
        return lambda env: not inner(env)
    if isinstance(expr, InList):
        value = compile_value(expr.operand, resolve, single, aggregate, missing)
        options = [compile_value(v, resolve, single, aggregate, missing) for v in expr.values]

        def member(env: Any) -> bool:
            v = value(env)
            return any(compare_values("=", v, o(env), missing) for o in options)

        return member
    if isinstance(expr, Lit):
        truth = expr.value is True
        return lambda env: truth
    if isinstance(expr, Equiv):
        raise ValueError("equivalence tests are expanded by the query compiler")
    # A value used as a condition: true only for the boolean true.
    val = compile_value(expr, resolve, single, aggregate, missing)
    return lambda env: val(env) is True


def _attr_reader(index: int | None, name: str) -> ValueFn:
    fallback = name in FALLBACK_FIELDS
    if index is None:
        if fallback:

            def read_self_or_field(ev: Any) -> Any:
                v = ev.attrs.get(name, MISSING)
                return getattr(ev, name) if v is MISSING else v

            return read_self_or_field
        return lambda ev: ev.attrs.get(name, MISSING)
    if fallback:

        def read_or_field(env: Sequence[Any]) -> Any:
            ev = env[index]
            v = ev.attrs.get(name, MISSING)
            return getattr(ev, name) if v is MISSING else v

        return read_or_field
    return lambda env: env[index].attrs.get(name, MISSING)


def _arith(op: str, lf: ValueFn, rf: ValueFn) -> ValueFn:
    def apply(env: Any) -> Any:
        a = lf(env)
        b = rf(env)
        if not (_is_number(a) and _is_number(b)):
            return MISSING
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if b == 0:
            return MISSING
        return a / b

    return apply
