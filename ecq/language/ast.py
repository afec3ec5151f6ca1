"""The one AST every surface form of the query language parses into (docs/semantics.md §2).

All nodes are frozen dataclasses, so a parsed query is an immutable value that can be
compared, hashed (sub-pattern sharing keys on it) and serialised. ``to_json`` /
``from_json`` give the JSON form used by the REST API (``{"pattern": ...}``); the form
round-trips exactly: ``from_json(to_json(q)) == q``.

Every node dict carries ``"kind"``. Source positions are kept on the side (``Query.spans``
is not part of equality) so that errors found after parsing can still point into the text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from ecq.errors import SemanticError

__all__ = [
    "SELECTIONS",
    "Query",
    "Pattern",
    "Seq",
    "Conj",
    "Disj",
    "Component",
    "Kleene",
    "Expr",
    "Lit",
    "AttrRef",
    "Agg",
    "Prev",
    "Arith",
    "Neg",
    "Compare",
    "BoolOp",
    "Not",
    "InList",
    "Func",
    "Equiv",
    "ReturnItem",
    "to_json",
    "from_json",
    "pattern_to_json",
    "pattern_from_json",
    "expr_to_json",
    "expr_from_json",
]


# ---------------------------------------------------------------------------- patterns


@dataclass(frozen=True)
class Kleene:
    """Kleene closure on a component.

    ``B+`` is ``Kleene(1, False)``; ``B{m,}`` is ``Kleene(m, False)`` (the maximal group,
    at least ``m``); ``B^n`` / ``B{n}`` is ``Kleene(n, True)`` (exactly ``n`` successive
    events, sliding). ``B{m,n}`` is ``Kleene(m, False, n)``: the maximal group, of ``m``
    to ``n`` events (``B{,n}`` is ``B{1,n}``); ``max`` is None without an upper bound.
    """

    min: int
    exact: bool
    max: int | None = None


@dataclass(frozen=True)
class Component:
    """One component of a pattern.

    Exactly one of ``classes`` (a class name, or several for ``ANY(...)``, or a derived
    class ``@name``) and ``sub`` (a parenthesised sub-pattern) is non-empty.
    ``any_of`` is true when written ``ANY(...)`` (kept so the canonical text reproduces it).
    ``select`` is the per-component selection written ``first:`` or ``last:`` before it
    (the Rizvi report's metamodel; docs/semantics.md §11), None without one.
    """

    classes: tuple[str, ...] = ()
    sub: Pattern | None = None
    negated: bool = False
    kleene: Kleene | None = None
    alias: str | None = None
    any_of: bool = False
    select: str | None = None


@dataclass(frozen=True)
class Seq:
    """``SEQ(E1, ..., En)`` / ``Sequence WITH`` / ``E1; E2``."""

    items: tuple[Component, ...]


@dataclass(frozen=True)
class Conj:
    """``AND(E1, ..., En)`` / ``Conjunction WITH`` / ``E1 & E2``."""

    items: tuple[Component, ...]


@dataclass(frozen=True)
class Disj:
    """``OR(E1, ..., En)`` / ``Disjunction WITH`` / ``E1 | E2``."""

    items: tuple[Component, ...]


Pattern = Union[Seq, Conj, Disj]


# ------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Lit:
    """A literal: number (currency and percent already converted), string or boolean."""

    value: int | float | str | bool


@dataclass(frozen=True)
class AttrRef:
    """``ref.attr`` where ``ref`` is an alias, a class name or ``$xN`` as written."""

    ref: str
    attr: str


@dataclass(frozen=True)
class Agg:
    """``count(b)``, ``sum(b.x)``, ``avg(b.x)``, ``min(b.x)``, ``max(b.x)`` over a Kleene
    component; ``attr`` is ``None`` for ``count``."""

    func: str
    ref: str
    attr: str | None


@dataclass(frozen=True)
class Prev:
    """``b[i-1].attr`` (SASE+; MATCH_RECOGNIZE ``PREV(b.attr)``): the attribute of the
    element before the one being added to Kleene component ``b``'s run, in an iteration
    condition (docs/semantics.md §6). ``b[i].attr`` is the element itself (``AttrRef``);
    ``b[1].attr`` / ``b[first].attr`` and ``b[last].attr`` are ``Agg('first' | 'last')``."""

    ref: str
    attr: str


@dataclass(frozen=True)
class Arith:
    """``left op right`` with ``op`` in ``+ - * /``."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Neg:
    """Unary minus."""

    operand: Expr


@dataclass(frozen=True)
class Compare:
    """``left op right`` with ``op`` in ``= != < <= > >=`` (``==`` is ``=``, ``<>`` is
    ``!=``). Chained comparisons and ``BETWEEN`` become a ``BoolOp('and', ...)`` of these."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class BoolOp:
    """``AND`` / ``OR`` over two or more operands (flattened)."""

    op: str
    operands: tuple[Expr, ...]


@dataclass(frozen=True)
class Not:
    """``NOT`` / ``¬``."""

    operand: Expr


@dataclass(frozen=True)
class InList:
    """``expr IN (v1, v2, ...)``."""

    operand: Expr
    values: tuple[Expr, ...]


@dataclass(frozen=True)
class Func:
    """A scalar function call: ``abs`` is the one function."""

    name: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Equiv:
    """SASE equivalence test ``[attr]`` (all components agree on ``attr``) or
    ``[attr='v']`` (all components have ``attr`` equal to ``v``)."""

    attr: str
    value: Lit | None = None


Expr = Union[Lit, AttrRef, Agg, Arith, Neg, Compare, BoolOp, Not, InList, Func, Equiv, Prev]


@dataclass(frozen=True)
class ReturnItem:
    """One ``RETURN`` expression and its output attribute name (``None``: derived from the
    expression's text by the compiler)."""

    expr: Expr
    name: str | None = None


# ------------------------------------------------------------------------------ query


@dataclass(frozen=True)
class Query:
    """A whole query. ``within`` is in seconds (``None`` when absent); ``mode`` is
    ``"recent"`` or ``"all"``; ``probability`` is the ``PROBABILITY >= p`` bound."""

    pattern: Pattern
    where: Expr | None = None
    within: float | None = None
    mode: str = "recent"
    returns: tuple[ReturnItem, ...] = ()
    probability: float | None = None
    name: str | None = None
    # Selection and consumption policies (docs/semantics.md §11-§12): the strategy
    # (one of STRATEGIES), the consumption ("shared" | "exclusive") and AFTER MATCH SKIP
    # (one of SKIPS, or None) with the component it names for "first" / "last".
    strategy: str = "skip-till-any-match"
    consume: str = "shared"
    skip: str | None = None
    skip_var: str | None = None
    # ``PARTITION BY``: attribute names, ``()`` for NONE; ``None`` when the query has no
    # such clause (ecq.language.partition: equivalence tests, else the source).
    partition: tuple[str, ...] | None = None
    # Source positions of nodes, keyed by id-free paths; not part of equality.
    spans: dict[str, tuple[int, int, str]] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )


# ------------------------------------------------------------------------ JSON form


def to_json(query: Query) -> dict[str, Any]:
    """The JSON form of a query (plain dicts, lists, strings and numbers)."""
    out: dict[str, Any] = {"kind": "query", "pattern": pattern_to_json(query.pattern)}
    if query.name is not None:
        out["name"] = query.name
    if query.where is not None:
        out["where"] = expr_to_json(query.where)
    if query.within is not None:
        out["within"] = query.within
    out["mode"] = query.mode
    if query.returns:
        out["return"] = [
            {"expr": expr_to_json(item.expr), **({"name": item.name} if item.name is not None else {})}
            for item in query.returns
        ]
    if query.probability is not None:
        out["probability"] = query.probability
    out.update(policy_to_json(query))
    if query.partition is not None:
        out["partition"] = list(query.partition)
    return out


MODES = ("recent", "all", "chronicle")
STRATEGIES = ("skip-till-any-match", "skip-till-next-match", "partition-contiguity", "strict-contiguity")
SKIPS = ("past-last-row", "next-row", "first", "last")
# Per-component selections (``first: A``, ``last: A``): docs/semantics.md §11.
SELECTIONS = ("first", "last")


def policy_to_json(query: Query) -> dict[str, Any]:
    """The policy keys of a query's JSON form: only those that differ from the default,
    so a query without a policy has the JSON it always had."""
    out: dict[str, Any] = {}
    if query.strategy != "skip-till-any-match":
        out["strategy"] = query.strategy
    if query.consume != "shared":
        out["consume"] = query.consume
    if query.skip is not None:
        out["skip"] = {"to": query.skip, **({"var": query.skip_var} if query.skip_var is not None else {})}
    return out


def policy_from_json(data: dict[str, Any]) -> dict[str, Any]:
    """The policy fields of :class:`Query` from its JSON form; raises
    :class:`SemanticError` naming the bad path."""
    strategy = data.get("strategy", "skip-till-any-match")
    if strategy not in STRATEGIES:
        raise SemanticError(f"$.strategy must be one of {', '.join(STRATEGIES)}")
    consume = data.get("consume", "shared")
    if consume not in ("shared", "exclusive"):
        raise SemanticError("$.consume must be 'shared' or 'exclusive'")
    skip = data.get("skip")
    to = var = None
    if skip is not None:
        if not isinstance(skip, dict) or skip.get("to") not in SKIPS:
            raise SemanticError(f"$.skip must be an object with 'to' one of {', '.join(SKIPS)}")
        to = skip["to"]
        var = skip.get("var")
        if (to in ("first", "last")) != isinstance(var, str):
            raise SemanticError("$.skip.var must name a component for 'first' and 'last' only")
    return {"strategy": strategy, "consume": consume, "skip": to, "skip_var": var}


def from_json(data: Any) -> Query:
    """Read the JSON form back; raises :class:`SemanticError` naming the bad path."""
    _expect_kind(data, "query", "$")
    pattern = pattern_from_json(data.get("pattern"), "$.pattern")
    where = expr_from_json(data["where"], "$.where") if data.get("where") is not None else None
    within = data.get("within")
    if within is not None and (
        isinstance(within, bool) or not isinstance(within, (int, float)) or within < 0
    ):
        raise SemanticError("$.within must be a non-negative number of seconds")
    mode = data.get("mode", "recent")
    if mode not in MODES:
        raise SemanticError("$.mode must be 'recent', 'all' or 'chronicle'")
    returns_raw = data.get("return", [])
    if not isinstance(returns_raw, list):
        raise SemanticError("$.return must be a list")
    returns = []
    for i, item in enumerate(returns_raw):
        if not isinstance(item, dict) or "expr" not in item:
            raise SemanticError(f"$.return[{i}] must be an object with 'expr'")
        name = item.get("name")
        if name is not None and not isinstance(name, str):
            raise SemanticError(f"$.return[{i}].name must be a string")
        returns.append(ReturnItem(expr_from_json(item["expr"], f"$.return[{i}].expr"), name))
    probability = data.get("probability")
    if probability is not None and (
        isinstance(probability, bool)
        or not isinstance(probability, (int, float))
        or not 0 <= probability <= 1
    ):
        raise SemanticError("$.probability must be a number in [0, 1]")
    name = data.get("name")
    if name is not None and not isinstance(name, str):
        raise SemanticError("$.name must be a string")
    partition = _partition_from_json(data.get("partition"))
    return Query(
        pattern=pattern,
        where=where,
        within=float(within) if within is not None else None,
        mode=mode,
        returns=tuple(returns),
        probability=float(probability) if probability is not None else None,
        name=name,
        **policy_from_json(data),
        partition=partition,
    )


def _partition_from_json(raw: Any) -> tuple[str, ...] | None:
    """``$.partition``: a list of distinct attribute names (``[]``: PARTITION BY NONE)."""
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(a, str) and a for a in raw):
        raise SemanticError("$.partition must be a list of attribute names ([] for PARTITION BY NONE)")
    if len(set(raw)) != len(raw):
        raise SemanticError("$.partition names an attribute twice")
    return tuple(raw)


_PATTERN_KINDS: dict[str, type] = {"seq": Seq, "and": Conj, "or": Disj}
_PATTERN_NAMES = {Seq: "seq", Conj: "and", Disj: "or"}


def pattern_to_json(pattern: Pattern) -> dict[str, Any]:
    return {"kind": _PATTERN_NAMES[type(pattern)], "items": [_component_to_json(c) for c in pattern.items]}


def pattern_from_json(data: Any, path: str = "$") -> Pattern:
    if not isinstance(data, dict) or data.get("kind") not in _PATTERN_KINDS:
        raise SemanticError(f"{path} must be a pattern object with kind 'seq', 'and' or 'or'")
    items = data.get("items")
    if not isinstance(items, list) or not items:
        raise SemanticError(f"{path}.items must be a non-empty list of components")
    comps = tuple(_component_from_json(item, f"{path}.items[{i}]") for i, item in enumerate(items))
    return _PATTERN_KINDS[data["kind"]](comps)  # type: ignore[no-any-return]


def _component_to_json(comp: Component) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "component"}
    if comp.sub is not None:
        out["sub"] = pattern_to_json(comp.sub)
    else:
        out["classes"] = list(comp.classes)
    if comp.any_of:
        out["any"] = True
    if comp.negated:
        out["negated"] = True
    if comp.kleene is not None:
        out["kleene"] = {"min": comp.kleene.min, "exact": comp.kleene.exact}
        if comp.kleene.max is not None:
            out["kleene"]["max"] = comp.kleene.max
    if comp.alias is not None:
        out["alias"] = comp.alias
    if comp.select is not None:
        out["select"] = comp.select
    return out


def _component_from_json(data: Any, path: str) -> Component:
    _expect_kind(data, "component", path)
    sub = None
    classes: tuple[str, ...] = ()
    if data.get("sub") is not None:
        sub = pattern_from_json(data["sub"], f"{path}.sub")
        if data.get("classes"):
            raise SemanticError(f"{path} has both 'sub' and 'classes'")
    else:
        raw = data.get("classes")
        if not isinstance(raw, list) or not raw or not all(isinstance(c, str) and c for c in raw):
            raise SemanticError(f"{path}.classes must be a non-empty list of class names")
        classes = tuple(raw)
    kleene = None
    if data.get("kleene") is not None:
        k = data["kleene"]
        if (
            not isinstance(k, dict)
            or isinstance(k.get("min"), bool)
            or not isinstance(k.get("min"), int)
            or k["min"] < 1
            or not isinstance(k.get("exact", False), bool)
        ):
            raise SemanticError(f"{path}.kleene must be {{'min': int >= 1, 'exact': bool}}")
        kmax = k.get("max")
        if kmax is not None and (
            isinstance(kmax, bool) or not isinstance(kmax, int) or kmax < k["min"] or k.get("exact", False)
        ):
            raise SemanticError(f"{path}.kleene.max must be a whole number >= min, without 'exact'")
        kleene = Kleene(k["min"], k.get("exact", False), kmax)
    alias = data.get("alias")
    if alias is not None and not isinstance(alias, str):
        raise SemanticError(f"{path}.alias must be a string")
    negated = data.get("negated", False)
    any_of = data.get("any", False)
    if not isinstance(negated, bool) or not isinstance(any_of, bool):
        raise SemanticError(f"{path}.negated and {path}.any must be booleans")
    select = data.get("select")
    if select is not None and select not in SELECTIONS:
        raise SemanticError(f"{path}.select must be one of {', '.join(SELECTIONS)}")
    return Component(
        classes=classes, sub=sub, negated=negated, kleene=kleene, alias=alias, any_of=any_of, select=select
    )


def expr_to_json(expr: Expr) -> dict[str, Any]:
    if isinstance(expr, Lit):
        return {"kind": "lit", "value": expr.value}
    if isinstance(expr, AttrRef):
        return {"kind": "attr", "ref": expr.ref, "attr": expr.attr}
    if isinstance(expr, Agg):
        out: dict[str, Any] = {"kind": "agg", "func": expr.func, "ref": expr.ref}
        if expr.attr is not None:
            out["attr"] = expr.attr
        return out
    if isinstance(expr, Prev):
        return {"kind": "prev", "ref": expr.ref, "attr": expr.attr}
    if isinstance(expr, Arith):
        return {
            "kind": "arith",
            "op": expr.op,
            "left": expr_to_json(expr.left),
            "right": expr_to_json(expr.right),
        }
    if isinstance(expr, Neg):
        return {"kind": "neg", "operand": expr_to_json(expr.operand)}
    if isinstance(expr, Compare):
        return {
            "kind": "cmp",
            "op": expr.op,
            "left": expr_to_json(expr.left),
            "right": expr_to_json(expr.right),
        }
    if isinstance(expr, BoolOp):
        return {"kind": "bool", "op": expr.op, "operands": [expr_to_json(o) for o in expr.operands]}
    if isinstance(expr, Not):
        return {"kind": "not", "operand": expr_to_json(expr.operand)}
    if isinstance(expr, InList):
        return {
            "kind": "in",
            "operand": expr_to_json(expr.operand),
            "values": [expr_to_json(v) for v in expr.values],
        }
    if isinstance(expr, Func):
        return {"kind": "func", "name": expr.name, "args": [expr_to_json(a) for a in expr.args]}
    if isinstance(expr, Equiv):
        out = {"kind": "equiv", "attr": expr.attr}
        if expr.value is not None:
            out["value"] = expr.value.value
        return out
    raise TypeError(f"not an expression: {expr!r}")


_ARITH_OPS = {"+", "-", "*", "/"}
_CMP_OPS = {"=", "!=", "<", "<=", ">", ">="}
_AGG_FUNCS = {"count", "sum", "avg", "min", "max", "first", "last"}
_FUNCS = {"abs", "floor", "ceil", "round", "int"}


def expr_from_json(data: Any, path: str = "$") -> Expr:
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
        raise SemanticError(f"{path} must be an expression object with a 'kind'")
    kind = data["kind"]

    def sub(key: str) -> Expr:
        return expr_from_json(data.get(key), f"{path}.{key}")

    def subs(key: str) -> tuple[Expr, ...]:
        raw = data.get(key)
        if not isinstance(raw, list):
            raise SemanticError(f"{path}.{key} must be a list")
        return tuple(expr_from_json(x, f"{path}.{key}[{i}]") for i, x in enumerate(raw))

    def text(key: str) -> str:
        value = data.get(key)
        if not isinstance(value, str) or not value:
            raise SemanticError(f"{path}.{key} must be a non-empty string")
        return value

    if kind == "lit":
        value = data.get("value")
        if not isinstance(value, (int, float, str, bool)):
            raise SemanticError(f"{path}.value must be a number, string or boolean")
        return Lit(value)
    if kind == "attr":
        return AttrRef(text("ref"), text("attr"))
    if kind == "agg":
        func = text("func")
        if func not in _AGG_FUNCS:
            raise SemanticError(f"{path}.func must be one of {sorted(_AGG_FUNCS)}")
        attr = data.get("attr")
        if func != "count" and not isinstance(attr, str):
            raise SemanticError(f"{path}.attr is required for {func}()")
        return Agg(func, text("ref"), attr if isinstance(attr, str) else None)
    if kind == "prev":
        return Prev(text("ref"), text("attr"))
    if kind == "arith":
        op = text("op")
        if op not in _ARITH_OPS:
            raise SemanticError(f"{path}.op must be one of + - * /")
        return Arith(op, sub("left"), sub("right"))
    if kind == "neg":
        return Neg(sub("operand"))
    if kind == "cmp":
        op = text("op")
        if op not in _CMP_OPS:
            raise SemanticError(f"{path}.op must be one of {sorted(_CMP_OPS)}")
        return Compare(op, sub("left"), sub("right"))
    if kind == "bool":
        op = text("op")
        if op not in ("and", "or"):
            raise SemanticError(f"{path}.op must be 'and' or 'or'")
        operands = subs("operands")
        if len(operands) < 2:
            raise SemanticError(f"{path}.operands needs at least two operands")
        return BoolOp(op, operands)
    if kind == "not":
        return Not(sub("operand"))
    if kind == "in":
        return InList(sub("operand"), subs("values"))
    if kind == "func":
        name = text("name")
        if name not in _FUNCS:
            raise SemanticError(f"{path}.name: unknown function {name!r}")
        return Func(name, subs("args"))
    if kind == "equiv":
        value = data.get("value")
        if value is not None and not isinstance(value, (int, float, str, bool)):
            raise SemanticError(f"{path}.value must be a number, string or boolean")
        return Equiv(text("attr"), Lit(value) if value is not None else None)
    raise SemanticError(f"{path}.kind: unknown expression kind {kind!r}")


def _expect_kind(data: Any, kind: str, path: str) -> None:
    if not isinstance(data, dict) or data.get("kind", kind) != kind:
        raise SemanticError(f"{path} must be an object of kind {kind!r}")
