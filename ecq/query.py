"""Compile a query's AST into an immutable :class:`CompiledQuery`.

Compilation resolves every component reference (alias, unique class name, ``$xN``),
expands SASE equivalence tests, splits ``WHERE`` into conjuncts and sorts them into
*filters* (one component: tested before an event is stored for the query) and *checks*
(several components: tested as soon as all are bound), and compiles both to closures.
Errors point into the query text through ``Query.spans``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ecq.conditions import PredFn, ValueFn, compile_predicate, compile_value
from ecq.errors import SemanticError
from ecq.language.ast import (
    Agg,
    AttrRef,
    BoolOp,
    Compare,
    Component,
    Conj,
    Disj,
    Equiv,
    Expr,
    Lit,
    Query,
    Seq,
)

__all__ = ["Comp", "CompiledQuery", "compile_query", "KIND_SEQ", "KIND_AND", "KIND_OR"]

KIND_SEQ = "seq"
KIND_AND = "and"
KIND_OR = "or"


@dataclass(frozen=True)
class Comp:
    """A compiled component: its position, its classes and its own filter.

    ``filter_key`` identifies the filter independently of how the query names the
    component, so identical filters of different queries are evaluated once per event.
    """

    index: int
    classes: frozenset[str]
    alias: str | None
    filter: PredFn | None
    filter_key: tuple[Any, ...]


@dataclass(frozen=True)
class CompiledQuery:
    """Everything the network needs to run one query; never mutated after compile."""

    name: str
    ast: Query
    kind: str
    comps: tuple[Comp, ...]
    window: float | None
    mode_all: bool
    # Multi-component conjuncts: (positions they read, predicate over the env list).
    checks: tuple[tuple[frozenset[int], PredFn], ...]
    returns: tuple[tuple[str, ValueFn], ...]
    probability: float | None
    never: bool
    # Conjunction: for each component, the previous component with the same class set
    # (-1 if none); same-class events fill such components in arrival order.
    same_before: tuple[int, ...]
    # Conjunction: some components' class sets overlap without being equal, so one set of
    # events may be assignable in several ways and must be deduplicated.
    overlapping: bool

    @property
    def length(self) -> int:
        return len(self.comps)

    @property
    def stores(self) -> bool:
        """Whether the query keeps instances (sequence or conjunction of two or more)."""
        return self.kind != KIND_OR and len(self.comps) >= 2

    def classes(self) -> frozenset[str]:
        out: set[str] = set()
        for comp in self.comps:
            out |= comp.classes
        return frozenset(out)


def compile_query(name: str, ast: Query, text: str | None = None) -> CompiledQuery:
    """Check and compile ``ast``; ``text`` (when the query came as text) lets errors show
    an excerpt with a caret. Raises :class:`SemanticError`."""
    return _Compiler(name, ast, text).run()


class _Compiler:
    def __init__(self, name: str, ast: Query, text: str | None) -> None:
        self.name = name
        self.ast = ast
        self.text = text

    # -------------------------------------------------------------------- errors

    def error(self, message: str, path: str | None) -> SemanticError:
        span = self.ast.spans.get(path) if path else None
        if span is None:
            return SemanticError(message)
        line, column, token = span
        excerpt = None
        if self.text is not None:
            lines = self.text.splitlines()
            if 0 < line <= len(lines):
                excerpt = lines[line - 1] + "\n" + " " * (column - 1) + "^"
        return SemanticError(message, line, column, token, excerpt)

    # ---------------------------------------------------------------------- run

    def run(self) -> CompiledQuery:
        ast = self.ast
        pattern = ast.pattern
        kind = {Seq: KIND_SEQ, Conj: KIND_AND, Disj: KIND_OR}[type(pattern)]
        for i, comp in enumerate(pattern.items):
            self.check_supported(comp, f"pattern.items[{i}]")
        self.raw = pattern.items
        n = len(pattern.items)
        if kind != KIND_OR and n >= 2 and ast.within is None:
            what = "sequence" if kind == KIND_SEQ else "conjunction"
            raise self.error(f"a {what} of {n} components needs WITHIN <duration>", "pattern.items[0]")
        self.aliases: dict[str, int] = {}
        for i, comp in enumerate(pattern.items):
            if comp.alias is not None:
                if comp.alias in self.aliases:
                    raise self.error(f"alias {comp.alias!r} is used twice", f"pattern.items[{i}]")
                self.aliases[comp.alias] = i
        single_class: dict[str, list[int]] = {}
        for i, comp in enumerate(pattern.items):
            if len(comp.classes) == 1 and not comp.any_of:
                single_class.setdefault(comp.classes[0], []).append(i)
        self.by_class = single_class

        conjuncts: list[tuple[Expr, str]] = []
        if ast.where is not None:
            conjuncts = list(self.split(ast.where, "where"))
        filters: dict[int, list[Expr]] = {i: [] for i in range(n)}
        checks: list[tuple[frozenset[int], PredFn]] = []
        never = False
        for expr, path in conjuncts:
            for sub, sub_path in self.expand_equiv(expr, path, n):
                comps = self.components(sub, sub_path)
                if kind == KIND_OR and len(comps) > 1:
                    raise self.error(
                        "a condition of a disjunction may mention only one of its components", sub_path
                    )
                if not comps:
                    if not compile_predicate(sub, self.resolver(sub_path))(None):
                        never = True
                elif len(comps) == 1:
                    filters[next(iter(comps))].append(sub)
                else:
                    checks.append((frozenset(comps), compile_predicate(sub, self.resolver(sub_path))))

        compiled_comps = []
        for i, comp in enumerate(pattern.items):
            own = filters[i]
            key = tuple(_anonymise(e, self.resolve_quiet) for e in own)
            pred = None
            if own:
                expr = own[0] if len(own) == 1 else BoolOp("and", tuple(own))
                pred = compile_predicate(expr, self.resolve_quiet, single=True)
            compiled_comps.append(Comp(i, frozenset(comp.classes), comp.alias, pred, key))

        returns = []
        for i, item in enumerate(ast.returns):
            path = f"return[{i}].expr"
            self.components(item.expr, path)  # resolves every reference, raising on unknown ones
            if item.name is not None:
                label = item.name
            elif isinstance(item.expr, AttrRef):
                label = item.expr.attr
            else:
                label = f"expr{i + 1}"
            returns.append((label, compile_value(item.expr, self.resolver(path))))

        same_before = []
        overlapping = False
        for i, comp in enumerate(compiled_comps):
            prev = -1
            for j in range(i - 1, -1, -1):
                if compiled_comps[j].classes == comp.classes:
                    prev = j
                    break
                if compiled_comps[j].classes & comp.classes:
                    overlapping = True
            same_before.append(prev)
        if kind != KIND_AND:
            overlapping = False

        return CompiledQuery(
            name=self.name,
            ast=ast,
            kind=kind,
            comps=tuple(compiled_comps),
            window=ast.within,
            mode_all=ast.mode == "all",
            checks=tuple(checks),
            returns=tuple(returns),
            probability=ast.probability,
            never=never,
            same_before=tuple(same_before),
            overlapping=overlapping,
        )

    # ------------------------------------------------------------ pattern checks

    def check_supported(self, comp: Component, path: str) -> None:
        # Negation, Kleene closure and nesting parse but are not evaluated yet.
        if comp.sub is not None:
            raise self.error("nested sub-patterns are not evaluated yet", path)
        if comp.negated:
            raise self.error("negation is not evaluated yet", path)
        if comp.kleene is not None:
            raise self.error("Kleene closure is not evaluated yet", path)
        for cls in comp.classes:
            if cls.startswith("@"):
                raise self.error(f"derived class {cls} is not evaluated yet", path)

    # ---------------------------------------------------------------- references

    def resolve(self, ref: str, path: str) -> int:
        if ref in self.aliases:
            return self.aliases[ref]
        if ref.startswith("$x") and ref[2:].isdigit():
            k = int(ref[2:])
            if 1 <= k <= len(self.raw):
                return k - 1
            raise self.error(f"{ref} is out of range: the pattern has {len(self.raw)} components", path)
        hits = self.by_class.get(ref)
        if hits and len(hits) == 1:
            return hits[0]
        if hits:
            raise self.error(
                f"class {ref!r} names {len(hits)} components; give them aliases or use $xN", path
            )
        raise self.error(f"unknown component {ref!r} (no alias, class or $xN of that name)", path)

    def resolver(self, base: str) -> Callable[[str], int]:
        return lambda ref: self.resolve(ref, base)

    def resolve_quiet(self, ref: str) -> int:
        return self.resolve(ref, "where")

    def components(self, expr: Expr, path: str) -> set[int]:
        """Positions an expression reads; raises on unknown references and on aggregates
        (there is no Kleene component to aggregate over)."""
        found: set[int] = set()
        for node, node_path in _walk(expr, path):
            if isinstance(node, AttrRef):
                found.add(self.resolve(node.ref, node_path))
            elif isinstance(node, Agg):
                idx = self.resolve(node.ref, node_path)
                if self.raw[idx].kleene is None:
                    raise self.error(
                        f"{node.func}() needs a Kleene component, and {node.ref!r} is not one", node_path
                    )
                found.add(idx)
        return found

    # ---------------------------------------------------------------- conjuncts

    def split(self, expr: Expr, path: str) -> Iterator[tuple[Expr, str]]:
        if isinstance(expr, BoolOp) and expr.op == "and":
            for i, operand in enumerate(expr.operands):
                yield from self.split(operand, f"{path}.operands[{i}]")
        else:
            yield expr, path

    def expand_equiv(self, expr: Expr, path: str, n: int) -> Iterator[tuple[Expr, str]]:
        if not isinstance(expr, Equiv):
            for _node, node_path in _walk(expr, path):
                if isinstance(_node, Equiv):
                    raise self.error("an equivalence test [attr] must stand on its own in WHERE", node_path)
            yield expr, path
            return
        positives = [i for i, c in enumerate(self.raw) if not c.negated]
        if expr.value is not None:
            for i in positives:
                yield Compare("=", AttrRef(f"$x{i + 1}", expr.attr), expr.value), path
            return
        first = positives[0]
        others = positives[1:] or [first]
        for i in others:
            yield Compare("=", AttrRef(f"$x{first + 1}", expr.attr), AttrRef(f"$x{i + 1}", expr.attr)), path


def _walk(expr: Expr, path: str) -> Iterator[tuple[Expr, str]]:
    """Every node of an expression with its JSON path (the parser's span keys)."""
    yield expr, path
    for f in dataclasses.fields(expr):  # type: ignore[arg-type]
        value = getattr(expr, f.name)
        if isinstance(value, tuple):
            for i, item in enumerate(value):
                if dataclasses.is_dataclass(item) and not isinstance(item, Lit):
                    yield from _walk(item, f"{path}.{f.name}[{i}]")
        elif dataclasses.is_dataclass(value) and not isinstance(value, Lit):
            yield from _walk(value, f"{path}.{f.name}")  # type: ignore[arg-type]


def _anonymise(expr: Expr, resolve: Callable[[str], int]) -> Expr:
    """``expr`` with every component reference replaced by one placeholder, so the
    same filter written with different aliases gets the same key."""

    def rewrite(node: Any) -> Any:
        if isinstance(node, AttrRef):
            return AttrRef("$self", node.attr)
        if isinstance(node, Agg):
            return Agg(node.func, "$self", node.attr)
        if isinstance(node, tuple):
            return tuple(rewrite(x) for x in node)
        if dataclasses.is_dataclass(node) and not isinstance(node, type):
            changes = {f.name: rewrite(getattr(node, f.name)) for f in dataclasses.fields(node)}
            return dataclasses.replace(node, **changes)
        return node

    return rewrite(expr)  # type: ignore[no-any-return]
