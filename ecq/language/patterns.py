"""Grammar of patterns: the three surface forms into one AST.

::

    pattern   := SCEMON WITH item (, item)*           -- Sequence / Conjunction / Disjunction
               | disj
    disj      := conj (| conj)*                       -- ZStream infix, | loosest
    conj      := seq (& seq)*
    seq       := component (; component)*
    item      := disj                                 -- inside SEQ(...), AND(...), OR(...), WITH
    component := [!] base [+ | ^n | {n} | {m,} | {m,n} | {,n}] [alias [ '[' ']' ]]
    base      := class | @query | ANY(class, ...) | SEQ(item, ...) | AND(...) | OR(...) | ( pattern )

Operators of one level are flattened (``A; B; C`` is one ``Seq`` of three). An operand
that is itself a pattern of a tighter level (``A & B; C``), a parenthesised pattern or a
nested ``SEQ/AND/OR(...)`` becomes a :class:`Component` with ``sub``. A pattern that is a
single such plain component (``(A; B)``, ``SEQ(A, B)`` at the top) *is* that
sub-pattern: parentheses around a whole pattern are not a sub-pattern. Any other single
component ``X`` is ``Seq((X,))``.

Structural errors raised here, each at the offending token: ``!!B``; a negated component
with a Kleene closure; adjacent negated components in a sequence; a sequence or
conjunction without a positive component (``PATTERN !B``); a Kleene upper bound below its
lower bound (``B{3,2}``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ecq.language.ast import Component, Conj, Disj, Kleene, Pattern, Seq
from ecq.language.keywords import RESERVED
from ecq.language.lexer import DERIVED, IDENT, NUMBER, Token
from ecq.language.stream import TokenStream

__all__ = ["parse_pattern"]

_PatternClass = type[Seq] | type[Conj] | type[Disj]
_SCEMON: dict[str, _PatternClass] = {"SEQUENCE": Seq, "CONJUNCTION": Conj, "DISJUNCTION": Disj}
_FUNCTIONAL: dict[str, _PatternClass] = {"SEQ": Seq, "AND": Conj, "OR": Disj}
_NAMES: dict[_PatternClass, str] = {Seq: "sequence", Conj: "conjunction", Disj: "disjunction"}
_SELECTIONS = frozenset({"FIRST", "LAST"})

_Parsed = Component | Pattern


def parse_pattern(ts: TokenStream) -> Pattern:
    """The pattern of a query, in any of the three surface forms."""
    start = ts.tok
    if start.kind == IDENT and start.key in _SCEMON and ts.peek(1).key == "WITH":
        ts.next()
        ts.next()
        return _build(ts, _SCEMON[start.key], _items(ts), start)
    if not _starts_component(start):
        raise ts.error(f"expected a pattern, found {ts.describe(start)}")
    return _as_pattern(ts, _disj(ts), start)


def _starts_component(tok: Token) -> bool:
    if tok.kind == IDENT:
        return tok.key not in RESERVED or tok.key in ("SEQ", "AND", "OR", "ANY")
    return tok.kind == DERIVED or tok.key in ("!", "(")


def _as_pattern(ts: TokenStream, parsed: _Parsed, start: Token) -> Pattern:
    if not isinstance(parsed, Component):
        return parsed
    if parsed.sub is not None and not parsed.negated and parsed.kleene is None and parsed.alias is None:
        return parsed.sub
    return _build(ts, Seq, [parsed], start)


def _as_component(ts: TokenStream, parsed: _Parsed, start: Token) -> Component:
    if isinstance(parsed, Component):
        return parsed
    return ts.mark(Component(sub=parsed), start)


def _items(ts: TokenStream) -> list[Component]:
    """Comma-separated components of a functional or SCEMon pattern."""
    out = []
    while True:
        start = ts.tok
        if not _starts_component(start):
            raise ts.error(f"expected a component, found {ts.describe(start)}")
        parsed = _disj(ts)
        out.append(parsed if isinstance(parsed, Component) else _as_component(ts, parsed, start))
        if ts.tok.key != ",":
            return out
        ts.next()


# The three infix levels, loosest first: ``|`` of ``&`` of ``;`` of components. Most
# components stand alone, so each level starts from an already parsed first component
# (read once, in _disj) and returns it untouched when its operator does not follow.
_INFIX_KEYS = frozenset({"|", "&", ";"})


def _disj(ts: TokenStream) -> _Parsed:
    start = ts.tok
    first = _component(ts)
    if ts.tok.key not in _INFIX_KEYS:
        return first
    return _infix(ts, "|", Disj, _conj_from(ts, _seq_from(ts, first, start), start), start, _conj)


def _conj(ts: TokenStream) -> _Parsed:
    start = ts.tok
    return _conj_from(ts, _seq(ts), start)


def _conj_from(ts: TokenStream, first: _Parsed, start: Token) -> _Parsed:
    return _infix(ts, "&", Conj, first, start, _seq)


def _seq(ts: TokenStream) -> _Parsed:
    start = ts.tok
    return _seq_from(ts, _component(ts), start)


def _seq_from(ts: TokenStream, first: _Parsed, start: Token) -> _Parsed:
    return _infix(ts, ";", Seq, first, start, _component)


def _infix(
    ts: TokenStream,
    op: str,
    cls: _PatternClass,
    first: _Parsed,
    start: Token,
    operand: Callable[[TokenStream], _Parsed],
) -> _Parsed:
    """``first (op operand)*`` at one infix level, ``first`` already parsed."""
    if ts.tok.key != op:
        return first
    parts = [first]
    starts = [start]
    while ts.tok.key == op:
        ts.next()
        starts.append(ts.tok)
        parts.append(operand(ts))
    comps = [_as_component(ts, p, s) for p, s in zip(parts, starts, strict=True)]
    return _build(ts, cls, comps, start)


def _component(ts: TokenStream) -> Component:
    start = tok = ts.tok
    if tok.kind == IDENT and tok.key not in RESERVED:
        if tok.key in _SELECTIONS and ts.peek(1).key == ":":
            return _selected(ts)
        # The usual component: a class name, then maybe a Kleene suffix and an alias.
        ts.next()
        return _suffixes(ts, start, None, (tok.text,), None, False)
    neg_tok = ts.accept("!")
    if neg_tok is not None and ts.tok.key == "!":
        raise ts.error("two negations in a row")
    classes: tuple[str, ...] = ()
    sub: Pattern | None = None
    any_of = False
    tok = ts.tok
    if tok.kind == IDENT and tok.key in _FUNCTIONAL and ts.peek(1).key == "(":
        ts.next()
        ts.next()
        items = _items(ts)
        ts.expect(")", f"expected ',' or ')' after component, found {ts.describe(ts.tok)}")
        sub = _build(ts, _FUNCTIONAL[tok.key], items, tok)
    elif tok.kind == IDENT and tok.key == "ANY" and ts.peek(1).key == "(":
        ts.next()
        ts.next()
        names = [_class_name(ts)]
        while ts.accept(","):
            names.append(_class_name(ts))
        ts.expect(")", f"expected ',' or ')' after a class in ANY(...), found {ts.describe(ts.tok)}")
        classes, any_of = tuple(names), True
    elif tok.key == "(":
        ts.next()
        inner_start = ts.tok
        if not _starts_component(inner_start):
            raise ts.error(f"expected a pattern after '(', found {ts.describe(inner_start)}")
        sub = _as_pattern(ts, _disj(ts), inner_start)
        ts.expect(")", f"expected ')' to close the '(' at line {tok.line}, column {tok.column}")
    else:
        classes = (_class_name(ts),)
    return _suffixes(ts, start, neg_tok, classes, sub, any_of)


def _selected(ts: TokenStream) -> Component:
    """``first: <component>`` / ``last: <component>`` (the Rizvi report's metamodel:
    which instance of the component a match takes, docs/semantics.md §11)."""
    start = ts.tok
    ts.next()
    ts.next()
    if not _starts_component(ts.tok):
        raise ts.error(f"expected a component after '{start.text}:', found {ts.describe(ts.tok)}")
    if ts.tok.kind == IDENT and ts.tok.key in _SELECTIONS and ts.peek(1).key == ":":
        raise ts.error("a component has one selection, first: or last:")
    comp = _component(ts)
    if comp.negated:
        raise ts.error(f"a negated component cannot be selected with '{start.text}:'", start)
    selected = dataclasses.replace(comp, select=start.key.lower())
    if id(comp) in ts.component_tokens:
        ts.component_tokens[id(selected)] = ts.component_tokens[id(comp)]
    return ts.mark(selected, start)


def _suffixes(
    ts: TokenStream,
    start: Token,
    neg_tok: Token | None,
    classes: tuple[str, ...],
    sub: Pattern | None,
    any_of: bool,
) -> Component:
    """The Kleene suffix and the alias after a component's base; the component."""
    kleene: Kleene | None = None
    kleene_tok: Token | None = None
    if ts.tok.key in _KLEENE_KEYS:
        kleene, kleene_tok = _kleene(ts)
        if neg_tok is not None:
            raise ts.error("a negated component cannot have a Kleene closure", kleene_tok)
    alias = None
    tok = ts.tok
    if tok.kind == IDENT and tok.key not in RESERVED:
        ts.next()
        alias = tok.text
        if ts.tok.key == "[" and ts.peek(1).key == "]":  # SASE+ array alias: B+ b[]
            ts.next()
            ts.next()
    comp = Component(classes, sub, neg_tok is not None, kleene, alias, any_of)
    if neg_tok is not None or kleene_tok is not None:
        ts.component_tokens[id(comp)] = (neg_tok, kleene_tok)
    return ts.mark(comp, start)


def _class_name(ts: TokenStream) -> str:
    tok = ts.peek()
    if tok.kind == DERIVED or ts.at_name():
        return ts.next().text
    if tok.kind == IDENT:
        raise ts.error(f"expected a class name, found the keyword {tok.text!r}")
    raise ts.error(f"expected a class name, found {ts.describe(tok)}")


def _count(ts: TokenStream, after: str) -> int:
    tok = ts.peek()
    if tok.kind != NUMBER or not isinstance(tok.value, int) or tok.value < 1:
        raise ts.error(f"expected a whole number of at least 1 after {after!r}")
    ts.next()
    return tok.value


_KLEENE_KEYS = frozenset({"+", "^", "{"})


def _kleene(ts: TokenStream) -> tuple[Kleene | None, Token | None]:
    tok = ts.tok
    if ts.accept("+"):
        return Kleene(1, False), tok
    if ts.accept("^"):
        return Kleene(_count(ts, "^"), True), tok
    if ts.accept("{"):
        if ts.accept(","):  # {,n}: at most n (a group is never empty, so at least 1)
            return Kleene(1, False, _upper(ts, 1)), tok
        n = _count(ts, "{")
        if ts.accept(","):
            if ts.accept("}"):
                return Kleene(n, False), tok
            upper = _upper(ts, n)
            return (Kleene(n, True) if upper == n else Kleene(n, False, upper)), tok
        ts.expect("}", "expected '}' or ',' in a Kleene count {n}, {m,}, {m,n} or {,n}")
        return Kleene(n, True), tok
    return None, None


def _upper(ts: TokenStream, least: int) -> int:
    """The upper bound of ``{m,n}`` / ``{,n}`` and its closing brace."""
    tok = ts.peek()
    upper = _count(ts, ",")
    if upper < least:
        raise ts.error(f"a Kleene upper bound must be at least its lower bound {least}, not {upper}", tok)
    ts.expect("}", "expected '}' after the upper bound of {m,n}")
    return upper


def _build(ts: TokenStream, cls: _PatternClass, comps: list[Component], start: Token) -> Pattern:
    """Make the pattern node and check the structural rules of the module docstring."""
    pattern: Pattern = cls(tuple(comps))
    ts.mark(pattern, start)
    if cls is Disj:
        return pattern
    for comp in comps:
        if comp.negated:
            break
    else:
        return pattern  # no negated component: nothing to check
    if all(c.negated for c in comps):
        neg_tok, _ = ts.component_tokens.get(id(comps[0]), (None, None))
        if len(comps) == 1:
            raise ts.error("a negation cannot be the only component of a pattern", neg_tok or start)
        raise ts.error(
            f"a {_NAMES[cls]} needs at least one positive (not negated) component", neg_tok or start
        )
    if cls is Seq:
        for before, comp in zip(comps, comps[1:], strict=False):
            if before.negated and comp.negated:
                neg_tok, _ = ts.component_tokens.get(id(comp), (None, None))
                raise ts.error(
                    "two adjacent negated components in a sequence (write one !ANY(...) instead)",
                    neg_tok or start,
                )
    return pattern
