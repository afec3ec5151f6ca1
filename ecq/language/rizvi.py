"""Rizvi's TelegraphCQ event queries (UCB TR 2005, §3.2) read into the one AST:

::

    SELECT <* | alias.* | alias.attr [AS name], ...>
    FROM <stream> <alias> [<alias> ...] [, <stream> <alias> ...]
    [PARTITION BY <attr>, ... | NONE]
    [EVENT] <event expression>
    [WHERE <condition>]

Streams are event classes, each alias one component of that class. The operators map
onto scemon's (docs/language.md, "Rizvi's event queries"):

============================  ==============================
``FOLLOWS(E1, E2, t)``        ``SEQ(E1, E2)``
``NOTFOLLOWS(E1, E2, t)``     ``SEQ(E1, !E2)`` (trailing negation)
``NOTPRECEDES(E1, E2, t)``    ``SEQ(!E2, E1)`` (leading negation)
``BOTH(E1, E2, t)``           ``AND(E1, E2)``
``ANYONE(E1, E2)``            ``OR(E1, E2)``
============================  ==============================

A nested operator is a sub-pattern. Sub-patterns take their query's window, so every
time argument of one query must be the same duration (it becomes ``WITHIN``); a query
whose operators have different windows is refused, naming the argument, and is written
as queries that read each other through ``@name``. The time arguments are strings
(``'1 sec'``, ``'3 sec'``, ``'1 min'``) in the units of ``WITHIN``. Each alias is one
component, so an alias may appear once in the event expression (once in each
alternative of ``ANYONE``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ecq.language.ast import AttrRef, Component, Conj, Disj, Expr, Pattern, Query, ReturnItem, Seq
from ecq.language.conditions import parse_condition
from ecq.language.keywords import DURATION_UNITS
from ecq.language.lexer import IDENT, STRING, Token
from ecq.language.partition import parse_partition
from ecq.language.stream import TokenStream

__all__ = ["parse_rizvi", "is_rizvi", "OPERATORS"]

# Operator -> number of event arguments and whether a time argument follows.
OPERATORS = {"FOLLOWS": True, "NOTFOLLOWS": True, "NOTPRECEDES": True, "BOTH": True, "ANYONE": False}


def is_rizvi(ts: TokenStream) -> bool:
    """Whether the query at the stream's position is written ``SELECT ... FROM ...``."""
    tok = ts.peek()
    return tok.kind == IDENT and tok.key == "SELECT"


@dataclass
class _State:
    streams: dict[str, str]  # alias -> stream (class)
    used: set[str]
    window: float | None = None
    window_tok: Token | None = None


def parse_rizvi(ts: TokenStream, name: str | None = None) -> Query:
    """One ``SELECT ... FROM ... [PARTITION BY ...] [EVENT] <expr> [WHERE ...]`` query."""
    ts.next()  # SELECT
    select = _select(ts)
    tok = ts.peek()
    if not (tok.kind == IDENT and tok.key == "FROM"):
        raise ts.error(f"expected FROM after the SELECT list, found {ts.describe(tok)}")
    ts.next()
    state = _State(_from(ts), set())
    partition: tuple[str, ...] | None = None
    if ts.at("PARTITION"):
        ts.next()
        partition = parse_partition(ts)
    ts.accept("EVENT")
    start = ts.peek()
    item = _expr(ts, state)
    pattern: Pattern = item.sub if item.sub is not None else Seq((item,))
    if item.sub is None:
        ts.mark(pattern, start)
    where: Expr | None = None
    if ts.accept("WHERE"):
        where = parse_condition(ts)
    if not (ts.at_end() or ts.at("QUERY")):
        raise ts.error(f"expected WHERE or the end of the query, found {ts.describe(ts.peek())}")
    returns = tuple(ReturnItem(AttrRef(alias, attr), None) for alias, attr in select)
    for alias, _ in select:
        if alias not in state.streams:
            raise ts.error(f"SELECT names {alias!r}, which FROM does not bind")
    return Query(
        pattern=pattern,
        where=where,
        within=state.window,
        mode="all",
        returns=returns,
        name=name,
        partition=partition,
    )


def _select(ts: TokenStream) -> list[tuple[str, str]]:
    """``*``, ``alias.*`` (everything: no RETURN) or ``alias.attr`` items."""
    out: list[tuple[str, str]] = []
    while True:
        tok = ts.peek()
        if tok.key == "*":
            ts.next()
        elif tok.kind == IDENT and ts.peek(1).key == "." and ts.peek(2).key == "*":
            ts.next(), ts.next(), ts.next()
        elif tok.kind == IDENT and ts.peek(1).key == "." and ts.peek(2).kind == IDENT:
            ts.next(), ts.next()
            out.append((tok.text, ts.next().text))
        else:
            raise ts.error(f"expected *, alias.* or alias.attr in SELECT, found {ts.describe(tok)}")
        if not ts.accept(","):
            return out


def _from(ts: TokenStream) -> dict[str, str]:
    """``stream alias [alias ...] [, stream alias ...]``: alias -> stream."""
    streams: dict[str, str] = {}
    while True:
        stream = ts.peek()
        if stream.kind != IDENT:
            raise ts.error(f"expected a stream name after FROM, found {ts.describe(stream)}")
        ts.next()
        aliases = 0
        while ts.at_name() and ts.peek().key not in ("PARTITION", "EVENT", *OPERATORS):
            alias = ts.next()
            if alias.text in streams:
                raise ts.error(f"alias {alias.text!r} is bound twice in FROM", alias)
            streams[alias.text] = stream.text
            aliases += 1
        if not aliases:
            raise ts.error(f"expected an alias after stream {stream.text!r}")
        if not ts.accept(","):
            return streams


def _expr(ts: TokenStream, state: _State) -> Component:
    """An alias (a component of its stream) or an operator (a sub-pattern)."""
    tok = ts.peek()
    if tok.kind == IDENT and tok.key in OPERATORS and ts.peek(1).key == "(":
        return _operator(ts, state)
    if tok.kind == IDENT and tok.text in state.streams:
        ts.next()
        if tok.text in state.used:
            raise ts.error(
                f"alias {tok.text!r} appears twice in the event expression: bind another alias "
                "of the same stream in FROM for a second event",
                tok,
            )
        state.used.add(tok.text)
        return ts.mark(Component(classes=(state.streams[tok.text],), alias=tok.text), tok)
    raise ts.error(
        f"expected an alias bound in FROM or one of {', '.join(OPERATORS)}, found {ts.describe(tok)}"
    )


def _operator(ts: TokenStream, state: _State) -> Component:
    op = ts.next()
    ts.next()  # (
    before = set(state.used)
    left = _expr(ts, state)
    ts.expect(",", f"expected ',' after the first argument of {op.key}")
    if op.key == "ANYONE":
        # Alternatives: each may bind the same aliases (one event either way).
        after_left, state.used = state.used, set(before)
        right = _expr(ts, state)
        state.used |= after_left
    else:
        right = _expr(ts, state)
    if OPERATORS[op.key]:
        ts.expect(",", f"expected ',' and a time such as '3 sec' after the events of {op.key}")
        _window(ts, state, op.key)
    ts.expect(")", f"expected ')' to close {op.key}")
    if op.key in ("NOTFOLLOWS", "NOTPRECEDES") and right.sub is not None:
        raise ts.error(f"the second argument of {op.key} must be an alias (a stream's events)", op)
    pattern: Pattern
    if op.key == "FOLLOWS":
        pattern = Seq((left, right))
    elif op.key == "NOTFOLLOWS":
        pattern = Seq((left, Component(classes=right.classes, alias=right.alias, negated=True)))
    elif op.key == "NOTPRECEDES":
        pattern = Seq((Component(classes=right.classes, alias=right.alias, negated=True), left))
    elif op.key == "BOTH":
        pattern = Conj((left, right))
    else:
        pattern = Disj((left, right))
    ts.mark(pattern, op)
    return ts.mark(Component(sub=pattern), op)


def _window(ts: TokenStream, state: _State, op: str) -> None:
    tok = ts.peek()
    if tok.kind != STRING or not isinstance(tok.value, str):
        raise ts.error(f"expected the time of {op} as a string such as '3 sec', found {ts.describe(tok)}")
    ts.next()
    parts = tok.value.split()
    try:
        amount = float(parts[0])
        multiplier, divisor = DURATION_UNITS[parts[1].lower()] if len(parts) == 2 else (1, 1)
    except (IndexError, ValueError, KeyError):
        raise ts.error(f"{tok.text} is not a time such as '3 sec' or '1 min'", tok) from None
    if len(parts) > 2:
        raise ts.error(f"{tok.text} is not a time such as '3 sec' or '1 min'", tok)
    seconds = amount * multiplier / divisor
    if state.window is not None and seconds != state.window:
        assert state.window_tok is not None
        raise ts.error(
            f"{op}'s time {tok.text} differs from {state.window_tok.text}: the operators of one query "
            "share its window; write the parts as queries reading each other through @name",
            tok,
        )
    state.window, state.window_tok = seconds, tok
