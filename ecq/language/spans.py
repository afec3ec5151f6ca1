"""Turn the parser's per-node positions into ``Query.spans``, keyed by JSON path.

Keys follow the JSON form of :mod:`ecq.language.ast`: ``pattern``, ``pattern.items[0]``,
``pattern.items[1].sub.items[0]``, ``where``, ``where.operands[1].left``,
``return[0]``, ``return[0].expr.args[0]``, plus the clauses ``name``, ``within``,
``mode``, ``probability``. The compiler looks errors up by the same paths.
"""

from __future__ import annotations

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
    Pattern,
    Prev,
    Query,
)
from ecq.language.stream import TokenStream

__all__ = ["collect_spans"]

Span = tuple[int, int, str]


def collect_spans(ts: TokenStream, query: Query, clauses: dict[str, Span]) -> dict[str, Span]:
    """All known positions of ``query``'s nodes, plus the clause positions given."""
    out: dict[str, Span] = dict(clauses)
    marks = ts.marks

    def put(key: str, node: object) -> None:
        entry = marks.get(id(node))
        if entry is not None and entry[0] is node:
            tok = entry[1]
            out[key] = (tok.line, tok.column, tok.text)

    def pattern(key: str, node: Pattern) -> None:
        put(key, node)
        for i, comp in enumerate(node.items):
            comp_key = f"{key}.items[{i}]"
            put(comp_key, comp)
            if comp.sub is not None:
                pattern(f"{comp_key}.sub", comp.sub)

    def expr(key: str, node: Expr) -> None:
        put(key, node)
        if isinstance(node, _LEAVES):
            return
        if isinstance(node, (Compare, Arith)):
            expr(f"{key}.left", node.left)
            expr(f"{key}.right", node.right)
        elif isinstance(node, BoolOp):
            for i, operand in enumerate(node.operands):
                expr(f"{key}.operands[{i}]", operand)
        elif isinstance(node, (Neg, Not)):
            expr(f"{key}.operand", node.operand)
        elif isinstance(node, InList):
            expr(f"{key}.operand", node.operand)
            for i, value in enumerate(node.values):
                expr(f"{key}.values[{i}]", value)
        elif isinstance(node, Func):
            for i, arg in enumerate(node.args):
                expr(f"{key}.args[{i}]", arg)

    pattern("pattern", query.pattern)
    if query.where is not None:
        expr("where", query.where)
    for i, item in enumerate(query.returns):
        put(f"return[{i}]", item)
        expr(f"return[{i}].expr", item.expr)
    return out


# Expressions without sub-expressions.
_LEAVES = (Lit, AttrRef, Equiv, Agg, Prev)
