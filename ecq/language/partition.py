"""Which events a query matches together: its partition key (docs/semantics.md,
"Partitions").

A key is a tuple of attribute names: ``("src",)`` (the default: one source),
``("symbol",)``, ``("card", "merchant")``, or ``()`` for ``PARTITION BY NONE`` (one
partition for every event). It comes from the query's ``PARTITION BY`` clause, else from
SASE equivalence tests ``[attr]`` that are conjuncts of WHERE, else the default.
"""

from __future__ import annotations

from ecq.language.ast import BoolOp, Equiv, Expr, Query
from ecq.language.keywords import CLAUSE_KEYWORDS, NO_OP_EQUIVS
from ecq.language.lexer import IDENT
from ecq.language.stream import TokenStream

__all__ = ["DEFAULT_KEY", "partition_key", "describe_key", "parse_partition"]

DEFAULT_KEY: tuple[str, ...] = ("src",)


def partition_key(query: Query) -> tuple[str, ...]:
    """The partition key of ``query``: ``PARTITION BY`` as written; without it, the
    attributes of the WHERE conjuncts ``[attr]`` (no value; ``[symbol]``/``[src]`` name the
    source) in the order written; without those, ``("src",)``."""
    if query.partition is not None:
        return query.partition
    attrs: list[str] = []
    for conjunct in _conjuncts(query.where):
        if isinstance(conjunct, Equiv) and conjunct.value is None and conjunct.attr not in NO_OP_EQUIVS:
            if conjunct.attr not in attrs:
                attrs.append(conjunct.attr)
    return tuple(attrs) if attrs else DEFAULT_KEY


def describe_key(key: tuple[str, ...]) -> str:
    """The key as ``PARTITION BY`` writes it: ``src``, ``card, merchant``, ``NONE``."""
    return ", ".join(key) if key else "NONE"


def _conjuncts(expr: Expr | None) -> list[Expr]:
    if expr is None:
        return []
    if isinstance(expr, BoolOp) and expr.op == "and":
        return [c for operand in expr.operands for c in _conjuncts(operand)]
    return [expr]


def parse_partition(ts: TokenStream) -> tuple[str, ...]:
    """``BY NONE`` or ``BY attr, attr, ...`` after PARTITION (attribute names, each once)."""
    tok = ts.peek()
    if not (tok.kind == IDENT and tok.key == "BY"):
        raise ts.error(f"expected BY after PARTITION, found {ts.describe(tok)}")
    ts.next()
    tok = ts.peek()
    if tok.kind == IDENT and tok.key == "NONE":
        ts.next()
        return ()
    attrs: list[str] = []
    while True:
        tok = ts.peek()
        if tok.kind != IDENT or tok.key in CLAUSE_KEYWORDS:
            raise ts.error(f"expected an attribute name or NONE after PARTITION BY, found {ts.describe(tok)}")
        ts.next()
        if tok.text in attrs:
            raise ts.error(f"PARTITION BY names {tok.text!r} twice", tok)
        attrs.append(tok.text)
        if not ts.accept(","):
            return tuple(attrs)
