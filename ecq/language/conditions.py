"""Grammar of conditions and value expressions (WHERE, RETURN), loosest first::

    or      := and (OR and)*
    and     := not ((AND | <juxtaposition after [..]>) not)*
    not     := (NOT | ! | ¬) not | cmp
    cmp     := add [ (op add)+ | [NOT] BETWEEN add AND add | [NOT] IN ( [expr (, expr)*] ) ]
    add     := mul ((+ | -) mul)*
    mul     := unary ((* | /) unary)*
    unary   := - NUMBER | - unary | primary
    primary := literal | ref . attr | func ( args ) | agg ( ref[.attr] ) | ( or ) | [ equiv, ... ]

Some constructs stand for several conjuncts: an equivalence list ``[a, b]``, a chained
comparison ``x < y < z`` and ``x BETWEEN a AND b``. They are parsed into a :class:`_Group`
that the surrounding ``AND`` splices in, so ``$20 < X.p < $50 AND Y.q > 1`` is one
``BoolOp('and', ...)`` of three comparisons; standing alone they become a ``BoolOp``.
``[symbol]`` and ``[src]`` are empty groups: they vanish from an ``AND`` and are an
error anywhere else.

A bare ``[..]`` is a condition, never a value: no operator may follow it (parenthesise it
to compare it), and when an expression directly follows its ``]`` the two are ANDed —
``[symbol] $20 < X.p`` reads ``X.p > 20``. ``-`` followed by a number is a negative
literal (``-5`` is ``Lit(-5)``); ``-(5)`` and ``-x.a`` are ``Neg``.
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
    Prev,
)
from ecq.language.keywords import AGGREGATES, FUNCTIONS, NO_OP_EQUIVS, PREVIOUS, RESERVED
from ecq.language.lexer import DERIVED, IDENT, MONEY, NUMBER, PERCENT, POSREF, STRING, Token
from ecq.language.stream import TokenStream

__all__ = ["parse_condition", "parse_expression"]

_CMP_OPS = frozenset({"=", "!=", "<", "<=", ">", ">="})
_NUMBER_KINDS = (NUMBER, MONEY, PERCENT)


class _Group:
    """Conjuncts written as one unit; spliced into an enclosing AND."""

    __slots__ = ("token", "items", "bracket")

    def __init__(self, token: Token, items: list[Expr] | None = None, bracket: bool = False) -> None:
        self.token = token
        self.items: list[Expr] = items if items is not None else []
        # Written as a bare [..]: may be followed by a juxtaposed operand.
        self.bracket = bracket


_Parsed = Expr | _Group


def parse_condition(ts: TokenStream) -> Expr | None:
    """A WHERE condition; ``None`` when it consisted only of ``[symbol]``/``[src]``."""
    result = _or(ts)
    if isinstance(result, _Group) and not result.items:
        return None
    return _as_expr(ts, result)


def parse_expression(ts: TokenStream) -> Expr:
    """One expression (a RETURN item, an IN value, a function argument)."""
    return _as_expr(ts, _or(ts))


def _as_expr(ts: TokenStream, parsed: _Parsed) -> Expr:
    if not isinstance(parsed, _Group):
        return parsed
    if not parsed.items:
        raise ts.error(
            "[symbol] and [src] are the always-true same-source test; they can only be conjuncts of WHERE",
            parsed.token,
        )
    if len(parsed.items) == 1:
        return parsed.items[0]
    return ts.mark(BoolOp("and", tuple(parsed.items)), parsed.token)


def _or(ts: TokenStream) -> _Parsed:
    first = _and(ts)
    operands: list[_Parsed] = [first]
    op_tok: Token | None = None
    while ts.tok.key == "OR":
        tok = ts.next()
        op_tok = op_tok or tok
        operands.append(_and(ts))
    if op_tok is None:
        return first
    return ts.mark(BoolOp("or", tuple(_as_expr(ts, o) for o in operands)), op_tok)


def _starts_operand(tok: Token) -> bool:
    """Whether ``tok`` can begin an operand (for juxtaposition after ``]``)."""
    if tok.kind in (NUMBER, MONEY, PERCENT, STRING, POSREF, DERIVED):
        return True
    if tok.kind == IDENT:
        return tok.key not in RESERVED or tok.key in ("TRUE", "FALSE", "NOT")
    return tok.key in ("(", "[", "-", "!", "NOT")


def _and(ts: TokenStream) -> _Parsed:
    start = ts.tok
    first = _not(ts)
    if ts.tok.key != "AND" and not (isinstance(first, _Group) and first.bracket and _starts_operand(ts.tok)):
        return first
    # Groups are spliced in: their conjuncts become this AND's operands.
    items: list[Expr] = list(first.items) if isinstance(first, _Group) else [first]
    op_tok: Token | None = None
    last = first
    while True:
        if ts.tok.key == "AND":
            tok = ts.next()
            op_tok = op_tok or tok
        elif not (isinstance(last, _Group) and last.bracket and _starts_operand(ts.tok)):
            break
        last = _not(ts)
        if isinstance(last, _Group):
            items.extend(last.items)
        else:
            items.append(last)
    if not items:
        return _Group(start)
    if len(items) == 1:
        return items[0]
    return ts.mark(BoolOp("and", tuple(items)), op_tok or start)


def _not(ts: TokenStream) -> _Parsed:
    if ts.tok.key == "[":
        return _equivalence(ts)  # what _cmp would give: a bare [..] takes no operator
    if ts.tok.key in ("NOT", "!"):
        tok = ts.next()
        return ts.mark(Not(_as_expr(ts, _not(ts))), tok)
    return _cmp(ts)


def _cmp(ts: TokenStream) -> _Parsed:
    left = _add(ts)
    if isinstance(left, _Group):
        return left
    if ts.tok.key in _CMP_OPS:
        compares: list[Expr] = []
        first_tok = ts.tok
        while ts.tok.key in _CMP_OPS:
            tok = ts.next()
            right = _add(ts)
            if isinstance(right, _Group):
                right = _as_expr(ts, right)
            compares.append(ts.mark(Compare(tok.key, left, right), tok))
            left = right
        if len(compares) == 1:
            return compares[0]
        return _Group(first_tok, compares)
    not_tok = None
    if ts.tok.key == "NOT" and ts.peek(1).key in ("BETWEEN", "IN"):
        not_tok = ts.next()
    if ts.tok.key == "BETWEEN":
        tok = ts.next()
        low = _as_expr(ts, _add(ts))
        ts.expect("AND", f"expected AND after the lower bound of BETWEEN, found {ts.describe(ts.tok)}")
        high = _as_expr(ts, _add(ts))
        group = _Group(tok, [ts.mark(Compare(">=", left, low), tok), ts.mark(Compare("<=", left, high), tok)])
        return ts.mark(Not(_as_expr(ts, group)), not_tok) if not_tok else group
    if ts.tok.key == "IN":
        tok = ts.next()
        ts.expect("(", "expected '(' after IN")
        values: list[Expr] = []
        if ts.tok.key != ")":
            values.append(parse_expression(ts))
            while ts.accept(","):
                values.append(parse_expression(ts))
        ts.expect(")", "expected ',' or ')' in the IN list")
        node = ts.mark(InList(left, tuple(values)), tok)
        return ts.mark(Not(node), not_tok) if not_tok else node
    return left


def _add(ts: TokenStream) -> _Parsed:
    left = _mul(ts)
    if ts.tok.key not in ("+", "-") or isinstance(left, _Group):
        return left
    while ts.tok.key in ("+", "-"):
        tok = ts.next()
        right = _as_expr(ts, _mul(ts))
        left = ts.mark(Arith(tok.key, left, right), tok)
    return left


def _mul(ts: TokenStream) -> _Parsed:
    left = _primary(ts) if ts.tok.key != "-" else _unary(ts)
    if ts.tok.key not in ("*", "/") or isinstance(left, _Group):
        return left
    while ts.tok.key in ("*", "/"):
        tok = ts.next()
        right = _as_expr(ts, _unary(ts))
        left = ts.mark(Arith(tok.key, left, right), tok)
    return left


def _unary(ts: TokenStream) -> _Parsed:
    if ts.tok.key == "-":
        tok = ts.next()
        if ts.tok.kind in _NUMBER_KINDS:
            value = ts.next().value
            assert isinstance(value, (int, float))
            return ts.mark(Lit(-value), tok)
        return ts.mark(Neg(_as_expr(ts, _unary(ts))), tok)
    return _primary(ts)


def _primary(ts: TokenStream) -> _Parsed:
    tok = ts.tok
    if tok.kind in _NUMBER_KINDS or tok.kind == STRING:
        ts.next()
        assert tok.value is not None
        return ts.mark(Lit(tok.value), tok)
    if tok.key in ("TRUE", "FALSE") and tok.kind == IDENT:
        ts.next()
        return ts.mark(Lit(tok.key == "TRUE"), tok)
    if tok.key == "(":
        ts.next()
        inner = _as_expr(ts, _or(ts))
        ts.expect(")", f"expected ')' to close the '(' at line {tok.line}, column {tok.column}")
        return inner
    if tok.key == "[":
        return _equivalence(ts)
    if tok.kind == IDENT and ts.peek(1).key == "(":
        return _call(ts)
    if _is_ref(tok):
        ts.next()
        if ts.tok.key == "[":
            return _element(ts, tok)
        return ts.mark(AttrRef(tok.text, _attribute(ts, tok)), tok)
    if tok.kind == IDENT and tok.key in RESERVED:
        raise ts.error(f"expected an expression, found the keyword {tok.text!r}")
    raise ts.error(f"expected an expression, found {ts.describe(tok)}")


def _is_ref(tok: Token) -> bool:
    return tok.kind in (POSREF, DERIVED) or (tok.kind == IDENT and tok.key not in RESERVED)


def _attribute(ts: TokenStream, ref: Token) -> str:
    if not ts.accept("."):
        raise ts.error(f"expected '.' and an attribute after {ref.text!r} (write {ref.text}.<attribute>)")
    if ts.tok.kind != IDENT:
        raise ts.error(f"expected an attribute name after '{ref.text}.'")
    return ts.next().text


def _element(ts: TokenStream, ref: Token) -> Expr:
    """SASE+'s elements of a Kleene run, after ``ref``: ``b[i].x`` (the element being
    added), ``b[i-1].x`` (the one before it), ``b[1].x`` / ``b[first].x`` and
    ``b[last].x`` (the group's first and last elements)."""
    open_tok = ts.next()  # '['
    tok = ts.tok
    word = tok.text.lower() if tok.kind == IDENT else None
    which = None
    if word == "i-1":
        ts.next()
        which = "prev"
    elif word == "i":
        ts.next()
        which = "prev" if ts.accept("-") is not None and _one(ts) else "this"
    elif word in ("first", "last"):
        ts.next()
        which = word
    elif tok.kind == NUMBER and tok.value == 1 and not isinstance(tok.value, bool):
        ts.next()
        which = "first"
    if which is None:
        raise ts.error(
            f"expected i, i-1, 1, first or last in {ref.text}[...], found {ts.describe(tok)}"
            " (other positions of a run are not supported)"
        )
    ts.expect("]", f"expected ']' after {ref.text}[{tok.text}")
    attr = _attribute(ts, ref)
    if which == "this":
        return ts.mark(AttrRef(ref.text, attr), ref)
    if which == "prev":
        return ts.mark(Prev(ref.text, attr), ref)
    del open_tok
    return ts.mark(Agg(which, ref.text, attr), ref)


def _one(ts: TokenStream) -> bool:
    """The ``1`` of ``b[i - 1]``."""
    tok = ts.tok
    if tok.kind != NUMBER or tok.value != 1:
        raise ts.error(f"expected 1 in [i - 1], found {ts.describe(tok)}")
    ts.next()
    return True


def _call(ts: TokenStream) -> Expr:
    name_tok = ts.next()
    name = name_tok.text.lower()
    ts.next()  # '('
    if name == PREVIOUS:
        ref = ts.tok
        if not _is_ref(ref):
            raise ts.error("expected a Kleene component's attribute in prev(...), as in prev(b.price)")
        ts.next()
        prev_attr = _attribute(ts, ref)
        ts.expect(")", "expected ')' after the argument of prev()")
        return ts.mark(Prev(ref.text, prev_attr), name_tok)
    if name in AGGREGATES:
        ref = ts.tok
        if not _is_ref(ref):
            raise ts.error(f"expected a Kleene component reference in {name}(...)")
        ts.next()
        if name != "count" and ts.tok.key != ".":
            raise ts.error(f"{name}() needs an attribute, as in {name}({ref.text}.price)")
        attr = _attribute(ts, ref) if ts.tok.key == "." else None
        ts.expect(")", f"expected ')' after the argument of {name}()")
        return ts.mark(Agg(name, ref.text, attr), name_tok)
    if name in FUNCTIONS:
        args: list[Expr] = []
        if ts.tok.key != ")":
            args.append(parse_expression(ts))
            while ts.accept(","):
                args.append(parse_expression(ts))
        ts.expect(")", f"expected ',' or ')' in the arguments of {name}()")
        return ts.mark(Func(name, tuple(args)), name_tok)
    known = ", ".join(sorted(AGGREGATES | FUNCTIONS))
    raise ts.error(f"unknown function {name_tok.text!r} (known: {known})", name_tok)


def _equivalence(ts: TokenStream) -> _Group:
    """``[a]``, ``[a, b]``, ``[a='v']``; ``[symbol]``/``[src]`` give nothing."""
    open_tok = ts.next()
    group = _Group(open_tok, bracket=True)
    while True:
        attr_tok = ts.tok
        if attr_tok.kind != IDENT:
            raise ts.error("expected an attribute name in the equivalence test [...]")
        ts.next()
        if ts.tok.key == "=":
            ts.next()
            group.items.append(ts.mark(Equiv(attr_tok.text, _literal(ts)), attr_tok))
        elif attr_tok.text.lower() not in NO_OP_EQUIVS:
            group.items.append(ts.mark(Equiv(attr_tok.text), attr_tok))
        if not ts.accept(","):
            break
    ts.expect("]", "expected ',' or ']' in the equivalence test")
    return group


def _literal(ts: TokenStream) -> Lit:
    tok = ts.tok
    negative = ts.accept("-") is not None
    value_tok = ts.tok
    if value_tok.kind in _NUMBER_KINDS:
        ts.next()
        value = value_tok.value
        assert isinstance(value, (int, float))
        return ts.mark(Lit(-value if negative else value), tok)
    if not negative and value_tok.kind == STRING:
        ts.next()
        assert isinstance(value_tok.value, str)
        return ts.mark(Lit(value_tok.value), tok)
    if not negative and value_tok.kind == IDENT and value_tok.key in ("TRUE", "FALSE"):
        ts.next()
        return ts.mark(Lit(value_tok.key == "TRUE"), tok)
    raise ts.error("expected a literal (number, 'text', true or false)")
