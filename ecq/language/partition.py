"""Which events a query matches together: its partition key (docs/semantics.md,
"Partitions").

A key is a tuple of attribute names: ``("src",)`` (the default: one source),
``("symbol",)``, ``("card", "merchant")``, or ``()`` for ``PARTITION BY NONE`` (one
partition for every event). It comes from the query's ``PARTITION BY`` clause, else from
SASE equivalence tests ``[attr]`` that are conjuncts of WHERE, else the default.
"""

from __future__ import annotations

from ecq.language.ast import BoolOp, Equiv, Expr, Query
from ecq.language.keywords import NO_OP_EQUIVS

__all__ = ["DEFAULT_KEY", "partition_key", "describe_key"]

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
