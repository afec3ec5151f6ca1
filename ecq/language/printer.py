"""AST to canonical query text, such that ``parse_query(format_query(q)) == q``.

The canonical form uses the SASE functional pattern syntax (``SEQ(A a, !B, ANY(C, D) c,
E+ e)``; a single-class filter is written bare, ``PATTERN BAR_C``), one clause per line
in the order QUERY, PATTERN, PARTITION BY, WHERE, WITHIN (in seconds), MODE, RETURN, PROBABILITY, and
parenthesises conditions exactly where the grammar needs it. Printing is used to show a
registered query back to its author and to turn a query given as JSON into text, so it
refuses (``ValueError``) an AST it could not print in a
form that reads back as the same AST: a name that is not a name token, a NaN, a
``BoolOp`` of fewer than two operands, and so on.

Two ASTs have no text of their own and print as an equivalent one: an ``Equiv`` on
``symbol``/``src`` (the always-on same-source test, read back as nothing) and a
component with several classes but ``any_of`` false (read back with ``any_of`` true).
"""

from __future__ import annotations

import math
from functools import lru_cache

from ecq.errors import ParseError
from ecq.language.ast import (
    STRATEGIES,
    Agg,
    Arith,
    AttrRef,
    BoolOp,
    Compare,
    Component,
    Conj,
    Disj,
    Equiv,
    Expr,
    Func,
    InList,
    Kleene,
    Lit,
    Neg,
    Not,
    Pattern,
    Prev,
    Query,
    Seq,
)
from ecq.language.keywords import AGGREGATES, CLAUSE_KEYWORDS, FUNCTIONS, RESERVED
from ecq.language.lexer import DERIVED, EOF, IDENT, POSREF, tokenize

__all__ = ["format_query", "format_pattern", "format_expr"]

_PATTERN_WORDS = {Seq: "SEQ", Conj: "AND", Disj: "OR"}

# Binding strength of each printed form; an operand weaker than its context needs
# parentheses. A bare [..] is a condition (3): it is parenthesised in any value position.
_OR, _AND, _NOT, _CMP, _ADD, _MUL, _UNARY, _ATOM = 1, 2, 3, 4, 5, 6, 7, 8


def format_query(query: Query) -> str:
    """The canonical text of ``query``."""
    lines = []
    if query.name is not None:
        lines.append(f"QUERY {_free_name(query.name, CLAUSE_KEYWORDS)}")
    lines.append(f"PATTERN {_top_pattern(query.pattern)}")
    if query.partition is not None:
        lines.append(_partition(query.partition))
    if query.where is not None:
        lines.append(f"WHERE {format_expr(query.where)}")
    if query.within is not None:
        lines.append(f"WITHIN {_amount(query.within, 'WITHIN')} s")
    if query.mode not in ("recent", "all", "chronicle"):
        raise ValueError(f"mode must be 'recent', 'all' or 'chronicle', not {query.mode!r}")
    lines.append(f"MODE {query.mode.upper()}")
    if query.returns:
        items = []
        for item in query.returns:
            text = format_expr(item.expr)
            if item.name is not None:
                text += f" AS {_free_name(item.name, frozenset())}"
            items.append(text)
        lines.append("RETURN " + ", ".join(items))
    if query.probability is not None:
        if not 0 <= query.probability <= 1:
            raise ValueError(f"probability must be in [0, 1], not {query.probability!r}")
        lines.append(f"PROBABILITY >= {_amount(query.probability, 'PROBABILITY')}")
    lines.extend(_policy_lines(query))
    return "\n".join(lines)


_SKIP_TEXT = {
    "past-last-row": "PAST LAST ROW",
    "next-row": "TO NEXT ROW",
    "first": "TO FIRST",
    "last": "TO LAST",
}


def _policy_lines(query: Query) -> list[str]:
    """STRATEGY, CONSUME and AFTER MATCH SKIP, each when it differs from the default."""
    lines = []
    if query.strategy != "skip-till-any-match":
        if query.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {query.strategy!r}")
        lines.append(f"STRATEGY {query.strategy}")
    if query.consume != "shared":
        if query.consume != "exclusive":
            raise ValueError(f"consume must be 'shared' or 'exclusive', not {query.consume!r}")
        lines.append("CONSUME EXCLUSIVE")
    if query.skip is not None:
        if query.skip not in _SKIP_TEXT:
            raise ValueError(f"skip must be one of {', '.join(_SKIP_TEXT)}, not {query.skip!r}")
        text = f"AFTER MATCH SKIP {_SKIP_TEXT[query.skip]}"
        if query.skip in ("first", "last"):
            if query.skip_var is None:
                raise ValueError(f"AFTER MATCH SKIP {_SKIP_TEXT[query.skip]} needs a component")
            var = query.skip_var
            if not (_is_word(var) or _token_kind(var) == POSREF):
                raise ValueError(f"{var!r} cannot be written as a component reference")
            text += f" {var}"
        lines.append(text)
    return lines


def _partition(key: tuple[str, ...]) -> str:
    """``PARTITION BY a, b`` or ``PARTITION BY NONE``; an attribute named like a clause
    keyword, ``NONE`` or a non-word cannot be written (``ValueError``)."""
    if not key:
        return "PARTITION BY NONE"
    for attr in key:
        if not _is_word(attr, CLAUSE_KEYWORDS | {"NONE"}):
            raise ValueError(f"cannot write {attr!r} as an attribute of PARTITION BY")
    if len(set(key)) != len(key):
        raise ValueError("PARTITION BY names an attribute twice")
    return "PARTITION BY " + ", ".join(key)


# ------------------------------------------------------------------------- names


@lru_cache(maxsize=4096)
def _token_kind(text: str) -> str | None:
    """The kind of the single token ``text`` lexes to, if it lexes to exactly itself."""
    try:
        tokens = tokenize(text)
    except ParseError:
        return None
    if len(tokens) != 2 or tokens[1].kind != EOF or tokens[0].text != text:
        return None
    return tokens[0].kind


def _is_word(text: str, reserved: frozenset[str] = RESERVED) -> bool:
    return _token_kind(text) == IDENT and text.upper() not in reserved


def _class(name: str) -> str:
    if _is_word(name) or _token_kind(name) == DERIVED:
        return name
    raise ValueError(f"{name!r} cannot be written as a class name")


def _alias(name: str) -> str:
    if _is_word(name):
        return name
    raise ValueError(f"{name!r} cannot be written as an alias")


def _ref(name: str) -> str:
    if _is_word(name) or _token_kind(name) in (DERIVED, POSREF):
        return name
    raise ValueError(f"{name!r} cannot be written as a component reference")


def _attr(name: str) -> str:
    if _token_kind(name) == IDENT:
        return name
    raise ValueError(f"{name!r} cannot be written as an attribute name")


def _free_name(name: str, reserved: frozenset[str]) -> str:
    """A query or output name: a bare word when it reads back as one, else a string."""
    return name if _is_word(name, reserved) else _string(name)


def _string(value: str) -> str:
    out = ["'"]
    for ch in value:
        if ch in "\\'":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif not ch.isprintable():
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    out.append("'")
    return "".join(out)


def _amount(value: float, what: str) -> str:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"{what} needs a finite non-negative number, not {value!r}")
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


# ---------------------------------------------------------------------- patterns


def format_pattern(pattern: Pattern) -> str:
    """``SEQ(...)``, ``AND(...)`` or ``OR(...)`` with every component."""
    word = _PATTERN_WORDS.get(type(pattern))
    if word is None:
        raise ValueError(f"not a pattern: {pattern!r}")
    if not pattern.items:
        raise ValueError("a pattern needs at least one component")
    return f"{word}({', '.join(_component(c) for c in pattern.items)})"


def _top_pattern(pattern: Pattern) -> str:
    """A filter (one class component) is written bare, ``PATTERN BAR_C``; any other
    pattern in functional form (a lone sub-pattern component must keep its ``SEQ(..)``)."""
    if isinstance(pattern, Seq) and len(pattern.items) == 1 and pattern.items[0].sub is None:
        return _component(pattern.items[0])
    return format_pattern(pattern)


def _component(comp: Component) -> str:
    text = f"{comp.select}: " if comp.select is not None else ""
    text += "!" if comp.negated else ""
    if comp.sub is not None:
        if comp.classes:
            raise ValueError("a component has either classes or a sub-pattern, not both")
        text += format_pattern(comp.sub)
    elif not comp.classes:
        raise ValueError("a component needs a class or a sub-pattern")
    elif comp.any_of or len(comp.classes) > 1:
        text += f"ANY({', '.join(_class(c) for c in comp.classes)})"
    else:
        text += _class(comp.classes[0])
    if comp.kleene is not None:
        text += _kleene(comp.kleene)
    if comp.alias is not None:
        text += " " + _alias(comp.alias)
    return text


def _kleene(kleene: Kleene) -> str:
    if isinstance(kleene.min, bool) or not isinstance(kleene.min, int) or kleene.min < 1:
        raise ValueError(f"a Kleene closure needs a whole minimum of at least 1, not {kleene.min!r}")
    if kleene.exact:
        return f"^{kleene.min}"
    if kleene.max is not None:
        return f"{{{kleene.min},{kleene.max}}}"
    return "+" if kleene.min == 1 else f"{{{kleene.min},}}"


# ------------------------------------------------------------------- expressions


def format_expr(expr: Expr) -> str:
    """An expression as it would be written after WHERE or RETURN."""
    return _expr(expr)[0]


def _wrap(expr: Expr, strength: int) -> str:
    text, own = _expr(expr)
    return text if own >= strength else f"({text})"


def _expr(expr: Expr) -> tuple[str, int]:
    """The text of ``expr`` and how strongly it binds."""
    if isinstance(expr, Lit):
        return _literal(expr)
    if isinstance(expr, AttrRef):
        return f"{_ref(expr.ref)}.{_attr(expr.attr)}", _ATOM
    if isinstance(expr, Agg):
        return _aggregate(expr), _ATOM
    if isinstance(expr, Prev):
        return f"{_ref(expr.ref)}[i-1].{_attr(expr.attr)}", _ATOM
    if isinstance(expr, Func):
        if expr.name not in FUNCTIONS:
            raise ValueError(f"unknown function {expr.name!r}")
        return f"{expr.name}({', '.join(format_expr(a) for a in expr.args)})", _ATOM
    if isinstance(expr, Equiv):
        if expr.value is None:
            return f"[{_attr(expr.attr)}]", _NOT
        return f"[{_attr(expr.attr)} = {_literal(expr.value)[0]}]", _NOT
    if isinstance(expr, Neg):
        if isinstance(expr.operand, (AttrRef, Agg, Func, Prev)):
            return "-" + format_expr(expr.operand), _UNARY
        return f"-({format_expr(expr.operand)})", _UNARY
    if isinstance(expr, Arith):
        if expr.op not in ("+", "-", "*", "/"):
            raise ValueError(f"unknown arithmetic operator {expr.op!r}")
        own = _ADD if expr.op in "+-" else _MUL
        return f"{_wrap(expr.left, own)} {expr.op} {_wrap(expr.right, own + 1)}", own
    if isinstance(expr, Compare):
        if expr.op not in ("=", "!=", "<", "<=", ">", ">="):
            raise ValueError(f"unknown comparison operator {expr.op!r}")
        return f"{_wrap(expr.left, _ADD)} {expr.op} {_wrap(expr.right, _ADD)}", _CMP
    if isinstance(expr, InList):
        values = ", ".join(format_expr(v) for v in expr.values)
        return f"{_wrap(expr.operand, _ADD)} IN ({values})", _CMP
    if isinstance(expr, Not):
        return f"NOT {_wrap(expr.operand, _NOT)}", _NOT
    if isinstance(expr, BoolOp):
        if expr.op not in ("and", "or") or len(expr.operands) < 2:
            raise ValueError(f"a BoolOp needs 'and'/'or' and two or more operands: {expr!r}")
        own = _AND if expr.op == "and" else _OR
        joiner = f" {expr.op.upper()} "
        return joiner.join(_wrap(o, own + 1) for o in expr.operands), own
    raise ValueError(f"not an expression: {expr!r}")


def _aggregate(agg: Agg) -> str:
    if agg.func not in AGGREGATES:
        raise ValueError(f"unknown aggregate {agg.func!r}")
    if agg.attr is None:
        if agg.func != "count":
            raise ValueError(f"{agg.func}() needs an attribute")
        return f"count({_ref(agg.ref)})"
    return f"{agg.func}({_ref(agg.ref)}.{_attr(agg.attr)})"


def _literal(lit: Lit) -> tuple[str, int]:
    value = lit.value
    if isinstance(value, bool):
        return ("true" if value else "false"), _ATOM
    if isinstance(value, str):
        return _string(value), _ATOM
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} cannot be written as a number")
        text = repr(value)
    else:
        raise ValueError(f"not a literal value: {value!r}")
    return text, (_UNARY if text.startswith("-") else _ATOM)
